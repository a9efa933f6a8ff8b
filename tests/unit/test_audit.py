"""`audit` counts addresses as validate does: reserved ranges and the site's own addresses
(gateway, DNS, NTP) are not there for hosts, so a /24 with 240 reserved is nearly full with
a dozen hosts, not 5 % used."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster_plan.plan.allocate import allocate_addresses
from cluster_plan.plan.expand import expand
from cluster_plan.plan.validate import validate_text
from cluster_plan.views.audit import audit, render_audit

BASE = (Path(__file__).resolve().parents[1] / "plans" / "base.yml").read_text()
MGMT = (
    "  mgmt: {cidr: 10.40.0.0/24, gateway: 10.40.0.1, dns: [10.40.0.2], "
    "reserved: [10.40.0.1-10.40.0.9]}"
)
CPU_COUNT = '  cpu: {count: 1, hostname: "cpu{n:02d}"'


def plan_with(reserved: int, cpu_nodes: int) -> str:
    # base.yml has 6 more hosts; each host is on mgmt
    text = BASE.replace(MGMT, f"  mgmt: {{cidr: 10.40.0.0/24, reserved: {reserved}}}")
    return text.replace(CPU_COUNT, CPU_COUNT.replace("count: 1", f"count: {cpu_nodes}"))


def validate_and_audit(text: str) -> tuple[set[str], dict[str, Any]]:
    result = validate_text(text, "plan.yml")
    codes = {f.code for f in result.findings if f.path[:2] == ("networks", "mgmt")}
    lock, problems = allocate_addresses(result.plan, result.nodes)
    assert problems == []
    expanded = expand(result.plan, result.nodes, lock)
    # the expanded network carries the plan's reserved addresses, and audit reads them there
    assert expanded["networks"]["mgmt"]["reserved"] == result.plan["networks"]["mgmt"]["reserved"]
    return codes, audit(expanded)


@pytest.mark.parametrize(
    ("reserved", "cpu_nodes", "warned"),
    [
        (0, 1, False),  # 7 of 254
        (234, 12, False),  # 18 of 20 free: exactly 90 %
        (234, 13, True),  # 19 of 20 free
        (240, 8, True),  # the issue's /24 with 240 reserved: 14 hosts on 14 addresses
        (200, 40, False),  # 46 of 54
    ],
)
def test_audit_and_validate_agree_on_a_nearly_full_network(reserved, cpu_nodes, warned):
    codes, report = validate_and_audit(plan_with(reserved, cpu_nodes))
    mgmt = report["networks"]["mgmt"]
    hosts = 6 + cpu_nodes
    assert (mgmt["hosts"], mgmt["addresses"], mgmt["reserved"]) == (hosts, 254, reserved)
    assert mgmt["used_pct"] == round(100 * hosts / (254 - reserved), 1)
    assert ("network-nearly-full" in codes) is warned
    assert any(p.startswith("network mgmt ") for p in report["problems"]) is warned


def test_site_addresses_count_as_used_too():
    _, report = validate_and_audit(BASE)
    mgmt = report["networks"]["mgmt"]
    # .1-.9 reserved, gateway .1 and DNS .2 inside them: 9 addresses taken
    assert (mgmt["hosts"], mgmt["reserved"]) == (7, 9)
    assert "7 hosts on 245 free addresses (2.9%), 9 reserved" in render_audit(report)
