"""The Kubernetes section of a plan: the names Kubernetes takes from it, the MTU its node
network leaves the pods, and every reason it cannot become a cluster (the releases it may name:
kubernetes_releases; its own mirror: kubernetes_mirror).

validate's check (cluster_plan.plan.checks.kubernetes) and the renderer
(cluster_plan.kubernetes.cluster) both ask `refusals`, so the rules are stated once, here in
the plan core; the renderer's modules import what they share of it (versions, names, cni).
Pure: reads the plan, or the expanded plan, as plain data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import netaddr

from cluster_plan.plan.findings import Finding
from cluster_plan.plan.kubernetes_mirror import mirror_refusals
from cluster_plan.plan.kubernetes_releases import Release, UnsupportedVersion, release
from cluster_plan.plan.networks import network_space
from cluster_plan.plan.roles import KUBERNETES_NODE_ROLES

# The expanded plan (cluster_plan.plan.contract.ExpandedPlan), read as plain data.
Expanded = Mapping[str, Any]
Host = dict[str, Any]

_K8S = ("scheduler", "kubernetes")

# ---- names ---------------------------------------------------------------------------------

_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def object_name(name: str) -> str:
    """A plan name as a Kubernetes object name (DNS-1123: no `_`)."""
    return name.lower().replace("_", "-")


def is_label_name(text: str) -> bool:
    """A label value, or the name part of a label key (63 characters, alphanumeric ends)."""
    return bool(_LABEL_NAME.match(text))


# ---- the pod network's MTU ------------------------------------------------------------------
# Pod traffic between nodes is wrapped (IP-in-IP by default), so the pod interfaces must be
# smaller than the node network by the wrapper: Calico's IPv4 overheads.

OVERHEAD = {"ipip": 20, "vxlan": 50, "none": 0}
MIN_MTU = 1280  # IPv6's minimum link MTU; anything below breaks pods that use IPv6


def pod_mtu(network_mtu: int, encapsulation: str) -> int:
    """The MTU of pod interfaces and Calico's tunnel devices on a network of `network_mtu`."""
    if encapsulation not in OVERHEAD:
        raise ValueError(f"unknown encapsulation {encapsulation!r} ({', '.join(OVERHEAD)})")
    mtu = int(network_mtu) - OVERHEAD[encapsulation]
    if mtu < MIN_MTU:
        raise ValueError(
            f"a {network_mtu}-byte network leaves {mtu} bytes for pods under {encapsulation}; "
            f"at least {MIN_MTU} are needed"
        )
    return mtu


# ---- the rules -----------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadClass:
    name: str
    pool: str
    needs: str
    priority: int
    description: str
    nodes: tuple[str, ...]  # the Kubernetes nodes of its pool, in host order

    @property
    def priority_class(self) -> str:
        return f"workload-{object_name(self.name)}"


def settings(expanded: Expanded) -> dict[str, Any]:
    return dict((expanded.get("scheduler") or {}).get("kubernetes") or {})


def refusals(view: Expanded) -> list[Finding]:
    """Every reason a Kubernetes plan cannot become a cluster. `view` is the expanded plan, or
    (validate's checks) the plan with defaults and, per host, its roles, pool and interfaces
    keyed by network, without addresses: so validate and render state these rules once."""
    findings: list[Finding] = []
    k8s = settings(view)
    _release(k8s, findings)
    if k8s.get("container_runtime", "containerd") != "containerd":
        findings.append(
            Finding(
                "unsupported-runtime",
                f"container runtime {k8s['container_runtime']} is not supported; use containerd",
                (*_K8S, "container_runtime"),
            )
        )
    nodes, control_planes = members(view)
    if not control_planes:
        findings.append(
            Finding("control-plane-count", "no node has the role k8s_control_plane", _K8S)
        )
    network = str(k8s.get("node_network"))
    findings += _node_network(view, network, nodes)
    findings += _pod_mtu(view, network, pod_encapsulation(k8s))
    findings += _api_vip(view, k8s.get("api_vip"), control_planes)
    findings += _cidr_sizes(k8s, len(nodes))
    findings += _names(view, workload_classes(view, nodes))
    findings += mirror_refusals(view, k8s, nodes, network)
    return findings


def pod_encapsulation(k8s: Mapping[str, Any]) -> str:
    """How pod traffic crosses the node network: Calico's `encapsulation`; host-routes never
    wraps it (each node routes the others' pod ranges to them directly)."""
    if k8s.get("cni", "calico") == "host-routes":
        return "none"
    return str(k8s.get("encapsulation", "ipip"))


def members(view: Expanded) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every Kubernetes node, the control planes), in host order."""
    hosts = view["hosts"]
    nodes = tuple(h for h, s in hosts.items() if KUBERNETES_NODE_ROLES & set(s["roles"]))
    return nodes, tuple(h for h in nodes if "k8s_control_plane" in hosts[h]["roles"])


def _pod_mtu(view: Expanded, network: str, encapsulation: str) -> list[Finding]:
    """Pods get the node network's MTU less the encapsulation's; IPv6 needs 1280 of it."""
    spec = view["networks"].get(network)
    if not isinstance(spec, Mapping) or not isinstance(spec.get("mtu"), int):
        return []  # an unknown network is reported by _node_network
    try:
        pod_mtu(spec["mtu"], encapsulation)
    except ValueError as exc:
        return [
            Finding(
                "pod-mtu",
                f"node network {network}: {exc}",
                (*_K8S, "encapsulation"),
                hint=f"raise networks.{network}.mtu, or use encapsulation: none (routed)",
            )
        ]
    return []


# kube-controller-manager gives every node a /24 of the pod network (kubeadm's
# node-cidr-mask-size); kubeadm puts the cluster DNS at the 10th address of the service
# network, and kube-apiserver refuses a service network larger than /12.
NODE_POD_PREFIX = 24
MAX_SERVICE_PREFIX = 28
MIN_SERVICE_PREFIX = 12


def _cidr_sizes(k8s: Mapping[str, Any], node_count: int) -> list[Finding]:
    findings = []
    try:
        pods = netaddr.IPNetwork(str(k8s.get("pod_cidr")))
        services = netaddr.IPNetwork(str(k8s.get("service_cidr")))
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return []  # reported by validate's network checks
    room = 2 ** (NODE_POD_PREFIX - pods.prefixlen) if pods.prefixlen < NODE_POD_PREFIX else 0
    if room < max(node_count, 1):
        findings.append(
            Finding(
                "pod-cidr-size",
                f"pod_cidr {pods} holds {room} /{NODE_POD_PREFIX} node range(s) for "
                f"{node_count} Kubernetes node(s): each node gets a /{NODE_POD_PREFIX} of it",
                (*_K8S, "pod_cidr"),
                hint=f"use a /{_prefix_for(node_count)} or larger",
            )
        )
    if not MIN_SERVICE_PREFIX <= services.prefixlen <= MAX_SERVICE_PREFIX:
        findings.append(
            Finding(
                "service-cidr-size",
                f"service_cidr {services} is a /{services.prefixlen}: kube-apiserver takes "
                f"/{MIN_SERVICE_PREFIX} to /{MAX_SERVICE_PREFIX} (the cluster DNS is its "
                "10th address)",
                (*_K8S, "service_cidr"),
                hint="e.g. 10.96.0.0/12, the default",
            )
        )
    return findings


def _prefix_for(node_count: int) -> int:
    return NODE_POD_PREFIX - max(node_count - 1, 1).bit_length()


def _release(k8s: dict[str, Any], findings: list[Finding]) -> Release | None:
    if "version" not in k8s:
        findings.append(
            Finding(
                "missing-key",
                "a Kubernetes plan names its version",
                _K8S,
                hint='e.g. version: "1.36"',
            )
        )
        return None
    try:
        return release(str(k8s["version"]))
    except UnsupportedVersion as exc:
        findings.append(Finding("unsupported-version", str(exc), (*_K8S, "version")))
        return None


def _node_network(expanded: Expanded, network: str, nodes: tuple[str, ...]) -> list[Finding]:
    path = (*_K8S, "node_network")
    if network not in expanded["networks"]:
        return [
            Finding(
                "unknown-network",
                f"node network {network} is not a plan network ({', '.join(expanded['networks'])})",
                path,
            )
        ]
    off = [h for h in nodes if network not in expanded["hosts"][h]["interfaces"]]
    if off:
        return [
            Finding(
                "node-off-network",
                f"Kubernetes nodes {', '.join(off)} have no address on node network {network}",
                path,
            )
        ]
    return []


def _api_vip(expanded: Expanded, vip: Any, control_planes: tuple[str, ...]) -> list[Finding]:
    path = (*_K8S, "api_vip")
    if not vip:
        if len(control_planes) > 1:
            return [
                Finding(
                    "missing-key",
                    f"{len(control_planes)} control-plane nodes need one API address "
                    "(scheduler.kubernetes.api_vip) that moves between them",
                    _K8S,
                    hint="pick a reserved address of a network every control plane is on",
                )
            ]
        return []
    try:
        address = netaddr.IPAddress(str(vip))
    except (netaddr.AddrFormatError, ValueError):
        return [Finding("network-address", f"api_vip {vip} is not an IP address", path)]
    taken = {  # validate's view has no addresses yet: a reserved VIP is no host's anyway
        iface["address"]: host
        for host, spec in expanded["hosts"].items()
        for iface in spec["interfaces"].values()
        if iface.get("address")
    }
    if str(address) in taken:
        return [Finding("address-in-use", f"api_vip {vip} is {taken[str(address)]}'s", path)]
    for name, spec in expanded["networks"].items():
        if address not in netaddr.IPNetwork(spec["cidr"]):
            continue
        services = {spec.get("gateway"), *spec.get("dns", []), *spec.get("ntp", [])}
        if str(address) in services:
            return [Finding("address-in-use", f"api_vip {vip} is a service address", path)]
        if int(address) not in network_space(name, spec).reserved:
            return [
                Finding(
                    "address-not-reserved",
                    f"api_vip {vip} is inside network {name} but not reserved: the allocator "
                    "may give that address to a host",
                    path,
                    hint=f"add {vip} to networks.{name}.reserved",
                )
            ]
        off = [h for h in control_planes if name not in expanded["hosts"][h]["interfaces"]]
        if off:
            return [
                Finding(
                    "node-off-network",
                    f"api_vip {vip} is on {name}, where control planes {', '.join(off)} "
                    "have no interface",
                    path,
                )
            ]
        return []
    return [Finding("network-address", f"api_vip {vip} is in no plan network", path)]


def workload_classes(expanded: Expanded, nodes: tuple[str, ...]) -> dict[str, WorkloadClass]:
    hosts = expanded["hosts"]
    served = {}
    for name, spec in ((expanded.get("scheduler") or {}).get("workload_classes") or {}).items():
        members = tuple(
            h for h in nodes if hosts[h].get("pool") == spec["pool"] and _schedulable(hosts[h])
        )
        if members:
            served[str(name)] = WorkloadClass(
                name=str(name),
                pool=str(spec["pool"]),
                needs=str(spec.get("needs", "any")),
                priority=int(spec.get("priority", 0)),
                description=str(spec.get("description", "")),
                nodes=members,
            )
    return served


def _schedulable(host: Host) -> bool:
    """Work runs on workers; a control plane that is not also a worker keeps its taint."""
    return "k8s_worker" in host["roles"]


def _names(expanded: Expanded, classes: dict[str, WorkloadClass]) -> list[Finding]:
    """Plan names become label names and object names; both are stricter than plan names."""
    findings = []
    scheduler = expanded.get("scheduler") or {}
    for kind, section in (
        ("workload class", "workload_classes"),
        ("dataset", "datasets"),
        ("reservation", "reservations"),
    ):
        for name in scheduler.get(section) or {}:
            if not is_label_name(str(name)):
                findings.append(
                    Finding(
                        "kubernetes-name",
                        f"{kind} {name} cannot be a Kubernetes label name (letters, digits, "
                        "'-', '_', '.'; a letter or digit at both ends)",
                        ("scheduler", section, name),
                    )
                )
    seen: dict[str, str] = {}
    for name, wclass in classes.items():
        other = seen.setdefault(wclass.priority_class, name)
        if other != name:
            findings.append(
                Finding(
                    "kubernetes-name",
                    f"workload classes {other} and {name} both become PriorityClass "
                    f"{wclass.priority_class}",
                    ("scheduler", "workload_classes", name),
                )
            )
    pools = {h.get("pool") for h in expanded["hosts"].values() if h.get("pool")}
    findings += [
        Finding(
            "kubernetes-name",
            f"pool {pool} cannot be a Kubernetes label value",
            ("node_groups",),
        )
        for pool in sorted(pools)
        if not is_label_name(str(pool))
    ]
    return findings
