"""Transforms of Beam Java releases that are known to give a wrong answer on
this runner, refused at submission (translation/requirements.py) instead of
run. Each rule is data: where it applies (streaming or both), the names of
the transforms it matches (Beam Java's own inner names, which a user can
prefix but not change), the Beam Java releases it covers (below a version)
and why, with what to use instead.
"""

import dataclasses
import re
from typing import Optional, Tuple

from beam_spark_runner.translation import sdk_environments


@dataclasses.dataclass(frozen=True)
class KnownProblem:
    name_pattern: str  # a regular expression searched in the transform's unique name
    below: Tuple[int, int, int]  # Beam Java releases before this one have the problem
    streaming_only: bool
    why: str


KNOWN_PROBLEMS = (
    KnownProblem(
        r"KafkaIO\.Read/KafkaIO\.Read\.ReadFromKafkaVia(SDF|Unbounded)/",
        (2, 71, 0),
        True,
        "KafkaIO's unbounded read of this Beam Java release reads, on this runner, only the messages its "
        "first bundle finds: a streaming run would stop reading the topic (measured with Beam Java 2.65.0 "
        "through Beam Java's PortableRunner, on both of KafkaIO's read paths; Beam Java 2.71.0's, which "
        "Python's cross-language ReadFromKafka uses here, reads every message). Read Kafka through "
        "apache_beam.io.kafka.ReadFromKafka from Python, or Spark's Kafka source "
        '(beam_spark_runner.io.ReadFromSpark(format="kafka"))',
    ),
)


def java_release(environment) -> Optional[Tuple[int, int, int]]:
    """The Beam Java release an environment declares (its sdk_base image's
    tag), or None."""
    sdk = sdk_environments.sdk_of(environment) or ""
    found = re.match(r"apache/beam_java\d*_sdk:(\d+)\.(\d+)\.(\d+)", sdk)
    return tuple(int(part) for part in found.groups()) if found else None


def problems(leaf_transforms, components, streaming):
    """One message per (transform, rule) that applies: `leaf_transforms`
    are (id, PTransform) pairs, `components` the pipeline's."""
    found = []
    for _, transform in leaf_transforms:
        if not transform.environment_id:
            continue
        release = java_release(components.environments[transform.environment_id])
        if release is None:
            continue
        for rule in KNOWN_PROBLEMS:
            if rule.streaming_only and not streaming:
                continue
            if release < rule.below and re.search(rule.name_pattern, transform.unique_name):
                found.append("%s (Beam Java %s): %s" % (transform.unique_name, ".".join(map(str, release)), rule.why))
    return found
