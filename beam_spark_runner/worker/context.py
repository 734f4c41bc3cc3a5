"""Per-process cache of decoded pipeline components (coders, windowing).

Spark reuses Python workers across tasks, so decoding the Components proto
once per process and plan (not once per partition) keeps task start cheap.
"""

import functools

from apache_beam.portability.api import beam_runner_api_pb2
from apache_beam.runners import pipeline_context


@functools.lru_cache(maxsize=16)
def components_context(components: bytes) -> pipeline_context.PipelineContext:
    proto = beam_runner_api_pb2.Components.FromString(components)
    return pipeline_context.PipelineContext(proto)


def coder_impl(components: bytes, coder_id: str):
    return components_context(components).coders[coder_id].get_impl()


@functools.lru_cache(maxsize=64)
def component_coder_ids(components: bytes, coder_id: str):
    """The component coder ids of a coder (e.g. a timer coder's key and
    window coders)."""
    return tuple(beam_runner_api_pb2.Components.FromString(components).coders[coder_id].component_coder_ids)
