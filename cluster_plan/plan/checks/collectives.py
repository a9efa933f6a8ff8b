"""Collectives acceptance that can run and pass (docs/collectives.md): it runs through Slurm,
on pools the software section gives torch or MPI, and its intra-node floor must be one the
GPUs' links can carry."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.catalog import gpu_link_ceiling_GBps, load_catalog
from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.defaults import section_defaults
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.software import build_hosts, builds
from cluster_plan.plan.software_catalog import MPI_PACKAGES, TORCH_PACKAGES

_PATH = ("acceptance", "collectives")


def check_collectives(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    settings = (plan.get("acceptance") or {}).get("collectives")
    if not isinstance(settings, dict) or settings == section_defaults("acceptance.collectives"):
        return  # the defaults: the phase runs where it applies, and is silent elsewhere
    scheduler = (plan.get("scheduler") or {}).get("type")
    if scheduler != "slurm":
        yield Finding(
            "collectives-not-run",
            f"acceptance.collectives is set, but collectives and training acceptance run "
            f"through Slurm only; this is a {scheduler or 'scheduler-less'} plan",
            _PATH,
            hint="remove acceptance.collectives, or use a Slurm plan; on Kubernetes, `k8s "
            "render` writes the training job as an example (docs/collectives.md)",
        )
        return
    backends = _backend_hosts(plan, nodes)
    if not backends:
        yield Finding(
            "collectives-not-run",
            "acceptance.collectives is set, but no pool's compute nodes get torch or MPI from "
            "the software section: the collectives and training phases never run",
            _PATH,
            hint="give the training pool a pytorch (or mpi4py) build in software.environments "
            "(docs/software.md), or remove acceptance.collectives",
        )
        return
    yield from _intra_floor(plan, settings, backends)


def _backend_hosts(plan: Plan, nodes: list[Node]) -> dict[str, tuple[Node, dict[str, Any]]]:
    """Compute nodes of a pool that get torch or MPI -> (node, the build)."""
    found: dict[str, tuple[Node, dict[str, Any]]] = {}
    for _, _, build in builds(plan):
        packages = set(build.get("packages") or ())
        if not packages & (TORCH_PACKAGES | MPI_PACKAGES):
            continue
        for node in build_hosts(plan, build, nodes):
            if node.pool and "slurm_compute" in node.roles:
                found.setdefault(node.name, (node, build))
    return found


def _intra_floor(
    plan: Plan, settings: dict[str, Any], backends: dict[str, tuple[Node, dict[str, Any]]]
) -> Iterator[Finding]:
    """The intra-node sweep runs NCCL within NVIDIA nodes of a CUDA torch build and several
    GPUs: its floor must be under what their links carry."""
    floor = settings.get("intra_node_min_busbw_GBps")
    if floor is None:
        return
    catalog = load_catalog()
    for profile in sorted({node.hardware for node, build in backends.values()
                           if build.get("build") == "cuda"}):  # fmt: skip
        accel = (plan["hardware"].get(profile) or {}).get("accelerators") or {}
        model, count = accel.get("model"), accel.get("count") or 0
        if (catalog.get(str(model)) or {}).get("vendor") != "nvidia" or count < 2:
            continue
        ceiling = gpu_link_ceiling_GBps(str(model), int(count))
        if ceiling is not None and floor > ceiling:
            yield Finding(
                "collectives-floor",
                f"intra_node_min_busbw_GBps {floor:g} is above what a GPU of {profile} "
                f"({count} x {model}) can exchange within its node ({ceiling:g} GB/s, both "
                "directions of its links together): no node can pass",
                (*_PATH, "intra_node_min_busbw_GBps"),
                hint=f"at most {ceiling:g}; leave it out for the catalog's floor where it has "
                "one (8 x H100 SXM 460 GB/s)",
            )
            return
