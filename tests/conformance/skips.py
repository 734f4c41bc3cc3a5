"""Beam tests this runner cannot pass yet, each with the reason and the issue
that will enable it. A test leaves this list when its feature lands."""

_TIMERS = ("timers are rejected at submission in batch until the per-partition "
           "timer loop lands: issue #4")
_UNBOUNDED = ("reads an unbounded source (PeriodicImpulse / UnboundedSource); "
              "unbounded input needs the streaming runner: issue #5")
_DRAIN = "drain (truncating SDFs on stop) is a streaming feature: issue #5"

FN_API_RUNNER_SKIPS = {
    "test_pardo_timers": _TIMERS,
    "test_pardo_timers_clear": _TIMERS,
    "test_pardo_dynamic_timer": _TIMERS,
    "test_pardo_et_timer_with_no_firing": _TIMERS,
    "test_pardo_et_timer_with_no_reset": _TIMERS,
    "test_pardo_et_timer_with_no_reset_and_no_clear": _TIMERS,
    "test_pardo_state_timers": _TIMERS,
    "test_pardo_state_timers_non_standard_coder": _TIMERS,
    "test_windowed_pardo_state_timers": _TIMERS,
    "test_sliding_windows": _UNBOUNDED,
    "test_unbounded_source_read": _UNBOUNDED,
    "test_sdf_with_truncate": _DRAIN,
    "test_sdf_default_truncate_when_unbounded": _DRAIN,
}
