"""Cross-language transforms: Beam's Java SDK jars (the harness that runs
Java stages, the expansion services that expand Java transforms) resolved
from Maven Central, and the expansion services the runner starts for the
user (docs/cross_language.md)."""
