"""`ReadFromNats`, a NATS JetStream stream read by a splittable DoFn over
stream sequences (`transforms.py`, sharing io/broker_reads.py), and its
client (`client.py`); docs/io.md."""
