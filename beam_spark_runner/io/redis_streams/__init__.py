"""`ReadFromRedisStreams`, Redis streams read by a splittable DoFn over
entry ids (`transforms.py`, sharing io/broker_reads.py), and its client
(`client.py`); docs/io.md."""
