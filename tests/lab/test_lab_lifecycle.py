"""`lab down` leaves the machine as it found it, even after a node's init was killed -9;
`lab status` tells the truth before and after. Runs its own lab (id "t-life") so that the
session lab of the other tests is untouched; that lab, if up, is the same in both snapshots.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.lab_session import LAB_PLAN, session_claim, skip_unless_lab_machine
from support.playbooks import sigint_default

from cluster_plan.lab import fabric, guard, lifecycle, node, state, status
from cluster_plan.lab.names import RUN_ROOT, LabNames, for_plan

pytestmark = pytest.mark.lab
LAB_ID = "t-life"


def _lines(*argv: str) -> list[str]:
    out = subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout
    return sorted(out.splitlines())


def _link_names() -> list[str]:
    # names only: counters and flags of the host's own links change on their own
    return sorted(line.split(":")[1].strip().split("@")[0] for line in _lines("ip", "-o", "link"))


def _not_another_lab(lines: list[str], lab_id: str) -> list[str]:
    """Leave out what other labs on a shared machine make and remove meanwhile."""
    return [line for line in lines if "cpl-" not in line or f"cpl-{lab_id}-" in line]


def machine_snapshot(lab_id: str = LAB_ID) -> dict[str, list[str]]:
    routes = [
        r
        for r in _lines("ip", "route", "show", "table", "all")
        if f"proto {guard.ROUTE_PROTO}" not in r
    ]  # guards: checked on their own
    return {
        "netns": _not_another_lab(_lines("ip", "netns", "list"), lab_id),
        "links": _link_names(),
        "mounts": _not_another_lab(_lines("cat", "/proc/self/mounts"), lab_id),
        "routes": routes,
    }


def lab_processes(netns_inodes: set[int], marker: str, lab_id: str = LAB_ID) -> list[str]:
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
        if net in netns_inodes or f"cluster-plan-lab/{lab_id}/" in cgroup or marker in cmdline:
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


# `lab up` interrupted: each case runs its own small lab id (derived from the session's, so
# two engineers' runs never share one), stops the CLI at one point of its work with one
# signal, then checks that `lab down` leaves nothing behind and, once, that `lab up` works.
CLI = Path(sys.executable).with_name("cluster-plan")
INTERRUPT_WAIT_S = 300.0


def _interrupt_id(point: str, signum: int) -> str:
    base = os.environ.get("CLUSTER_PLAN_LAB_ID", "test")[:12]
    return f"{base}-i{point[0]}{signal.Signals(signum).name[3:5].lower()}"


def _reached(point: str, names: LabNames, hosts: list[str]) -> bool:
    """early: the fabric namespace exists, links are being made; middle: the first node
    boots; late: every node was started and `lab up` waits for their sshd."""
    if point == "early":
        return fabric.netns_exists(names.fabric_ns)
    st = state.load(names.state_file)
    booted = len(st.nodes) if st else 0
    return booted >= 1 if point == "middle" else booted == len(hosts)


def _leftovers(names: LabNames, inodes: set[int]) -> dict[str, list[str]]:
    """What a lab id can leave on the machine, by the names and pids the lab gives it."""
    cgroups = [
        str(root / names.cgroup_rel("x").rsplit("/", 1)[0])
        for root in node.cgroup_hierarchies()
        if (root / names.cgroup_rel("x")).parent.exists()
    ]
    return {
        "netns": [ns for ns in _lines("ip", "netns", "list") if ns.startswith(names.prefix)],
        "mounts": [m for m in _lines("cat", "/proc/self/mounts") if names.prefix in m],
        "processes": sorted(
            {
                *lab_processes(inodes, names.prefix, names.lab),
                *lab_processes(set(), f"{names.run_dir}/", names.lab),
            }
        ),
        "guards": sorted(
            r.split()[1] for r in _lines("ip", "route") if f"proto {guard.ROUTE_PROTO}" in r
        ),
        "run": sorted(str(p) for p in RUN_ROOT.glob(f"{names.lab}*") if "session" not in p.name),
        "var": sorted(str(p) for p in names.var_dir.glob("nodes/*")),
        "cgroups": cgroups,
        "loops": [line for line in _lines("losetup", "-a") if str(names.var_dir) + "/" in line],
    }


def _lab_env(lab_id: str) -> dict[str, str]:
    return {**os.environ, "CLUSTER_PLAN_LAB_ID": lab_id}


@pytest.mark.parametrize("point", ["early", "middle", "late"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"])
def test_lab_up_interrupted_then_down_leaves_nothing(
    point: str, signum: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    skip_unless_lab_machine()
    lab_id = _interrupt_id(point, signum)
    monkeypatch.setenv("CLUSTER_PLAN_LAB_ID", lab_id)
    from cluster_plan.api import load_expanded

    expanded = load_expanded(str(LAB_PLAN))
    names = for_plan(expanded)
    hosts = list(expanded["hosts"])
    with session_claim(lab_id):
        lifecycle.down(expanded)  # a previous run of this test, interrupted itself
        before = machine_snapshot(lab_id)
        empty = _leftovers(names, set())
        others = sorted(state.other_labs_cidrs(RUN_ROOT, lab_id))
        assert empty == {**{key: [] for key in empty}, "guards": others}, empty

        up = subprocess.Popen(
            [str(CLI), "lab", "up", str(LAB_PLAN)],
            env=_lab_env(lab_id),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            # Ctrl-C as in a terminal: a test run started in the background (`make test &`)
            # inherits SIGINT ignored, and Python then never raises KeyboardInterrupt.
            preexec_fn=sigint_default,
        )
        inodes: set[int] = set()
        try:
            deadline = time.monotonic() + INTERRUPT_WAIT_S
            while not _reached(point, names, hosts):
                assert up.poll() is None, f"lab up ended before {point}: {up.stdout.read()}"  # type: ignore[union-attr]
                assert time.monotonic() < deadline, f"lab up never reached {point}"
                time.sleep(0.02)
            inodes = {
                os.stat(fabric.NETNS_DIR / ns).st_ino for ns in fabric.lab_namespaces(names, hosts)
            }
            up.send_signal(signum)
            output, _ = up.communicate(timeout=60)
        finally:
            if up.poll() is None:
                up.kill()
                up.wait()
        if signum == signal.SIGINT:  # Ctrl-C: a message and the interrupted exit, no traceback
            assert up.returncode == 130, output
            assert "Traceback" not in output, output
        else:
            assert up.returncode == -signal.SIGKILL
        assert _leftovers(names, inodes) != empty  # the probe does see what was left

        down = subprocess.run(
            [str(CLI), "lab", "down", str(LAB_PLAN)],
            env=_lab_env(lab_id),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert _leftovers(names, inodes) == empty
        assert machine_snapshot(lab_id) == before

        if (point, signum) == ("late", signal.SIGKILL):  # once: the machine takes a lab again
            try:
                assert lifecycle.up(expanded, str(LAB_PLAN)) is True
                assert status.collect(names, expanded)["up"]
            finally:
                lifecycle.down(expanded)
            assert _leftovers(names, set()) == empty
