"""Engine-agnostic window assignment, merging and window GC rules (no Spark, no gRPC)."""
