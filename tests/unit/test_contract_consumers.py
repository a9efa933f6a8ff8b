"""Consumers of the expanded plan read one filled value (issue: "one setting, two defaults").

Each test here failed before defaults were filled in one place: the lab and acceptance
disagreed on `lab: {}`, the check, the runner and the docs each chose other networks to test,
and the lab's admin namespace ignored `cluster.management_network`.
"""

from __future__ import annotations

from pathlib import Path

from cluster_plan.acceptance.spec import spec_from_expanded
from cluster_plan.lab.topology import admin_addresses, scaled_mbit, wiring
from cluster_plan.plan.allocate import allocate_addresses
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.plan.expand import expand
from cluster_plan.plan.validate import validate_text

BASE = (Path(__file__).resolve().parents[1] / "plans" / "base.yml").read_text()


def expanded_of(text: str) -> ExpandedPlan:
    result = validate_text(text, "plan.yml")
    assert result.ok, [f.render() for f in result.findings]
    lock, findings = allocate_addresses(result.plan, result.nodes)
    assert findings == []
    return expand(result.plan, result.nodes, lock)


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def test_an_empty_lab_section_scales_the_lab_and_acceptance_alike():
    expanded = expanded_of(BASE + "lab: {}\n")
    links = {port.mbit for port in wiring(expanded).ports}
    criteria = spec_from_expanded(
        {**expanded, "acceptance": {**expanded["acceptance"], "network": {
            **expanded["acceptance"]["network"], "max_latency_ms": 1, "max_loss_pct": 1}}}
    ).criteria  # fmt: skip
    assert links == {scaled_mbit(10, criteria.rate_scale)}
    assert criteria.rate_scale == 0.01
    # 1 % of a 10 Gb/s link read back at plan speed is 10 Gb/s, which passes min_gbps 9
    assert criteria.plan_gbps(100e6) == 10


def test_acceptance_tests_every_network_but_the_management_one_when_the_plan_is_silent():
    text = edit(BASE, "network: {networks: [compute], min_gbps: 9}",
                "network: {min_gbps: 9.5, max_latency_ms: 1, max_loss_pct: 1}")  # fmt: skip
    # 9.5 Gb/s cannot pass on the 1500-MTU management network, but that one is not tested
    result = validate_text(text, "plan.yml")
    assert result.ok, [f.render() for f in result.findings]
    expanded = expanded_of(text)
    assert expanded["acceptance"]["network"]["networks"] == ["compute"]
    assert [n.name for n in spec_from_expanded(expanded).networks] == ["compute"]


def test_a_threshold_no_tested_network_meets_is_one_finding_naming_the_slow_switch():
    text = edit(BASE, "network: {networks: [compute], min_gbps: 9}",
                "network: {networks: [mgmt, compute], min_gbps: 9.95}")  # fmt: skip
    text = edit(text, "tor2: {uplink: agg1, racks: [r2], link_gbps: 10",
                "tor2: {uplink: agg1, racks: [r2], link_gbps: 1")  # fmt: skip
    found = [f for f in validate_text(text, "plan.yml").findings
             if f.code == "threshold-above-line-rate"]  # fmt: skip
    assert len(found) == 1
    message = found[0].message
    assert "access switch tor2's 1 Gb/s links" in message
    assert "at MTU 1500 on network mgmt" in message
    assert "also on network compute" in message


def test_the_lab_admin_namespace_sits_on_the_management_network():
    text = edit(BASE, "os: debian-12}", "os: debian-12, management_network: compute}")
    expanded = expanded_of(text + "lab: {}\n")
    network, addresses, prefixlen = admin_addresses(expanded)
    assert network == "compute"
    # no proxy, DNS or NTP there: the last address, which no host holds
    assert addresses == ["10.41.0.254"] and prefixlen == 24
    assert "10.41.0.254" not in {h["address"] for h in expanded["hosts"].values()}
    for host in expanded["hosts"].values():  # and Ansible reaches hosts there
        assert host["address"] == host["interfaces"]["compute"]["address"]
