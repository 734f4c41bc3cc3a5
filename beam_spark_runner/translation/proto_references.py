"""Does a submitted pipeline proto hold together? Every id it uses must
name something it defines: transforms (roots and subtransforms), their
input and output PCollections, the PCollections' coders and windowing
strategies, coder components, side-input and state references are left to
the planner. A proto from Beam's SDKs always passes; one that fails came
from a broken client, and is refused before anything reads it."""


def dangling_references(pipeline, limit=10):
    """Messages naming the first `limit` ids that point at nothing."""
    components = pipeline.components
    problems = []

    def missing(kind, owner, ref, table):
        if ref not in table:
            problems.append("%s refers to %s %r, which the pipeline does not define" % (owner, kind, ref))

    for root in pipeline.root_transform_ids:
        missing("transform", "root_transform_ids", root, components.transforms)
    for tid, transform in components.transforms.items():
        owner = "transform %s" % (transform.unique_name or tid)
        for sub in transform.subtransforms:
            missing("transform", owner, sub, components.transforms)
        for pcoll in list(transform.inputs.values()) + list(transform.outputs.values()):
            missing("PCollection", owner, pcoll, components.pcollections)
    for pid, pcoll in components.pcollections.items():
        owner = "PCollection %s" % (pcoll.unique_name or pid)
        missing("coder", owner, pcoll.coder_id, components.coders)
        missing("windowing strategy", owner, pcoll.windowing_strategy_id, components.windowing_strategies)
    for cid, coder in components.coders.items():
        for component in coder.component_coder_ids:
            missing("coder", "coder %s" % cid, component, components.coders)
    for wid, strategy in components.windowing_strategies.items():
        missing("coder", "windowing strategy %s" % wid, strategy.window_coder_id, components.coders)
    return problems[:limit]
