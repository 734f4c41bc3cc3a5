"""Batch GroupByKey panes (interim: delegates to Beam's batch trigger driver
until the engine-agnostic driver of issue #3 lands)."""
from apache_beam.transforms import trigger as _beam_trigger


def group_by_window(windowing, key, windowed_values):
    driver = _beam_trigger.create_trigger_driver(windowing, True)
    return driver.process_entire_key(key, windowed_values)
