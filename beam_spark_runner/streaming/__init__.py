"""Streaming semantics without Spark: what a micro-batch does, planned and
checked in plain Python (no module here imports pyspark or py4j; the Spark
glue is execution/streaming_*.py, state_store_calls.py, checkpoint_files.py).

- rows.py: the one row shape of the streaming query;
- watermarks.py, watermark_lanes.py, source_planner.py,
  source_watermarks.py, timestamp_summary.py, key_groups.py: MillWheel
  watermarks (exact, or at a percentile of the pending work, read from
  mergeable summaries), each batch's offsets and times, the watermark of a
  Spark data source from its data, key-group labels (Spark loads these in
  its source-planning process: they import no Beam);
- operators.py, stateful_operator.py, operator_factory.py, keyed_state.py,
  side_input_wait.py, window_expiry.py, state_blobs.py: what each operator
  does with a micro-batch and how it keeps its state;
- checkpoint_coordinator.py, checkpoint_records.py, checkpoint_policies.py,
  plan_fingerprint.py: the ABS checkpoint coordinator and its records;
- driver_sink.py: the driver's end of each micro-batch (checkpoint
  acknowledgements and side effects, hold record, metrics, progress);
- progress.py: each batch's progress records and metrics;
- script.py: TestStream events compiled into source rows.
"""
