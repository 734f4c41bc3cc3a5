"""Errors SparkRunner raises before any Spark work starts."""


class UnsupportedPipelineError(ValueError):
    """The pipeline uses something this runner cannot run; nothing was run.
    The message names every problem: the transform, the URN or the option."""


class CheckpointMismatchError(ValueError):
    """A streaming checkpoint cannot be resumed by this pipeline (its plan
    differs where the checkpoint's state depends on it, or the checkpoint's
    records are damaged); nothing was run. The message names the file and
    every operator that differs."""
