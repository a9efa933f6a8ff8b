"""Lab proof of a clean lab's acceptance and of the acceptance history: a clean lab passes
(every phase: latency, MTU, bandwidth); a second clean run compares as unchanged; then one
node's link shaped to 85 % of its rate (still above the plan's floor) makes the third run pass
the plan and name that node as degraded, on the command line and on the report's page.

The real `cluster-plan acceptance` (3 s tests; the second and third runs bandwidth only) with
`--transport lab-netns` on a bare lab, as test_lab_acceptance.py does. The plan's floor is
lowered to 8 Gb/s (the lab plan's 9 Gb/s would fail an 85 % link outright: the lab's 100 Mbit/s
links give about 9.8 plan Gb/s of TCP goodput); the clean run holds every pair to 9 Gb/s
itself. The bandwidth tolerance is -10 %, between the lab's noise and the fault: between clean
runs a pair's figure moved by -5.1 % to +4.3 % on a quiet machine, but every pair by -7.8 % to
-9.0 % in a fresh-clone run, where this test ran beside the session converge's installs; a
90 % link's pairs moved by -9.0 % to -15 % (docs/acceptance.md), so the shaped link is at 85 %
now. The clean run is the history's first: one run fewer than a clean test of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.lab_session import Lab, lab
from test_lab_acceptance import NETWORK_PHASES, cli, fault, run_acceptance

from cluster_plan.acceptance.schedule import schedule_rounds
from cluster_plan.acceptance.spec import spec_from_expanded

pytestmark = pytest.mark.lab

__all__ = ["lab"]

FLOOR_GBPS = 8
TOLERANCE = -0.1
DURATION_S = "3"


def figures(report: dict[str, Any]) -> str:
    return ", ".join(
        f"{r['client']}<->{r['server']} {r['forward_gbps']}/{r['reverse_gbps']}"
        for r in report["bandwidth"]
    )


def changes(report: dict[str, Any]) -> str:
    return ", ".join(
        f"{r['source']}->{r['target']} {r['pdiff']:+.1%}"
        for r in report["comparison"]["figures"]
        if r["pdiff"] is not None
    )


def assert_clean(lab: Lab, code: int, report: dict[str, Any], stdout: str) -> None:
    """A clean lab passes: no finding, every pair once, in the schedule's rounds, at the
    link's rate (the plan's 10 Gb/s links run at 100 Mb/s in the lab; judged in plan units)."""
    assert code == 0, stdout
    assert report["passed"] and report["findings"] == [], stdout
    spec = spec_from_expanded(lab.expanded)
    (compute,) = (n for n in spec.networks if n.name == "compute")
    nodes = len(compute.nodes)
    assert len(report["bandwidth"]) == nodes * (nodes - 1) // 2
    rounds = schedule_rounds(compute.nodes, spec.fabric)
    assert report["timing"]["compute.bandwidth_rounds"] == len(rounds)
    # the circle method's N - 1 rounds (N for odd N), and no more on this uncongested tree
    assert len(rounds) == nodes - 1 + nodes % 2
    assert all(9 <= row["gbps"] <= 10.5 for row in report["bandwidth"]), report["bandwidth"]
    # latency, loss and MTU in every direction
    for phase in ("probes", "mtu"):
        assert len(report[phase]) == nodes * (nodes - 1), (phase, len(report[phase]))
    print(f"clean lab: {report['timing']}")


def test_a_clean_lab_passes_and_a_link_at_85_percent_is_degraded_yet_passes(
    lab: Lab, tmp_path: Path
) -> None:
    expanded = json.loads(json.dumps(lab.expanded))
    expanded["acceptance"]["network"]["min_gbps"] = FLOOR_GBPS
    expanded["acceptance"]["history"]["tolerance"]["bandwidth"]["lower"] = TOLERANCE
    plan = tmp_path / "expanded.json"
    plan.write_text(json.dumps(expanded))
    slow = "gpu02"
    link_mbit = expanded["hosts"][slow]["link_gbps"] * 1000 * expanded["lab"]["rate_scale"]
    reports = []
    try:
        for index in range(3):
            if index == 2:
                fault(lab, slow, "--rate", f"{link_mbit * 0.85:g}mbit")
            phases = NETWORK_PHASES if index == 0 else "bandwidth"
            code, report, stdout = run_acceptance(
                lab, tmp_path / "reports", phases, DURATION_S, expanded=plan
            )
            reports.append((code, report, stdout))
            if index == 0:
                assert_clean(lab, code, report, stdout)
            print(f"run {index + 1}: exit {code}; Gb/s forward/reverse: {figures(report)}")
            if report["comparison"]["reference"]:
                print(f"  change against run {report['comparison']['reference']['run']}: "
                      f"{changes(report)}")  # fmt: skip
    finally:
        cli("lab", "fault", str(lab.plan), slow, "--clear", timeout=60)
    (_, first, _), (code2, second, _), (code3, third, stdout3) = reports
    assert first["comparison"]["reference"] is None
    assert code2 == 0 and second["comparison"]["reference"]["run"] == 1
    assert not [f for f in second["findings"] if f["kind"] == "degraded"], changes(second)
    assert {r["outcome"] for r in second["comparison"]["figures"]} == {"unchanged"}
    # the shaped run meets the plan, and names the slower node
    assert code3 == 0 and third["passed"], stdout3
    degraded = [f for f in third["findings"] if f["kind"] == "degraded"]
    assert [f["node"] for f in degraded] == [slow], (changes(third), degraded)
    assert all(r["gbps"] >= FLOOR_GBPS for r in third["bandwidth"])
    print(stdout3)
    page = (tmp_path / "reports" / "acceptance.html").read_text()
    assert "Comparison with run 2" in page and f"{slow}: " in page and "<polyline" in page
    listed = cli("acceptance", "history", str(lab.plan), "--expanded", str(plan),
                 "--output-dir", str(tmp_path / "reports"))  # fmt: skip
    assert listed.returncode == 0 and listed.stdout.count("passed") == 3, listed.stdout
    print(listed.stdout)
