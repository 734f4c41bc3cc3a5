"""Kafka topics as the runner's exactly-once sink (docs/io.md, "Kafka")."""
