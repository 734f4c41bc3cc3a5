"""Which `kg` value each key-group carries, so that Spark puts key-group i in
shuffle partition i.

Keyed operators run as `groupBy("kg")` (and the rebalanced stateless ones
after `repartition(n, "kg")`): Spark sends a row to partition
`pmod(murmur3(kg), n)`. With the plain indexes 0..n-1 as `kg`, several
key-groups share a partition (for n = 2, both 0 and 1 hash to partition 1),
so a query on `local[2]` ran every keyed operator on one core. Each
key-group i instead carries the smallest non-negative int whose hash lands
in partition i: one key-group per partition, every core busy.

The hash is Spark's Murmur3 (x86, 32 bit, seed 42) of an int column, which
is what `HashPartitioning` and the SQL `hash()` function compute; a test
checks this copy against Spark itself. Pure Python, no Spark import.
"""

import functools

_SEED = 42
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_MASK = 0xFFFFFFFF


def _rotl(x, r):
    return ((x << r) | (x >> (32 - r))) & _MASK


def spark_hash_int(value: int) -> int:
    """Spark's `hash(CAST(value AS INT))` (Murmur3_x86_32.hashInt, seed 42),
    as a signed 32-bit int."""
    k1 = (value & _MASK) * _C1 & _MASK
    k1 = _rotl(k1, 15) * _C2 & _MASK
    h1 = _SEED ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4  # length in bytes
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def spark_partition(value: int, partitions: int) -> int:
    """The shuffle partition Spark's HashPartitioning gives an int key."""
    return spark_hash_int(value) % partitions  # Python's % is Spark's pmod


@functools.lru_cache(maxsize=None)
def labels(key_groups: int):
    """The `kg` value of each key-group: labels(n)[i] lands in partition i."""
    found = {}
    value = 0
    while len(found) < key_groups:
        found.setdefault(spark_partition(value, key_groups), value)
        value += 1
    return tuple(found[i] for i in range(key_groups))
