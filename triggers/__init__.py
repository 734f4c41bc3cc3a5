"""Engine-agnostic trigger state machines, panes, accumulation and the per-key reduce driver (no Spark, no gRPC)."""
