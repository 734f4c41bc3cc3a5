"""Other Beam runners, built or fetched outside the product, that benchmarks
run beside this runner as peers. Nothing here is a dependency of
`beam_spark_runner`.

Peers are kept under one cache directory: `$BEAM_SPARK_PEERS_CACHE` if set,
else `~/.cache/beam-spark-runner/peers`."""

import os
from pathlib import Path

CACHE_ENV = "BEAM_SPARK_PEERS_CACHE"


class PeerUnavailable(RuntimeError):
    """A peer runner could not be built, fetched or started; the message says
    which peer, which version, and why."""


def peers_cache_dir() -> Path:
    """The directory peers are cached in (not created here)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "beam-spark-runner" / "peers"
