"""The encoded single element an Impulse emits."""

from apache_beam.runners.common import ENCODED_IMPULSE_VALUE  # noqa: F401 (re-export)
