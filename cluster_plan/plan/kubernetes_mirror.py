"""The plan's own mirror of a Kubernetes plan (`scheduler.kubernetes.mirror`): the files
repository and image registry an air-gapped cluster installs from, served by a host of the
plan. Every reason the plan's mirror cannot serve its cluster. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster_plan.plan.findings import Finding
from cluster_plan.plan.kubernetes_releases import UnsupportedVersion, bundle_release

# The expanded plan (or validate's view of the plan), read as plain data.
Expanded = Mapping[str, Any]

_K8S = ("scheduler", "kubernetes")

# What Kubernetes listens on: API, etcd, kubelet, kube-proxy, controller-manager, scheduler
# (kubeadm's defaults), and NodePorts on every node. A mirror on a node must leave them free.
KUBERNETES_PORTS = (6443, 2379, 2380, 10248, 10249, 10250, 10256, 10257, 10259)
NODE_PORTS = range(30000, 32768)


def mirror_refusals(
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
