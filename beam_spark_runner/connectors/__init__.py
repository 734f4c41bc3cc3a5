"""What the connectors under `beam_spark_runner.io` share without Spark:
event times read from a message's field (`event_times.py`). Each
connector's own client and protocol live in its package there."""
