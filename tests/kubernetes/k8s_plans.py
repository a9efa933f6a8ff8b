"""The plans the Kubernetes tests render: every Kubernetes plan under inventory/, and the
lab plan with its scheduler switched to Kubernetes (Slurm roles become Kubernetes roles)."""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from cluster_plan.api import load_expanded
from cluster_plan.kubernetes import Rendering, render

ROOT = Path(__file__).resolve().parents[2]
LAB_PLAN = ROOT / "inventory" / "lab" / "cluster.yml"
PLANS = {
    "k8s-inference": ROOT / "inventory" / "examples" / "k8s-inference.yml",
    "lab-k8s": ROOT / "inventory" / "lab" / "k8s.yml",
    "lab-as-kubernetes": LAB_PLAN,
}
_ROLES = {"slurm_controller": "k8s_control_plane", "slurm_compute": "k8s_worker"}
_CACHE: dict[str, dict[str, Any]] = {}
TRAINING_IMAGE = "docker.io/pytorch/pytorch:1.13.1-cuda11.6-cudnn8-runtime"


def as_kubernetes(plan: dict[str, Any]) -> dict[str, Any]:
    """A Slurm plan with Kubernetes as its scheduler: same nodes, pools and policy."""
    plan = copy.deepcopy(plan)
    scheduler = plan["scheduler"]
    scheduler.pop("slurm", None)
    # collectives acceptance runs through Slurm: validate refuses its settings elsewhere
    (plan.get("acceptance") or {}).pop("collectives", None)
    scheduler["type"] = "kubernetes"
    # the image of the lab's torch (Debian's 1.13.1), so the plan renders its training job
    scheduler["kubernetes"] = {
        "version": "1.36",
        "node_network": "compute",
        "training_image": TRAINING_IMAGE,
    }
    # One control plane: the Slurm plan's HA pair (a primary and its backup) has no
    # counterpart in an odd etcd quorum, so only the primary's group keeps the role.
    groups = plan["node_groups"]
    primary = next((g for g in groups if "slurm_controller" in groups[g].get("roles", [])), None)
    for name, group in plan["node_groups"].items():
        roles = [r for r in group.get("roles", []) if r != "slurm_controller" or name == primary]
        group["roles"] = [_ROLES[r] for r in roles if r in _ROLES] + [
            r for r in roles if not r.startswith("slurm")
        ]
    cephfs = ((plan.get("storage") or {}).get("ceph") or {}).get("cephfs")
    if cephfs and "clients" in cephfs:
        cephfs["clients"] = list(dict.fromkeys(_ROLES.get(r, r) for r in cephfs["clients"]))
    return plan


def lab_plan_as_kubernetes(edit: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The lab plan as Kubernetes, expanded with its lock file, after `edit` changed the plan
    (validate runs on the edited plan: an edit must keep it valid)."""
    plan = as_kubernetes(yaml.safe_load(LAB_PLAN.read_text()))
    if edit is not None:
        edit(plan)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yml"
        path.write_text(yaml.safe_dump(plan, sort_keys=False))
        shutil.copy(LAB_PLAN.with_name("cluster.lock.json"), Path(tmp))
        return load_expanded(path)


def expanded_plan(name: str) -> dict[str, Any]:
    """The expanded plan (a copy) of one of PLANS."""
    if name not in _CACHE:
        if name == "lab-as-kubernetes":
            _CACHE[name] = lab_plan_as_kubernetes()
        else:
            _CACHE[name] = load_expanded(PLANS[name])
    return copy.deepcopy(_CACHE[name])


_RENDERED: dict[str, Rendering] = {}


def rendered(name: str) -> Rendering:
    """One of PLANS, rendered once (shared: do not change it)."""
    if name not in _RENDERED:
        _RENDERED[name] = render(expanded_plan(name))
    return _RENDERED[name]


def cluster_configuration(name: str) -> dict[str, Any]:
    """The kubeadm ClusterConfiguration of one of PLANS (its first control plane's)."""
    rendering = rendered(name)
    first = rendering.plan.first_control_plane
    return next(d for d in rendering.kubeadm[first] if d["kind"] == "ClusterConfiguration")
