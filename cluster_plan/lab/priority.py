"""A lab's CPU priority follows the process that brought it up.

`nice` does not reach a lab's nodes: each node runs in cgroups of its own, and the kernel
shares the CPU between cgroups by their weight, not by the nice of the processes in them
(and, outside any cgroup, between sessions: the autogroup). So a lab brought up at nice 10
gets, on its own cgroup, the weight the kernel gives a process at nice 10 against one at 0:
its nodes yield to other work as the command that made them does.
"""

from __future__ import annotations

import os
from pathlib import Path

DEFAULT_WEIGHT = 1024  # cgroup v1 cpu.shares of nice 0; cgroup v2's cpu.weight is 100
STEP = 1.25  # each nice level is about 25 % less CPU than the one below it


def nice_now() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def shares_for(nice: int) -> int:
    """cgroup v1 cpu.shares for a nice level, as the kernel weighs nice (1024 at 0, about
    110 at 10, 15 at 19)."""
    return max(2, round(DEFAULT_WEIGHT / STEP ** max(-20, min(19, nice))))


def follow_nice(group: Path, nice: int | None = None) -> bool:
    """Give the cgroup `group` the CPU weight of `nice` (the caller's when None); nothing at
    nice 0 or where the hierarchy has no CPU controller. True when a weight was written."""
    level = nice_now() if nice is None else nice
    if level == 0:
        return False
    shares = shares_for(level)
    if (group / "cpu.shares").exists():
        (group / "cpu.shares").write_text(str(shares))
        return True
    if (group / "cpu.weight").exists():
        weight = max(1, min(10000, round(shares * 100 / DEFAULT_WEIGHT)))
        (group / "cpu.weight").write_text(str(weight))
        return True
    return False


def cpu_hierarchy(root: Path) -> Path | None:
    """The cgroup hierarchy that weighs CPU: cgroup v1's cpu controller, or a cgroup v2 root
    that hands the cpu controller to its children; None where there is neither."""
    v1 = next((p for p in sorted(root.glob("cpu*")) if (p / "cpu.shares").exists()), None)
    if v1 is not None:
        return v1
    control = root / "cgroup.subtree_control"
    if control.exists() and "cpu" in control.read_text().split():
        return root
    return None


def enter_own_group(root: Path, name: str) -> Path | None:
    """Move this process (and so all it starts) into a cgroup `name` of its own, weighted by
    its nice: at the top, nice only ranks processes of one session, and the nodes' cgroups
    are weighed against that whole session. None where there is no CPU hierarchy or nothing
    to weigh (nice 0)."""
    hierarchy = cpu_hierarchy(root)
    if hierarchy is None or nice_now() == 0:
        return None
    group = hierarchy / name
    group.mkdir(exist_ok=True)
    follow_nice(group)
    (group / "cgroup.procs").write_text(str(os.getpid()))
    return group


def leave_group(group: Path) -> bool:
    """Back to the hierarchy's top, and the group removed; False where a process still in it
    keeps it (one this process started and left running)."""
    (group.parent / "cgroup.procs").write_text(str(os.getpid()))
    try:
        group.rmdir()
    except OSError:
        return False
    return True
