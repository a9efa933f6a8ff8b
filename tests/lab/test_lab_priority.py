"""A lab's CPU priority follows the process that brought it up (cluster_plan.lab.priority):
the weights, where they are written, and on this machine's own cgroups (root) that a lab
made at nice 10 and a process that moved itself weigh as nice 10 does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cluster_plan.lab import node, priority
from cluster_plan.lab.names import CGROUP_ROOT, LabNames


def test_each_nice_level_weighs_about_25_percent_less_as_the_kernel_weighs_it() -> None:
    # kernel/sched/core.c has 1024 at nice 0, 820 at 1, 110 at 10, 15 at 19; out of range clamps
    assert [priority.shares_for(n) for n in (0, 1, 5, 10, 19, 40)] == [
        1024, 819, 336, 110, 15, 15
    ]  # fmt: skip
    assert priority.shares_for(-5) == 3125 and priority.shares_for(-40) == 88818


def test_the_weight_goes_to_the_knob_the_hierarchy_has(tmp_path: Path) -> None:
    v1, v2, neither = (tmp_path / d for d in ("v1", "v2", "neither"))
    for group in (v1, v2, neither):
        group.mkdir()
    (v1 / "cpu.shares").write_text("1024\n")
    (v2 / "cpu.weight").write_text("100\n")
    assert priority.follow_nice(v1, 10) and (v1 / "cpu.shares").read_text() == "110"
    assert priority.follow_nice(v2, 10) and (v2 / "cpu.weight").read_text() == "11"
    assert not priority.follow_nice(neither, 10)
    (v1 / "cpu.shares").write_text("1024\n")
    assert not priority.follow_nice(v1, 0) and (v1 / "cpu.shares").read_text() == "1024\n"


def test_a_lab_gets_its_weight_once_on_its_own_cgroup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(node, "CGROUP_ROOT", tmp_path)
    (tmp_path / "cpu").mkdir()
    weighed: list[Path] = []
    monkeypatch.setattr(priority, "follow_nice", lambda group: weighed.append(group))
    names = LabNames("t1")
    node.make_cgroups(names, "head01")
    node.make_cgroups(names, "gpu01")  # the lab's cgroup is there: its weight stays
    assert weighed == [tmp_path / "cpu" / Path(names.cgroup_rel("head01")).parent]


def test_the_cpu_hierarchy_is_v1_s_controller_or_a_v2_root_that_delegates_cpu(
    tmp_path: Path,
) -> None:
    (tmp_path / "cpuset").mkdir()
    assert priority.cpu_hierarchy(tmp_path) is None
    (tmp_path / "cgroup.subtree_control").write_text("memory pids\n")
    assert priority.cpu_hierarchy(tmp_path) is None
    (tmp_path / "cgroup.subtree_control").write_text("cpu memory pids\n")
    assert priority.cpu_hierarchy(tmp_path) == tmp_path
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.shares").write_text("1024\n")
    assert priority.cpu_hierarchy(tmp_path) == tmp_path / "cpu"


AT_NICE_10 = """
import os, sys
from pathlib import Path
from cluster_plan.lab import node, priority
from cluster_plan.lab.names import CGROUP_ROOT, LabNames
os.nice(10)
names = LabNames(sys.argv[1])
procs = node.make_cgroups(names, "head01")
lab = priority.cpu_hierarchy(CGROUP_ROOT) / Path(names.cgroup_rel("head01")).parent
print("lab", (lab / "cpu.shares").read_text().strip())
node.remove_cgroups(names)
print("lab removed", not lab.exists())
group = priority.enter_own_group(CGROUP_ROOT, sys.argv[1] + "-own")
print("own", (group / "cpu.shares").read_text().strip())
print("in it", str(os.getpid()) in (group / "cgroup.procs").read_text().split())
print("left", priority.leave_group(group), not group.exists())
"""


@pytest.mark.lab
def test_on_this_machine_a_lab_and_a_process_at_nice_10_weigh_as_nice_10() -> None:
    hierarchy = priority.cpu_hierarchy(CGROUP_ROOT)
    if os.geteuid() != 0 or hierarchy is None or not (hierarchy / "cpu.shares").exists():
        pytest.skip("needs root and cgroup v1's cpu controller (this machine's kind)")
    lab_id = f"t-prio{os.getpid()}"
    run = subprocess.run(
        [sys.executable, "-c", AT_NICE_10, lab_id],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "lab 110",
        "lab removed True",
        "own 110",
        "in it True",
        "left True True",
    ], run.stdout
