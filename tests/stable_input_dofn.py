"""A Python ParDo whose DoFn requires stable input, for tests: Beam's
Python SDK has no @RequiresStableInput, so this ParDo sets the flag in its
ParDoPayload (and the pipeline requirement) as Beam Java's does for a DoFn
annotated with it."""

import apache_beam as beam
from apache_beam.portability import common_urns


class StableParDo(beam.ParDo):
    def to_runner_api_parameter(self, context, **extra_kwargs):
        urn, payload = super().to_runner_api_parameter(context, **extra_kwargs)
        payload.requires_stable_input = True
        context.add_requirement(common_urns.requirements.REQUIRES_STABLE_INPUT.urn)
        return urn, payload
