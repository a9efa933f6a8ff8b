"""The scheduler: controller roles, workload classes and their pools, datasets, reservations."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from cluster_plan.catalog import load_catalog
from cluster_plan.checks.base import Plan
from cluster_plan.checks.hints import missing
from cluster_plan.checks.references import declared_racks
from cluster_plan.findings import Finding
from cluster_plan.nodes import Node


def check_scheduler(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    scheduler = plan.get("scheduler")
    if not scheduler or scheduler["type"] not in ("slurm", "kubernetes"):
        return  # the schema says what is wrong; guessing at its rules would only add noise
    yield from _scheduler_roles(scheduler, nodes)
    yield from _workload_classes(plan, scheduler, nodes)
    racks = declared_racks(plan)
    for name, dataset in (scheduler.get("datasets") or {}).items():
        for i, rack in enumerate(dataset["racks"]):
            if rack not in racks:
                yield missing(
                    "rack", rack, sorted(racks), ("scheduler", "datasets", name, "racks", i)
                )
    for name, reservation in (scheduler.get("reservations") or {}).items():
        yield from _reservation(plan, nodes, name, reservation)


def _scheduler_roles(scheduler: dict[str, Any], nodes: list[Node]) -> Iterator[Finding]:
    kind = scheduler["type"]
    roles = Counter(role for node in nodes for role in node.roles)
    if kind == "slurm":
        count = roles["slurm_controller"]
        if count not in (1, 2):
            yield Finding(
                "controller-count",
                f"Slurm needs one controller (or an HA pair); the plan has {count}",
                ("scheduler", "type"),
                hint="give one node group the role slurm_controller",
            )
        if not roles["slurm_compute"]:
            yield Finding(
                "no-compute",
                "no node has the role slurm_compute",
                ("scheduler", "type"),
                severity="warning",
            )
        if (scheduler.get("slurm") or {}).get("accounting") and not roles["slurmdbd"]:
            yield Finding(
                "missing-role",
                "accounting needs a node with the role slurmdbd",
                ("scheduler", "slurm", "accounting"),
            )
        wrong = [r for r in roles if r.startswith("k8s_")]
    else:
        count = roles["k8s_control_plane"]
        if count == 0 or count % 2 == 0:
            yield Finding(
                "control-plane-count",
                "Kubernetes needs an odd number of control-plane nodes for etcd quorum; the plan "
                f"has {count}",
                ("scheduler", "type"),
            )
        wrong = [r for r in roles if r.startswith("slurm")]
    for role in wrong:
        group = next(n.group for n in nodes if role in n.roles)
        yield Finding(
            "role-scheduler-mismatch",
            f"role {role} does not fit scheduler {kind}",
            ("node_groups", group, "roles"),
        )


def _workload_classes(
    plan: Plan, scheduler: dict[str, Any], nodes: list[Node]
) -> Iterator[Finding]:
    pools: dict[str, list[Node]] = defaultdict(list)
    for node in nodes:
        if node.pool:
            pools[node.pool].append(node)
    known_pools = sorted({g.get("pool") for g in plan["node_groups"].values() if g.get("pool")})
    classes = scheduler.get("workload_classes") or {}
    for name, wclass in classes.items():
        path = ("scheduler", "workload_classes", name)
        pool = wclass["pool"]
        if pool not in known_pools:
            yield missing("pool", pool, known_pools, (*path, "pool"))
        elif not pools.get(pool):
            yield Finding("empty-pool", f"pool {pool} has no nodes", (*path, "pool"))
        else:
            yield from _pool_fits_class(plan, name, wclass, pools[pool], path)
    defaults = [name for name, wclass in classes.items() if wclass.get("default")]
    if len(defaults) > 1:
        yield Finding(
            "multiple-defaults",
            f"classes {', '.join(defaults)} are all default",
            ("scheduler", "workload_classes", defaults[1], "default"),
        )
    elif classes and not defaults:
        yield Finding(
            "no-default-class",
            "no workload class is the default; work that declares no class has nowhere to go",
            ("scheduler", "workload_classes"),
            severity="warning",
        )


def _pool_fits_class(
    plan: Plan, name: str, wclass: dict[str, Any], members: list[Node], path: tuple[Any, ...]
) -> Iterator[Finding]:
    catalog = load_catalog()
    needs = wclass.get("needs", "any")
    for node in members:
        accel = plan["hardware"].get(node.hardware, {}).get("accelerators")
        entry = catalog.get(accel["model"], {}) if accel else {}
        lacking = (needs == "gpu" and entry.get("vendor") != "nvidia") or (
            needs == "accelerator" and not accel
        )
        if lacking:
            what = "NVIDIA GPUs" if needs == "gpu" else "accelerators"
            yield Finding(
                "pool-lacks-accelerator",
                f"class {name} needs {what}, but pool {wclass['pool']} has {node.name} "
                f"({node.hardware}) without them",
                (*path, "needs"),
            )
            return


def _reservation(
    plan: Plan, nodes: list[Node], name: str, reservation: dict[str, Any]
) -> Iterator[Finding]:
    path = ("scheduler", "reservations", name)
    try:
        datetime.fromisoformat(reservation["start"])
    except ValueError:
        yield Finding(
            "format",
            f"start {reservation['start']!r} is not an ISO 8601 time",
            (*path, "start"),
            hint='e.g. "2027-01-05T02:00:00"',
        )
    for i, group in enumerate(reservation.get("node_groups", [])):
        if group not in plan["node_groups"]:
            yield missing("node group", group, list(plan["node_groups"]), (*path, "node_groups", i))
    hosts = sorted(n.name for n in nodes)
    for i, host in enumerate(reservation.get("nodes", [])):
        if host not in hosts:
            yield missing("host", host, hosts[:50], (*path, "nodes", i))
    if not reservation.get("node_groups") and not reservation.get("nodes"):
        yield Finding("missing-key", "a reservation needs node_groups or nodes", path)
