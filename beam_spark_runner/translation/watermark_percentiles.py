"""Which watermark percentile each keyed operator of a streaming plan runs
under: the pipeline's `--watermark_percentile`, or for the steps built
inside `beam_spark_runner.watermark_percentile(P)` (a Beam transform
annotation, so other runners ignore it) their own P. Pure planning: no Spark.

An operator takes the annotation of its own transforms (a GroupByKey, a
stateful or splittable DoFn's stage) or of the nearest composite around
them (the CombinePerKey whose lifted GroupByKey it runs). Two different
percentiles on one operator, or a value that is not a number in (0, 1], are
refused at submission naming the transforms.
"""

from typing import Dict, Iterable, Mapping, Optional

from apache_beam.pipeline import transform_annotations

from beam_spark_runner.errors import UnsupportedPipelineError
from beam_spark_runner.plans import OperatorKind

ANNOTATION = "beam_spark_runner.watermark_percentile"


def watermark_percentile(percentile: float):
    """A context manager: the GroupByKeys, Combines and stateful or
    splittable DoFns applied inside it run, on this runner in streaming, on
    the `percentile` low watermark (MillWheel's heuristic watermark: the
    event time a share `percentile` of the pending work has passed), while
    the rest of the pipeline keeps its own. Other runners ignore it (it is a
    Beam transform annotation). Example::

        with beam_spark_runner.watermark_percentile(0.99):
            dashboard = events | beam.WindowInto(...) | beam.CombinePerKey(sum)
    """
    if isinstance(percentile, bool) or not isinstance(percentile, (int, float)) or not 0 < percentile <= 1:
        raise ValueError(
            "watermark_percentile(%r): the percentile must be a number above 0 and at most 1" % (percentile,)
        )
    return transform_annotations(**{ANNOTATION: repr(float(percentile))})


def annotated_percentiles(components) -> Dict[str, float]:
    """{transform unique name: percentile} of the transforms carrying the
    annotation; a bad value is refused naming the transform."""
    out = {}
    for transform in components.transforms.values():
        raw = transform.annotations.get(ANNOTATION)
        if raw is None:
            continue
        out[transform.unique_name] = parse_percentile(raw, transform.unique_name)
    return out


def parse_percentile(raw, where: str) -> float:
    """An annotation's value as a percentile in (0, 1]; refused naming `where`."""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value <= 1:
        raise UnsupportedPipelineError(
            "%s: watermark percentile %r must be a number above 0 and at most 1" % (where, text)
        )
    return value


def outermost(names: Iterable[str]):
    """`names` (transform unique names) without those inside another of them, sorted."""
    chosen = set(names)
    return sorted(n for n in chosen if not any(n.startswith(other + "/") for other in chosen))


def _nearest(name: str, annotated: Mapping[str, float]) -> Optional[str]:
    """The nearest of `name` and its enclosing composites that is annotated."""
    while name:
        if name in annotated:
            return name
        name = name.rpartition("/")[0]
    return None


def _transform_names(op) -> Iterable[str]:
    if op.kind == OperatorKind.GROUP:
        return (op.display_name,)
    return tuple(n for n in op.stage.sdk_transforms if n)


def operator_percentiles(operators, components, default: float = 1.0) -> Dict[str, float]:
    """{keyed operator name: the percentile it runs under}."""
    annotated = annotated_percentiles(components)
    out = {}
    for op in operators:
        if not op.is_keyed:
            continue
        found = {}
        for name in _transform_names(op):
            owner = _nearest(name, annotated)
            if owner is not None:
                found.setdefault(annotated[owner], owner)
        if len(found) > 1:
            raise UnsupportedPipelineError(
                "%s runs as one step but its transforms ask for different watermark percentiles (%s): "
                "give them one value, or separate them (beam.Reshuffle())"
                % (op.display_name, ", ".join("%s: %s" % (owner, p) for p, owner in sorted(found.items())))
            )
        out[op.name] = next(iter(found)) if found else default
    return out
