"""Errors SparkRunner raises before any Spark work starts."""


class UnsupportedPipelineError(ValueError):
    """The pipeline uses something this runner cannot run; nothing was run.
    The message names every problem: the transform, the URN or the option."""
