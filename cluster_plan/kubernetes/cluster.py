"""The Kubernetes view of an expanded plan: which hosts are nodes, on which network, at which
version, behind which endpoint. Every reason a plan cannot become a cluster is the plan core's
(cluster_plan.plan.kubernetes.refusals), which validate asks too.

Pure: reads the expanded plan (docs/expanded-data.md) and nothing else; the settings a plan
leaves out are filled there (cluster_plan.plan.defaults), so none is chosen here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from cluster_plan.plan.findings import Finding, PlanError
from cluster_plan.plan.kubernetes import (
    Expanded,
    Host,
    WorkloadClass,
    members,
    pod_encapsulation,
    refusals,
    settings,
    workload_classes,
)
from cluster_plan.plan.kubernetes_releases import Release, release

API_PORT = 6443


@dataclass(frozen=True)
class KubernetesPlan:
    expanded: Expanded
    release: Release
    node_network: str
    pod_cidr: str
    service_cidr: str
    encapsulation: str
    control_planes: tuple[str, ...]
    nodes: tuple[str, ...]  # every Kubernetes node, in host order
    classes: dict[str, WorkloadClass]  # the classes whose pool has nodes, in plan order
    default_class: str | None
    api_vip: str | None
    gpu_sharing: dict[str, Any] = field(default_factory=dict)
    cni: str = "calico"  # calico | host-routes
    mirror: dict[str, Any] | None = None  # {host, registry_port, files_port}: the plan's own

    @property
    def lab(self) -> bool:
        """A lab plan (a `lab` section): its nodes are namespaces on one machine, reached only
        through the lab (cluster_plan.lab), never real hosts."""
        return self.expanded.get("lab") is not None

    @property
    def cluster_name(self) -> str:
        return str(self.expanded["cluster"]["name"])

    def host(self, name: str) -> Host:
        """A host of the expanded plan (shared: read it, do not change it)."""
        host: Host = self.expanded["hosts"][name]
        return host

    @cached_property
    def accelerator_pools(self) -> frozenset[str]:
        """Pools with at least one accelerator node: all of their nodes are tainted."""
        return frozenset(
            str(self.host(n)["pool"])
            for n in self.nodes
            if self.host(n).get("pool") and self.host(n).get("accelerators")
        )

    @cached_property
    def classes_of(self) -> dict[str, tuple[str, ...]]:
        """Node -> the workload classes it serves, in plan order."""
        served: dict[str, list[str]] = {}
        for wclass in self.classes.values():
            for node in wclass.nodes:
                served.setdefault(node, []).append(wclass.name)
        return {node: tuple(names) for node, names in served.items()}

    def node_ip(self, name: str) -> str:
        return str(self.expanded["hosts"][name]["interfaces"][self.node_network]["address"])

    @property
    def first_control_plane(self) -> str:
        return self.control_planes[0]

    @property
    def endpoint(self) -> str:
        """Where kubelets and clients reach the API: the plan's VIP, or the one control plane."""
        return f"{self.api_vip or self.node_ip(self.first_control_plane)}:{API_PORT}"

    @property
    def workers(self) -> tuple[str, ...]:
        return tuple(n for n in self.nodes if "k8s_worker" in self.host(n)["roles"])


def kubernetes_plan(expanded: Expanded) -> KubernetesPlan:
    """The plan's Kubernetes view; PlanError lists every reason it cannot be one."""
    scheduler = expanded.get("scheduler") or {}
    if scheduler.get("type") != "kubernetes":
        raise PlanError(
            [
                Finding(
                    "not-kubernetes",
                    f"the plan's scheduler is {scheduler.get('type')!r}, not kubernetes",
                    ("scheduler", "type"),
                )
            ]
        )
    findings = refusals(expanded)
    if findings:
        raise PlanError(findings)
    k8s = settings(expanded)
    nodes, control_planes = members(expanded)
    classes = workload_classes(expanded, nodes)
    vip = k8s["api_vip"]
    return KubernetesPlan(
        expanded=expanded,
        release=release(str(k8s["version"])),
        node_network=str(k8s["node_network"]),
        pod_cidr=str(k8s["pod_cidr"]),  # checked against every plan network by validate
        service_cidr=str(k8s["service_cidr"]),
        encapsulation=pod_encapsulation(k8s),
        control_planes=control_planes,
        nodes=nodes,
        classes=classes,
        default_class=_default_class(expanded, classes),
        api_vip=str(vip) if vip else None,
        gpu_sharing=dict(k8s["gpu_sharing"]),
        cni=str(k8s.get("cni") or "calico"),
        mirror=dict(k8s["mirror"]) if k8s.get("mirror") else None,
    )


def _default_class(expanded: Expanded, classes: dict[str, WorkloadClass]) -> str | None:
    """As Slurm's default partition: the class marked default, else the first that needs only
    CPUs, else the first."""
    spec = (expanded.get("scheduler") or {}).get("workload_classes") or {}
    for name in classes:
        if spec[name].get("default"):
            return name
    for name, wclass in classes.items():
        if wclass.needs == "cpu":
            return name
    return next(iter(classes), None)
