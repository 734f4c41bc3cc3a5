"""The planning layer's one door to Beam's private pipeline phases.

Beam's FnApiRunner turns a pipeline proto into fused stages with the
phases of `apache_beam.runners.portability.fn_api_runner.translations`
(lift combiners, expand GroupByKey and SDFs, fuse, sort, ...). Beam keeps
them private; the runner plans with the same phases, so that its stages
are those Beam's own runner would build. Every planning module reaches
them through `translations` here, and `PRIVATE_APIS` lists each name the
runner uses: tests/unit/test_private_apis.py fails naming the one an
upgrade of Beam moved.
"""

from apache_beam.runners.portability.fn_api_runner import translations  # noqa: F401 -- re-exported

# Every attribute of `translations` the planning modules use.
USED_NAMES = (
    "IMPULSE_BUFFER",
    "KNOWN_COMPOSITES",
    "PAR_DO_URNS",
    "Stage",
    "TransformContext",
    "add_impulse_to_dangling_transforms",
    "annotate_downstream_side_inputs",
    "annotate_stateful_dofns_as_roots",
    "create_and_optimize_stages",
    "expand_gbk",
    "expand_sdf",
    "fix_side_input_pcoll_coders",
    "greedily_fuse",
    "impulse_to_input",
    "lift_combiners",
    "only_element",
    "pack_combiners",
    "populate_data_channel_coders",
    "read_to_impulse",
    "setup_timer_mapping",
    "side_inputs",
    "sink_flattens",
    "sort_stages",
    "split_buffer_id",
)

# (what, where the runner uses it, a check that it is still there), as in
# worker/beam_internals.PRIVATE_APIS.
PRIVATE_APIS = (
    (
        "fn_api_runner.translations." + name,
        "translation/: planning a pipeline into Beam's fused stages",
        (lambda name=name: hasattr(translations, name)),
    )
    for name in USED_NAMES
)
PRIVATE_APIS = tuple(PRIVATE_APIS)
