"""`lab down` leaves the machine as it found it, even after a node's init was killed -9;
`lab status` tells the truth before and after. Runs its own lab (id "t-life") so that the
session lab of the other tests is untouched; that lab, if up, is the same in both snapshots.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.lab import fabric, guard, lifecycle, state, status
from cluster_plan.lab.names import RUN_ROOT, for_plan
from cluster_plan.lab.pytest_plugin import LAB_PLAN, session_claim, skip_unless_lab_machine

pytestmark = pytest.mark.lab
LAB_ID = "t-life"


def _lines(*argv: str) -> list[str]:
    out = subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout
    return sorted(out.splitlines())


def _link_names() -> list[str]:
    # names only: counters and flags of the host's own links change on their own
    return sorted(line.split(":")[1].strip().split("@")[0] for line in _lines("ip", "-o", "link"))


def _not_another_lab(lines: list[str]) -> list[str]:
    """Leave out what other labs on a shared machine make and remove meanwhile."""
    return [line for line in lines if "cpl-" not in line or f"cpl-{LAB_ID}-" in line]


def machine_snapshot() -> dict[str, list[str]]:
    routes = [
        r
        for r in _lines("ip", "route", "show", "table", "all")
        if f"proto {guard.ROUTE_PROTO}" not in r
    ]  # guards: checked on their own
    return {
        "netns": _not_another_lab(_lines("ip", "netns", "list")),
        "links": _link_names(),
        "mounts": _not_another_lab(_lines("cat", "/proc/self/mounts")),
        "routes": routes,
    }


def lab_processes(netns_inodes: set[int], marker: str) -> list[str]:
    """Processes that belong to the test lab: in its namespaces, cgroups or run dir."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            net = os.stat(proc / "ns" / "net").st_ino
            cgroup = (proc / "cgroup").read_text()
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if net in netns_inodes or f"cluster-plan-lab/{LAB_ID}/" in cgroup or marker in cmdline:
            found.append(f"{proc.name} {cmdline}")
    return found


@pytest.fixture
def own_lab(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    skip_unless_lab_machine()
    monkeypatch.setenv("CLUSTER_PLAN_LAB_ID", LAB_ID)
    from cluster_plan.api import load_expanded

    expanded = load_expanded(str(LAB_PLAN))
    with session_claim(LAB_ID):
        lifecycle.down(expanded)
        try:
            yield expanded
        finally:
            lifecycle.down(expanded)


def test_down_after_a_crash_leaves_the_machine_as_found(own_lab: dict[str, Any]) -> None:
    expanded = own_lab
    names = for_plan(expanded)
    before = machine_snapshot()
    marker = f"cpl-{LAB_ID}-"
    assert lab_processes(set(), marker) == []

    assert lifecycle.up(expanded, str(LAB_PLAN)) is True
    inodes = {
        os.stat(fabric.NETNS_DIR / ns).st_ino
        for ns in fabric.lab_namespaces(names, expanded["hosts"])
    }
    assert lab_processes(inodes, marker)  # the probe does see the lab's processes
    assert status.collect(names, expanded)["up"]

    victim = status.collect(names, expanded)["nodes"]["stor02"]["init_pid"]
    os.kill(victim, signal.SIGKILL)  # a crash: PID 1 of the node's PID namespace dies
    deadline = time.monotonic() + 10
    while Path(f"/proc/{victim}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    report = status.collect(names, expanded)
    assert not report["up"] and report["condition"] == "degraded"
    assert report["nodes"]["stor02"]["state"] == "down"
    assert report["nodes"]["stor01"]["state"] == "running"

    assert lifecycle.up(expanded, str(LAB_PLAN)) is True  # brings back only what is missing
    assert status.collect(names, expanded)["up"]
    os.kill(status.collect(names, expanded)["nodes"]["gpu01"]["init_pid"], signal.SIGKILL)
    # The admin namespace deleted by hand: the lab's daemons notice and end by themselves.
    subprocess.run(["ip", "netns", "del", names.admin_ns], check=True)
    deadline = time.monotonic() + 10
    while any(status.collect(names, expanded)["services"].values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(status.collect(names, expanded)["services"].values())

    lifecycle.down(expanded)
    assert status.collect(names, expanded)["condition"] == "down"
    assert machine_snapshot() == before
    others = state.other_labs_cidrs(RUN_ROOT, LAB_ID)
    assert {
        r.split()[1] for r in _lines("ip", "route") if f"proto {guard.ROUTE_PROTO}" in r
    } == others
    assert lab_processes(inodes, marker) == []
    assert not names.run_dir.exists()
    assert not any(names.var_dir.glob("nodes/*"))
