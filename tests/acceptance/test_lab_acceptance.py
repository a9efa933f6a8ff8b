"""Lab proof: with three faults injected through `cluster-plan lab fault`
(one node's link at a tenth of its rate, one with 2% loss, one with 5 ms delay) the report
names exactly those three nodes with the right kind of fault, in every run: one in the suite,
five with CLUSTER_PLAN_FAULT_RUNS=5 (the sweep docs/acceptance.md quotes; each run is about a
minute and a half, too long to repeat in every CI run).

Runs `cluster-plan acceptance` (the real command, as a subprocess) with the `lab-netns`
transport: this machine's iperf3 and fping inside each node's network namespace, so the nodes
need no packages; the path measured (node veth, tbf, bridges, loss and delay stages) is the
lab's own. Each run takes about a minute and a half with faults (2 s tests, 3000 probes).
A clean lab's run is the first of test_lab_history.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.lab_session import Lab, lab

pytestmark = pytest.mark.lab


__all__ = ["lab"]

RUNS = int(os.environ.get("CLUSTER_PLAN_FAULT_RUNS", "1"))
DURATION_S = "2"
# The storage phase needs the nodes' own Ceph tools (tests/roles/test_ceph_lab.py).
NETWORK_PHASES = "latency,mtu,bandwidth"


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster_plan", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def run_acceptance(
    lab: Lab,
    out: Path,
    phases: str = NETWORK_PHASES,
    duration: str = DURATION_S,
    expanded: Path | None = None,
) -> tuple[int, dict[str, Any], str]:
    """`cluster-plan acceptance` on the lab plan (or an expanded plan made from it): its exit
    status (0 passed, 1 failed), its JSON report and what it printed."""
    plan = ("--expanded", str(expanded)) if expanded is not None else ()
    proc = cli(
        "acceptance", str(lab.plan), *plan, "--transport", "lab-netns", "--duration", duration,
        "--output-dir", str(out), "--phases", phases,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, json.loads((out / "acceptance.json").read_text()), proc.stdout


def fault(lab: Lab, node: str, *args: str) -> None:
    proc = cli("lab", "fault", str(lab.plan), node, *args, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_injected_faults_are_named_in_every_run(lab: Lab, tmp_path: Path) -> None:
    rate_scale = lab.expanded["lab"]["rate_scale"]
    slow, lossy, delayed = "gpu02", "stor01", "infer01"
    link_mbit = lab.expanded["hosts"][slow]["link_gbps"] * 1000 * rate_scale
    expected = [(slow, "bandwidth"), (delayed, "latency"), (lossy, "loss")]
    outcomes = []
    try:
        fault(lab, slow, "--rate", f"{link_mbit / 10:g}mbit")
        fault(lab, lossy, "--loss", "2%")
        fault(lab, delayed, "--delay", "5ms")
        for run in range(RUNS):
            code, report, _ = run_acceptance(lab, tmp_path / f"run{run}")
            named = sorted((f["node"], f["kind"]) for f in report["nodes_at_fault"])
            # a pair this busy machine starved is an inconclusive warning (docs/acceptance.md,
            # "CPU-bound measurements"), shown but no misdiagnosis; the rate fault must not be
            # one: its node is named for bandwidth above
            others = [
                f for f in report["findings"]
                if (f["node"] not in (slow, lossy, delayed) or f["severity"] != "fault")
                and f["kind"] != "inconclusive"
            ]  # fmt: skip
            outcomes.append((code, named, others, report["timing"]["total_s"]))
            print(f"run {run + 1}: exit {code}, named {named}, other findings {others}, "
                  f"{report['timing']}")  # fmt: skip
    finally:
        for node in (slow, lossy, delayed):
            cli("lab", "fault", str(lab.plan), node, "--clear", timeout=60)
    good = [o for o in outcomes if o[0] == 1 and o[1] == expected and not o[2]]
    assert len(good) == RUNS, outcomes
