"""The routing table: where each kind of pod goes. The admission policies print it as CEL;
the routing tests read it back from those policies, not from here.

Mirrors job_submit.lua (docs/scheduling.md): a declared class wins; else a pod asking for a
device resource goes to the class that `needs` it and whose pool has it; else the default
class. A dataset is preferred only where the class's pool holds it (a preference elsewhere
could never be met).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.cluster import KubernetesPlan
from cluster_plan.kubernetes.nodes import accelerator_pools, node_capacity


@dataclass(frozen=True)
class Route:
    workload_class: str
    pool: str
    tolerate_pool: bool  # its pool is tainted
    priority_class: str
    priority: int
    local_datasets: tuple[str, ...]  # datasets some node of its pool holds


@dataclass(frozen=True)
class Reservation:
    name: str
    users: tuple[str, ...]
    namespaces: tuple[str, ...]  # the plan's `accounts`


@dataclass(frozen=True)
class RoutingTable:
    routes: dict[str, Route]
    default_class: str | None
    resource_classes: dict[str, str]  # device resource -> class
    datasets: tuple[str, ...]
    reservations: dict[str, Reservation]

    @property
    def gpu_resources(self) -> list[str]:
        return [r for r in self.resource_classes if r == names.NVIDIA_GPU]


def routing_table(plan: KubernetesPlan) -> RoutingTable:
    tainted = accelerator_pools(plan)
    scheduler = plan.expanded.get("scheduler") or {}
    order = list(scheduler.get("datasets") or {})
    routes = {}
    resource_classes: dict[str, str] = {}
    for name, wclass in plan.classes.items():
        held = {str(d) for n in wclass.nodes for d in plan.host(n).get("datasets") or []}
        routes[name] = Route(
            workload_class=name,
            pool=wclass.pool,
            tolerate_pool=wclass.pool in tainted,
            priority_class=wclass.priority_class,
            priority=wclass.priority,
            local_datasets=tuple(sorted(held, key=order.index)),
        )
        if wclass.needs in ("gpu", "accelerator"):
            for resource in _resources(plan, wclass.nodes):
                resource_classes.setdefault(resource, name)
    return RoutingTable(
        routes=routes,
        default_class=plan.default_class,
        resource_classes=resource_classes,
        datasets=tuple(str(d) for d in order),
        reservations=_reservations(scheduler.get("reservations") or {}),
    )


def _resources(plan: KubernetesPlan, nodes: Iterable[str]) -> list[str]:
    """The extended resources (nvidia.com/gpu ...) the nodes offer, in node order."""
    return [resource for node in nodes for resource in node_capacity(plan.host(node))]


def _reservations(reservations: dict[str, Any]) -> dict[str, Reservation]:
    return {
        str(name): Reservation(
            name=str(name),
            users=tuple(str(u) for u in spec.get("users") or []),
            namespaces=tuple(str(a) for a in spec.get("accounts") or []),
        )
        for name, spec in reservations.items()
    }


def priority_classes(plan: KubernetesPlan) -> list[dict[str, Any]]:
    """One PriorityClass per workload class. None is the global default: the routing policy
    sets the class of every pod it routes, and system pods keep Kubernetes' own classes."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": wclass.priority_class, "labels": dict(names.MANAGED_BY)},
            "value": wclass.priority,
            "globalDefault": False,
            "description": wclass.description or f"workload class {name}",
        }
        for name, wclass in plan.classes.items()
    ]
