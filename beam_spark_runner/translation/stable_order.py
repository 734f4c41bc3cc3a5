"""One plan per pipeline: stage order and stage names that do not depend on
the process that planned them.

Beam's fusion (`translations.greedily_fuse`) walks sets of PCollection ids,
so the order in which it fuses transforms, and with it the order of a
stage's transforms, the stage's name ("(A)+(B)" after the fusion order) and
the order `sort_stages` lists the stages in, follow the interpreter's
string-hash seed. A streaming query's operators are positional in Spark's
checkpoint (state, offsets) and the runner keys hold reports and state by
stage name, so a driver restarted with another seed ran a checkpoint's state
under the wrong operators (measured: `PYTHONHASHSEED=1` and `=2` listed the
stages of a two-sink `fileio.WriteToFiles` pipeline in different orders).

`stable_stage_order` is a graph phase run after Beam's `sort_stages`: it
keeps the stages Beam fused (which transforms go together does not depend
on the seed) and rebuilds, from transform names only,

* each stage's transform order: topological by the PCollections that link
  them, ties broken by transform name;
* each stage's name: the left fold Beam's `Stage.fuse` would have produced
  for that order;
* the stage order: topological by data and `must_follow`, ties broken by
  stage name.
"""

import heapq


def _topological(items, name_of, predecessors_of):
    """`items` in an order where each follows its predecessors (those among
    `items`), ties broken by `name_of`; the result depends only on the
    names and the edges, not on the input order."""
    by_name = {}
    for item in items:
        name = name_of(item)
        if name in by_name:
            raise ValueError("two items named %r cannot be ordered by name" % name)
        by_name[name] = item
    preds = {name: {name_of(p) for p in predecessors_of(item)} & by_name.keys() for name, item in by_name.items()}
    preds = {name: p - {name} for name, p in preds.items()}
    followers = {name: [] for name in by_name}
    for name, ps in preds.items():
        for p in ps:
            followers[p].append(name)
    ready = [name for name, ps in preds.items() if not ps]
    heapq.heapify(ready)
    ordered = []
    while ready:
        name = heapq.heappop(ready)
        ordered.append(by_name[name])
        for f in followers[name]:
            preds[f].discard(name)
            if not preds[f]:
                heapq.heappush(ready, f)
    if len(ordered) != len(by_name):
        stuck = sorted(set(by_name) - {name_of(i) for i in ordered})
        raise ValueError("cycle among %s" % ", ".join(stuck))
    return ordered


def _transform_order(transforms):
    producer = {}
    for t in transforms:
        for pcoll in t.outputs.values():
            producer[pcoll] = t
    return _topological(
        transforms,
        lambda t: t.unique_name,
        lambda t: [producer[p] for p in t.inputs.values() if p in producer],
    )


def _fused_name(transforms):
    """The name Beam's `Stage.fuse` gives a stage fused in this order."""
    name = transforms[0].unique_name
    for t in transforms[1:]:
        name = "(%s)+(%s)" % (name, t.unique_name)
    return name


def stable_stage_order(stages, context):
    """Graph phase: stage order, stage names and each stage's transform
    order as functions of the pipeline alone (see the module docstring).

    A stage that holds one transform keeps its name (Beam's phases name
    some after what they stand for, e.g. "<pcoll>/Write"); a fused one is
    renamed after its canonical transform order.
    """
    stages = list(stages)
    for stage in stages:
        if len(stage.transforms) > 1:
            ordered = _transform_order(stage.transforms)
            stage.transforms[:] = ordered
            stage.name = _fused_name(ordered)
    producer = {}
    for stage in stages:
        for t in stage.transforms:
            for pcoll in t.outputs.values():
                producer[pcoll] = stage

    def predecessors(stage):
        own = {p for t in stage.transforms for p in t.outputs.values()}
        found = [producer[p] for t in stage.transforms for p in t.inputs.values() if p not in own and p in producer]
        return found + list(stage.must_follow)

    return _topological(stages, lambda s: s.name, predecessors)
