"""Rounds of disjoint pairs: every pair once, N-1 rounds, uplinks never oversubscribed."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cluster_plan.acceptance.schedule import circle_rounds, fits, schedule_rounds, uplink_load
from cluster_plan.acceptance.spec import Fabric, Node, spec_from_expanded


def node(name: str, switch: str, agg: str = "agg1", gbps: float = 10) -> Node:
    return Node(name, f"addr-{name}", switch, agg, gbps)


def check_complete_and_disjoint(names: list[str], rounds: list[list[tuple[str, str]]]) -> None:
    seen = [frozenset(p) for r in rounds for p in r]
    assert len(seen) == len(set(seen)), "a pair is tested twice"
    assert set(seen) == {frozenset(p) for p in itertools.combinations(names, 2)}
    for r in rounds:
        members = [n for p in r for n in p]
        assert len(members) == len(set(members)), f"a node is in two tests at once: {r}"


@given(st.integers(min_value=0, max_value=40))
def test_circle_method(count: int) -> None:
    names = [f"n{i}" for i in range(count)]
    rounds = circle_rounds(names)
    check_complete_and_disjoint(names, rounds)
    if count >= 2:
        assert len(rounds) == (count - 1 if count % 2 == 0 else count)


def test_lab_plan_takes_n_minus_one_rounds(expanded_lab: dict[str, Any]) -> None:
    spec = spec_from_expanded(expanded_lab)
    nodes = spec.networks[0].nodes
    rounds = schedule_rounds(nodes, spec.fabric)
    assert len(nodes) == 8 and len(rounds) == 7
    check_complete_and_disjoint([n.name for n in nodes], rounds)


def test_narrow_uplink_splits_rounds() -> None:
    # two racks of four 10G nodes under 10G uplinks: one cross-rack pair at a time
    nodes = [node(f"a{i}", "tor1") for i in range(4)] + [node(f"b{i}", "tor2") for i in range(4)]
    fabric = Fabric({"tor1": 10, "tor2": 10})
    rounds = schedule_rounds(nodes, fabric)
    check_complete_and_disjoint([n.name for n in nodes], rounds)
    by_name = {n.name: n for n in nodes}
    for r in rounds:
        assert uplink_load(r, by_name).get("tor1", 0) <= 10
    # 16 cross pairs, one per round at most, so at least 16 rounds
    assert len(rounds) >= 16


def test_single_pair_faster_than_uplink_still_runs() -> None:
    nodes = [node("a", "tor1", gbps=100), node("b", "tor2", gbps=100)]
    assert schedule_rounds(nodes, Fabric({"tor1": 40, "tor2": 40})) == [[("a", "b")]]


def test_aggregation_uplinks_count_for_cross_aggregation_pairs() -> None:
    a, b = node("a", "tor1", agg="agg1"), node("b", "tor2", agg="agg2")
    c, d = node("c", "tor1", agg="agg1"), node("d", "tor2", agg="agg2")
    by_name = {n.name: n for n in (a, b, c, d)}
    load = uplink_load([("a", "b"), ("c", "d")], by_name)
    assert load == {"tor1": 20, "tor2": 20, "agg1": 20, "agg2": 20}
    assert not fits([("a", "b"), ("c", "d")], by_name, Fabric({"agg1": 10}))
    assert fits([("a", "b"), ("c", "d")], by_name, Fabric({"tor1": 20, "tor2": 20}))


@settings(max_examples=60, deadline=None)
@given(
    racks=st.lists(st.integers(min_value=1, max_value=6), min_size=1, max_size=5),
    uplink=st.sampled_from([10, 20, 40, 100]),
    agg_uplink=st.sampled_from([10, 40, 1000]),
)
def test_schedule_never_oversubscribes(racks: list[int], uplink: int, agg_uplink: int) -> None:
    nodes = [
        node(f"r{r}n{i}", f"tor{r}", agg=f"agg{r % 2}")
        for r, size in enumerate(racks)
        for i in range(size)
    ]
    capacities = {f"tor{r}": float(uplink) for r in range(len(racks))}
    capacities |= {"agg0": float(agg_uplink), "agg1": float(agg_uplink)}
    fabric = Fabric(capacities)
    rounds = schedule_rounds(nodes, fabric)
    check_complete_and_disjoint([n.name for n in nodes], rounds)
    by_name = {n.name: n for n in nodes}
    for r in rounds:
        if len(r) > 1:
            load = uplink_load(r, by_name)
            assert all(gbps <= capacities[s] for s, gbps in load.items()), (r, load)
    if uplink >= 10 * max(racks) and agg_uplink >= 10 * len(nodes):
        # nothing to split: the circle method's N-1 (or N) rounds
        assert len(rounds) <= len(nodes)


def test_fixture_matches_the_live_expansion(expanded_lab: dict[str, Any]) -> None:
    """The recorded expanded plan is what cluster_plan.api gives for the lab plan today."""
    from pathlib import Path

    from cluster_plan.api import load_expanded

    plan = Path(__file__).resolve().parents[2] / "inventory" / "lab" / "cluster.yml"
    live = spec_from_expanded(load_expanded(str(plan)))
    assert live == spec_from_expanded(expanded_lab)
