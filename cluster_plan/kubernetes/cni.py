"""The pod network: Calico from its release manifest, with the plan's MTU and pod CIDR; or
host routes (`cni: host-routes`), with the CNI reference plugins of the offline bundle.

Pod traffic between nodes is wrapped (IP-in-IP by default), so the pod interfaces must be
smaller than the node network by the wrapper, or full-size packets are dropped once they are
wrapped: the classic silent loss of a wrong MTU. The overheads are Calico's (IPv4 outer
headers): IP-in-IP 20 bytes, VXLAN 50, none 0.

Host routes (as kind's kindnet): each node's pods get addresses from the node's own pod range
(its Node's `spec.podCIDR`, given by kube-controller-manager) through the `ptp` and
`host-local` plugins, a veth pair per pod with the node as its gateway; each node routes
every other node's pod range via that node's address on the node network, which every node
shares (validate checks it). Nothing is wrapped, so pods get the node network's MTU. Pod
traffic to anything outside the pod network is masqueraded behind the node's address, as
kindnet does, so that what is not a node can answer it.

`customize_calico` edits the parsed release manifest (the role downloads it and checks its
sha256 first): the `calico-config` ConfigMap's `veth_mtu` (which Calico also uses for its
tunnel devices) and the `calico-node` container's pool and encapsulation settings.
"""

from __future__ import annotations

import copy
from typing import Any

from cluster_plan.kubernetes.cluster import KubernetesPlan
from cluster_plan.plan.kubernetes import MIN_MTU as MIN_MTU
from cluster_plan.plan.kubernetes import OVERHEAD as OVERHEAD
from cluster_plan.plan.kubernetes import pod_mtu


class CalicoManifestError(ValueError):
    """The manifest lacks what the plan's settings go into (a changed release?)."""


def network_settings(plan: KubernetesPlan) -> dict[str, Any]:
    """What the role puts into Calico's manifest, from the plan."""
    # Every node's interface on the node network, not the network's nominal MTU: the
    # smallest one is what a wrapped packet must fit through.
    mtu = min(int(plan.host(n)["interfaces"][plan.node_network]["mtu"]) for n in plan.nodes)
    return {
        "plugin": plan.cni,
        "encapsulation": plan.encapsulation,
        "node_network": plan.node_network,
        "node_network_mtu": mtu,
        "pod_mtu": pod_mtu(mtu, plan.encapsulation),
        "pod_cidr": plan.pod_cidr,
    }


def _find(documents: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    for doc in documents:
        if doc.get("kind") == kind and (doc.get("metadata") or {}).get("name") == name:
            return doc
    raise CalicoManifestError(f"the Calico manifest has no {kind} {name}")


def _set_env(env: list[dict[str, Any]], name: str, value: str) -> None:
    for var in env:
        if var.get("name") == name:
            var.clear()
            var.update({"name": name, "value": value})
            return
    env.append({"name": name, "value": value})


def customize_calico(
    documents: list[dict[str, Any]], settings: dict[str, Any]
) -> list[dict[str, Any]]:
    """The release manifest's documents with the plan's settings in (a new list)."""
    docs = [copy.deepcopy(d) for d in documents if d]
    encapsulation = settings["encapsulation"]
    config = _find(docs, "ConfigMap", "calico-config")
    config.setdefault("data", {})["veth_mtu"] = str(settings["pod_mtu"])
    if encapsulation == "vxlan":
        config["data"]["calico_backend"] = "vxlan"  # no BGP: bird stays off
    node = _find(docs, "DaemonSet", "calico-node")
    containers = node["spec"]["template"]["spec"]["containers"]
    main = next((c for c in containers if c.get("name") == "calico-node"), None)
    if main is None:
        raise CalicoManifestError("the calico-node DaemonSet has no calico-node container")
    env = main.setdefault("env", [])
    _set_env(env, "CALICO_IPV4POOL_CIDR", str(settings["pod_cidr"]))
    _set_env(env, "CALICO_IPV4POOL_IPIP", "Always" if encapsulation == "ipip" else "Never")
    _set_env(env, "CALICO_IPV4POOL_VXLAN", "Always" if encapsulation == "vxlan" else "Never")
    if encapsulation == "vxlan":
        _drop_bird_probes(main)
    return docs


def _drop_bird_probes(container: dict[str, Any]) -> None:
    """VXLAN runs no BIRD: calico-node's probes must not ask after it."""
    for probe in ("livenessProbe", "readinessProbe"):
        command = ((container.get(probe) or {}).get("exec") or {}).get("command")
        if command:
            command[:] = [a for a in command if a not in ("-bird-live", "-bird-ready")]


HOST_ROUTES_NETWORK = "cluster-plan"
# Routes to other nodes' pod ranges carry this routing protocol number (unassigned by
# iproute2's rt_protos), so the role replaces exactly its own and nothing else.
HOST_ROUTES_PROTOCOL = 201


def host_routes_conflist(pod_cidr: str, mtu: int) -> dict[str, Any]:
    """The CNI configuration of a node whose pod range is `pod_cidr`."""
    return {
        "cniVersion": "1.0.0",
        "name": HOST_ROUTES_NETWORK,
        "plugins": [
            {
                "type": "ptp",
                "ipMasq": False,  # pod-to-pod keeps pod addresses; see outside_masquerade
                "mtu": int(mtu),
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": str(pod_cidr)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def _internal_ip(node: dict[str, Any]) -> str | None:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address["address"])
    return None


def host_routes(nodes: dict[str, Any], me: str) -> dict[str, Any]:
    """From `kubectl get nodes -o json`: this node's pod range, and a route to every other
    node's pod range via its InternalIP (the node network address kubelet's node-ip gives).
    `missing` names the nodes without a pod range or an address yet."""
    ranges: dict[str, str] = {}
    routes = []
    missing = []
    for node in nodes.get("items") or []:
        name = str(node["metadata"]["name"])
        cidr = (node.get("spec") or {}).get("podCIDR")
        address = _internal_ip(node)
        if not cidr or not address:
            missing.append(name)
            continue
        ranges[name] = str(cidr)
        if name != me:
            routes.append({"node": name, "dst": str(cidr), "via": address})
    return {
        "pod_cidr": ranges.get(me),
        "routes": sorted(routes, key=lambda r: str(r["dst"])),
        "missing": sorted(missing),
    }
