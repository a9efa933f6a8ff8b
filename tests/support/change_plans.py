"""Edited copies of the lab plan, each with its lock, for `cluster-plan change` tests: the
plan changes an operator makes on day 2 (a node group grown, a profile changed)."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
LAB_PLAN = REPO / "inventory" / "lab" / "cluster.yml"

Edit = Callable[[dict[str, Any]], None]


def grow_cpu(plan: dict[str, Any]) -> None:
    """One more CPU compute node: cpu02."""
    plan["node_groups"]["cpu"]["count"] = 2


def grow_gpu(plan: dict[str, Any]) -> None:
    """One more node in the training pool: gpu02 (the Kubernetes lab plan's second)."""
    plan["node_groups"]["gpu"]["count"] = 2


def smaller_cpu_memory(plan: dict[str, Any]) -> None:
    """The cpu group on a profile with less memory: Slurm's RealMemory of its nodes changes
    (a restart of each node's slurmd: a rolling, restart-style upgrade of that pool)."""
    profile = copy.deepcopy(plan["hardware"]["cpu"])
    profile["memory_gb"] = 3
    plan["hardware"]["cpu-3g"] = profile
    plan["node_groups"]["cpu"]["hardware"] = "cpu-3g"


def shrink_cpu(plan: dict[str, Any]) -> None:
    """The cpu group back to one node (cpu02 leaves)."""
    plan["node_groups"]["cpu"]["count"] = 1


def grow_osd_only(plan: dict[str, Any]) -> None:
    """A storage node with an OSD and nothing else (osdn01)."""
    like = plan["node_groups"]["osd"]
    plan["node_groups"]["osd_grown"] = {
        **like,
        "count": 1,
        "hostname": "osdn{n:02d}",
        "roles": ["ceph_osd"],
    }


def shrink_osd_only(plan: dict[str, Any]) -> None:
    """The OSD-only storage node of `grow_osd_only` leaves (osdn01)."""
    del plan["node_groups"]["osd_grown"]


def write_plan(
    folder: Path, *edits: Edit, base: Path = LAB_PLAN, name: str = "cluster.yml"
) -> Path:
    """The lab plan with `edits` applied, written to folder/name and locked from the lab's
    own lock (so every existing host keeps its addresses)."""
    plan = yaml.safe_load(base.read_text())
    for edit in edits:
        edit(plan)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    shutil.copy(base.with_suffix(".lock.json"), path.with_suffix(".lock.json"))
    locked = subprocess.run(
        [sys.executable, "-m", "cluster_plan", "lock", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
    )
    assert locked.returncode == 0, locked.stdout + locked.stderr
    return path
