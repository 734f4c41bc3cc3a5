"""Beam tests this runner cannot pass yet, each with the reason and the issue
that will enable it. A test leaves this list when its feature lands."""

_UNBOUNDED = ("reads an unbounded source (PeriodicImpulse / UnboundedSource); "
              "unbounded input needs the streaming runner: issue #5")
_BEAM_35168 = ("Beam skips these on every FnApiRunner variant (apache/beam#35168); they also read "
               "an unbounded PeriodicImpulse, which needs the streaming runner: issue #5")
_DRAIN = "drain (truncating SDFs on stop) is a streaming feature: issue #5"

FN_API_RUNNER_SKIPS = {
    "test_sliding_windows": _UNBOUNDED,
    "test_unbounded_source_read": _UNBOUNDED,
    "test_pardo_et_timer_with_no_firing": _BEAM_35168,
    "test_pardo_et_timer_with_no_reset": _BEAM_35168,
    "test_pardo_et_timer_with_no_reset_and_no_clear": _BEAM_35168,
    "test_sdf_with_truncate": _DRAIN,
    "test_sdf_default_truncate_when_unbounded": _DRAIN,
}
