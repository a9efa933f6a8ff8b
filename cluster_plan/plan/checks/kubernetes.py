"""Kubernetes plans: everything `cluster-plan k8s render` refuses, found at validate through
the rules the renderer asks too (cluster_plan.plan.kubernetes.refusals), GPU sharing that
fits the plan's GPUs, and a training image for a training job the plan cannot have."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.catalog import load_catalog, supports_mig
from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.kubernetes import refusals
from cluster_plan.plan.networks import AddressError, network_space
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.roles import KUBERNETES_NODE_ROLES

# The scheduler check counts control planes already, with a hint on which group to change.
_COUNTED_ELSEWHERE = {"control-plane-count"}
_K8S = ("scheduler", "kubernetes")


def check_kubernetes(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    scheduler = plan.get("scheduler") or {}
    if scheduler.get("type") != "kubernetes":
        return
    networks = plan.get("networks") or {}
    try:
        for name, spec in networks.items():
            network_space(name, spec)
    except AddressError:
        return  # a network that does not parse is reported by check_networks
    view: dict[str, Any] = {
        "scheduler": scheduler,
        "networks": networks,
        "hosts": {
            n.name: {
                "roles": list(n.roles),
                "pool": n.pool,
                "interfaces": {net: {} for net in n.networks},
            }
            for n in nodes
        },
    }
    yield from (f for f in refusals(view) if f.code not in _COUNTED_ELSEWHERE)
    yield from _gpu_sharing(plan, nodes, scheduler.get("kubernetes") or {})
    yield from _training_image(plan, scheduler)


def _gpu_models(plan: Plan, nodes: list[Node]) -> dict[str, str]:
    """NVIDIA GPU model -> the first hardware profile of a Kubernetes node that has it."""
    catalog = load_catalog()
    models: dict[str, str] = {}
    for node in nodes:
        if not KUBERNETES_NODE_ROLES & set(node.roles):
            continue
        profile = plan["hardware"].get(node.hardware) if isinstance(node.hardware, str) else None
        accel = (profile or {}).get("accelerators") or {}
        if catalog.get(str(accel.get("model")), {}).get("vendor") == "nvidia":
            models.setdefault(accel["model"], node.hardware)
    return models


def _gpu_sharing(plan: Plan, nodes: list[Node], k8s: dict[str, Any]) -> Iterator[Finding]:
    sharing = k8s.get("gpu_sharing") or {}
    mode = sharing.get("mode", "none")
    if mode == "none":
        return
    path = (*_K8S, "gpu_sharing", "mode")
    models = _gpu_models(plan, nodes)
    if not models:
        yield Finding(
            "gpu-sharing-no-gpus",
            f"gpu_sharing mode {mode}, but no Kubernetes node has an NVIDIA GPU: there is "
            "nothing to share",
            path,
            severity="warning",
            hint="remove scheduler.kubernetes.gpu_sharing",
        )
        return
    without = sorted(m for m in models if mode == "mig" and not supports_mig(m))
    # the mixed strategy serves a GPU without MIG whole (nvidia.com/gpu) beside the MIG
    # devices of the others (nvidia.com/mig-<profile>); single needs every GPU partitioned
    mixed = sharing.get("mig_strategy") == "mixed" and len(without) < len(models)
    if without and not mixed:
        some = len(without) < len(models)
        yield Finding(
            "mig-unsupported",
            f"gpu_sharing mode mig, but {', '.join(without)} (hardware "
            f"{', '.join(models[m] for m in without)}) cannot be partitioned into MIG instances"
            + (": the single strategy partitions every GPU alike" if some else ""),
            path,
            hint="set mig_strategy: mixed, which serves those as whole GPUs"
            if some
            else "use time-slicing for these GPUs; MIG needs A100, A30, H100, H200 or B200",
        )


def _training_class(classes: dict[str, Any]) -> str | None:
    """As the renderer picks it (cluster_plan.kubernetes.training)."""
    if "training" in classes:
        return "training"
    return next((c for c, spec in classes.items() if spec.get("needs") == "gpu"), None)


def _pytorch_builds(plan: Plan, classes: dict[str, Any], pool: object) -> list[dict[str, Any]]:
    """The pytorch builds that reach `pool`: named by it or by a class that runs on it."""
    builds = ((plan.get("software") or {}).get("environments") or {}).get("pytorch") or []
    return [
        b
        for b in builds
        if pool in (b.get("pools") or [])
        or any((classes.get(c) or {}).get("pool") == pool for c in b.get("classes") or [])
    ]


def _training_image(plan: Plan, scheduler: dict[str, Any]) -> Iterator[Finding]:
    """An image for the example training job the renderer will not write (docs/kubernetes.md,
    "A distributed training job"): said here, since rendering nothing is not an error."""
    k8s = scheduler.get("kubernetes") or {}
    if not k8s.get("training_image"):
        return
    classes = scheduler.get("workload_classes") or {}
    wclass = _training_class(classes)
    builds = _pytorch_builds(plan, classes, (classes.get(wclass) or {}).get("pool"))
    sharing = (k8s.get("gpu_sharing") or {}).get("mode", "none")
    if wclass is None:
        why = "the plan has no workload class named training or needing GPUs"
    elif not builds:
        why = f"the training class {wclass} gets no pytorch build (software.environments)"
    elif any(b.get("build") == "cuda" for b in builds) and sharing != "none":
        why = f"its CUDA build would share GPUs (gpu_sharing {sharing}): NCCL wants whole GPUs"
    else:
        return
    yield Finding(
        "training-image-unused",
        f"training_image is set, but no training job is rendered: {why}",
        (*_K8S, "training_image"),
        severity="warning",
        hint="see docs/kubernetes.md, 'A distributed training job'",
    )
