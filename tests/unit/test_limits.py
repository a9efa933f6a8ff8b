"""Absurd sizes are refused quickly, with a finding, before any node is enumerated."""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from unittest import mock

import pytest

from cluster_plan.plan.validate import validate_text

LAB = Path(__file__).resolve().parents[2] / "inventory" / "lab" / "cluster.yml"


def _codes(result):
    return {(f.code, f.json_path) for f in result.findings if f.severity == "error"}


@pytest.mark.parametrize("count", ["10000000", "2000000000", "99999999999999999999"])
def test_absurd_count_is_refused_quickly(count):
    text = LAB.read_text().replace("    count: 2\n", f"    count: {count}\n", 1)
    # refused before any node is enumerated (ten million would take minutes): counted, not timed
    with mock.patch(
        "cluster_plan.plan.validate.iter_nodes", side_effect=AssertionError("enumerated")
    ):
        result = validate_text(text, "big.yml")
    assert ("range", "$.node_groups.gpu.count") in _codes(result)
    assert ("too-many-nodes", "$.node_groups") in _codes(result)


def test_many_groups_each_within_the_schema_limit_are_refused_quickly():
    # every group is under the per-group maximum; together they are far too many
    groups = "".join(
        f'  g{i}: {{count: 100000, hostname: "g{i}n{{n}}", hardware: cpu, racks: [r1]}}\n'
        for i in range(40)
    )
    text = LAB.read_text().replace("node_groups:\n", "node_groups:\n" + groups, 1)
    with mock.patch(
        "cluster_plan.plan.validate.iter_nodes", side_effect=AssertionError("enumerated")
    ):
        result = validate_text(text, "big.yml")
    assert ("too-many-nodes", "$.node_groups") in _codes(result)


@pytest.mark.parametrize("reserved", ["[11.0.0.0/9, 11.128.0.0-11.255.255.0]", "16000000"])
def test_huge_reserved_ranges_cost_neither_minutes_nor_gigabytes(reserved):
    from cluster_plan.plan.allocate import allocate_addresses
    from cluster_plan.plan.expand import expand

    text = LAB.read_text().replace(
        "    cidr: 10.41.0.0/24\n", f"    cidr: 11.0.0.0/8\n    reserved: {reserved}\n", 1
    )
    # sixteen million reserved addresses held one by one would take gigabytes: the peak of
    # what Python allocated is the proof (the time is a figure in benchmarks/bench_limits.py)
    tracemalloc.start()
    try:
        result = validate_text(text, "big.yml")
        assert result.ok, [f.render() for f in result.findings]
        lock, findings = allocate_addresses(result.plan, result.nodes)
        assert findings == []
        hosts = expand(result.plan, result.nodes, lock)["hosts"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB"
    on_compute = [h for h in hosts.values() if "compute" in h["interfaces"]]
    compute = sorted(h["interfaces"]["compute"]["address"] for h in on_compute)
    # the few addresses left above the reserved ones, lowest first
    assert compute[0] in ("11.255.255.1", "11.244.36.1")
    assert len(set(compute)) == 8


def test_many_node_groups_validate_in_linear_time():
    # 2,000 groups of 40: 80,000 nodes, under the node limit; one group per rack row, say
    groups = "".join(
        f'  g{i}: {{count: 40, hostname: "g{i}n{{n}}", hardware: cpu, racks: [r1, r2]}}\n'
        for i in range(2000)
    )
    text = (
        LAB.read_text()
        .replace("node_groups:\n", "node_groups:\n" + groups, 1)
        .replace("cidr: 10.40.0.0/24", "cidr: 10.0.0.0/10")
        .replace("cidr: 10.41.0.0/24", "cidr: 10.64.0.0/10")
        .replace("cidr: 10.42.0.0/24", "cidr: 10.128.0.0/10")
        # the lab's 8 kW rack budgets are not what 40,000 nodes a rack would stand in
        .replace(", power: {kw: 8}, cooling: {kw: 8, kind: air}}", "}")
    )
    # a quadratic check would not finish here; how the time grows with the groups is a figure
    # in benchmarks/bench_limits.py (500 against 2,000 groups, same run), not an assertion
    result = validate_text(text, "big.yml")
    assert len(result.nodes) == 80_009  # and the lab plan's nine
    assert result.ok, [f.render() for f in result.findings if f.severity == "error"][:3]
