"""The Kubernetes view of an expanded plan: which hosts are nodes, on which network, at which
version, behind which endpoint; and every reason the plan cannot become a cluster.

Pure: reads the expanded plan (docs/expanded-data.md) and nothing else; the settings a plan
leaves out are filled there (cluster_plan.plan.defaults), so none is chosen here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import netaddr

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.versions import Release, UnsupportedVersion, bundle_release, release
from cluster_plan.plan.findings import Finding, PlanError
from cluster_plan.plan.networks import network_space

# The expanded plan (cluster_plan.plan.contract.ExpandedPlan), read as plain data.
Expanded = Mapping[str, Any]
Host = dict[str, Any]

API_PORT = 6443
_K8S = ("scheduler", "kubernetes")


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
        return f"workload-{names.object_name(self.name)}"


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


def settings(expanded: Expanded) -> dict[str, Any]:
    return dict((expanded.get("scheduler") or {}).get("kubernetes") or {})


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
    nodes, control_planes = _members(expanded)
    classes = _classes(expanded, nodes)
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
    nodes, control_planes = _members(view)
    if not control_planes:
        findings.append(
            Finding("control-plane-count", "no node has the role k8s_control_plane", _K8S)
        )
    network = str(k8s.get("node_network"))
    findings += _node_network(view, network, nodes)
    findings += _pod_mtu(view, network, pod_encapsulation(k8s))
    findings += _api_vip(view, k8s.get("api_vip"), control_planes)
    findings += _cidr_sizes(k8s, len(nodes))
    findings += _names(view, _classes(view, nodes))
    findings += _mirror(view, k8s, nodes, network)
    return findings


# What Kubernetes listens on: API, etcd, kubelet, kube-proxy, controller-manager, scheduler
# (kubeadm's defaults), and NodePorts on every node. A mirror on a node must leave them free.
KUBERNETES_PORTS = (API_PORT, 2379, 2380, 10248, 10249, 10250, 10256, 10257, 10259)
NODE_PORTS = range(30000, 32768)


def _mirror(
    view: Expanded, k8s: Mapping[str, Any], nodes: tuple[str, ...], network: str
) -> list[Finding]:
    """The plan's mirror: a plan host on the node network, two free ports, the bundle's
    version and a pod network the bundle carries."""
    mirror = k8s.get("mirror")
    if not isinstance(mirror, Mapping):
        return []
    path = (*_K8S, "mirror")
    findings = _mirror_host(view, str(mirror.get("host")), nodes, network)
    findings += _mirror_ports(mirror, str(mirror.get("host")) in nodes)
    if k8s.get("cni", "calico") != "host-routes":
        findings.append(
            Finding(
                "mirror-cni",
                "the mirror serves the offline bundle, which has no Calico (its images are on "
                "public registries): an air-gapped cluster needs cni: host-routes",
                path,
                hint="set scheduler.kubernetes.cni: host-routes",
            )
        )
    if "version" in k8s:
        try:
            bundle_release(str(k8s["version"]))
        except UnsupportedVersion as exc:
            findings.append(Finding("unsupported-version", str(exc), (*_K8S, "version")))
    return findings


def _mirror_host(view: Expanded, host: str, nodes: tuple[str, ...], network: str) -> list[Finding]:
    from cluster_plan.plan.checks.hints import did_you_mean  # checks build on this module

    path = (*_K8S, "mirror", "host")
    hosts = view["hosts"]
    if host not in hosts:
        return [
            Finding(
                "unknown-reference",
                f"mirror host {host!r} is not a host of the plan",
                path,
                hint=did_you_mean(host, sorted(nodes or hosts)[:50]),
            )
        ]
    if network in view["networks"] and network not in hosts[host]["interfaces"]:
        return [
            Finding(
                "node-off-network",
                f"mirror host {host} has no address on node network {network}, where the "
                "nodes fetch from it",
                path,
            )
        ]
    return []


def _mirror_ports(mirror: Mapping[str, Any], on_a_node: bool) -> list[Finding]:
    path = (*_K8S, "mirror")
    ports = {"registry_port": mirror.get("registry_port", 5000)}
    ports["files_port"] = mirror.get("files_port", 8080)
    if ports["registry_port"] == ports["files_port"]:
        return [
            Finding(
                "mirror-port",
                f"the registry and the files repository cannot share port {ports['files_port']}",
                (*path, "files_port"),
            )
        ]
    if not on_a_node:
        return []
    return [
        Finding(
            "mirror-port",
            f"{key} {port} is a port Kubernetes uses on the mirror host, a node of the cluster "
            "(API 6443, etcd 2379-2380, kubelet 10248/10250, kube-proxy 10249/10256, "
            "controller-manager 10257, scheduler 10259, NodePorts 30000-32767)",
            (*path, key),
            hint="e.g. registry_port: 5000, files_port: 8080 (the defaults)",
        )
        for key, port in ports.items()
        if port in KUBERNETES_PORTS or port in NODE_PORTS
    ]


def pod_encapsulation(k8s: Mapping[str, Any]) -> str:
    """How pod traffic crosses the node network: Calico's `encapsulation`; host-routes never
    wraps it (each node routes the others' pod ranges to them directly)."""
    if k8s.get("cni", "calico") == "host-routes":
        return "none"
    return str(k8s.get("encapsulation", "ipip"))


def _members(view: Expanded) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(every Kubernetes node, the control planes), in host order."""
    hosts = view["hosts"]
    nodes = tuple(
        h for h, s in hosts.items() if {"k8s_control_plane", "k8s_worker"} & set(s["roles"])
    )
    return nodes, tuple(h for h in nodes if "k8s_control_plane" in hosts[h]["roles"])


def _pod_mtu(view: Expanded, network: str, encapsulation: str) -> list[Finding]:
    """Pods get the node network's MTU less the encapsulation's; IPv6 needs 1280 of it."""
    from cluster_plan.kubernetes.cni import pod_mtu  # cni builds on this module

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


def _classes(expanded: Expanded, nodes: tuple[str, ...]) -> dict[str, WorkloadClass]:
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
            if not names.is_label_name(str(name)):
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
        if not names.is_label_name(str(pool))
    ]
    return findings
