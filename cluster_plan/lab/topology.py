"""The lab's wiring, computed from the expanded plan: pure data, no side effects.

Each switch becomes one bridge per plan network (a switch's VLANs, since this kernel's
bridges have no VLAN filtering); each uplink becomes one veth pair per network.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster_plan.lab.names import LabError, ifname
from cluster_plan.plan.contract import ExpandedPlan, Lab, Topology


@dataclass(frozen=True)
class Bridge:
    name: str
    switch: str
    network: str
    mtu: int


@dataclass(frozen=True)
class Bypass:
    """Traffic that a link's rate limit leaves alone (its address and port, both directions):
    the package proxy's, and a Kubernetes plan's mirror (its registry and its files). Each
    stands in for a site's package or image mirror, which is no part of the fabric the lab
    scales down; through a scaled 10 Gb/s link at 100 Mbit/s, a training node's Debian torch
    (about 350 MB) took 28 s to download, against 1.4 s without, and the training image
    (1.3 GB) 3.5 min to pull on two nodes at once."""

    address: str
    port: int


@dataclass(frozen=True)
class Uplink:
    """A veth pair between two switch bridges of one network."""

    lower: str  # interface name on the lower (access/aggregation) bridge
    upper: str  # interface name on the upper (aggregation/core) bridge
    lower_bridge: str
    upper_bridge: str
    mbit: int
    mtu: int
    bypasses: tuple[Bypass, ...] = ()  # those of its network (`bypasses`)


@dataclass(frozen=True)
class Port:
    """One node interface: `device` inside the node, `switch_port` on the fabric bridge."""

    host: str
    network: str
    device: str
    switch_port: str
    bridge: str
    address: str
    prefixlen: int
    mtu: int
    mbit: int
    bypasses: tuple[Bypass, ...] = ()  # those of its network (`bypasses`)


@dataclass(frozen=True)
class Wiring:
    bridges: list[Bridge]
    uplinks: list[Uplink]
    ports: list[Port]
    loops: bool  # the tree has redundant paths, so the bridges need STP


def scaled_mbit(gbps: float, rate_scale: float) -> int:
    """Plan link speed as the lab's rate limit: gbps * rate_scale, in Mbit/s (at least 1)."""
    return max(1, round(gbps * 1000 * rate_scale))


def network_tags(networks: list[str]) -> dict[str, str]:
    """Short network names for bridge names: the first 4 letters, or the whole name where
    two networks share them (then hashed into 15 bytes if need be)."""
    short = {net: net[:4] for net in networks}
    clashes = {tag for tag in short.values() if list(short.values()).count(tag) > 1}
    return {net: (net if tag in clashes else tag) for net, tag in short.items()}


def bridge_name(switch: str, network: str, tags: dict[str, str] | None = None) -> str:
    return ifname(switch, (tags or {}).get(network, network[:4]))


def lab_settings(expanded: ExpandedPlan) -> Lab:
    """The plan's `lab` section: a plan is realized in the lab only when it has one, so that
    the lab and acceptance read the same rate_scale (and the inventory the same connection)."""
    settings = expanded["lab"]
    if settings is None:
        raise LabError(
            f"plan {expanded['cluster']['name']!r} has no `lab:` section; add `lab: {{}}` "
            "(rate_scale defaults to 0.01) to realize it in the lab"
        )
    return settings


# Uplinks whose capacity the plan leaves open run as fast as a host link (access) or as a
# 100 Gb/s spine (aggregation): fast enough never to be the bottleneck of a lab test.
_SPINE_GBPS = 100.0


def _edges(topo: Topology) -> list[tuple[str, str, float]]:
    edges: list[tuple[str, str, float]] = []
    for access, switch in topo["access"].items():
        edges.append(
            (access, switch["uplink"], float(switch["uplink_gbps"] or switch["link_gbps"]))
        )
    for agg, spec in topo["aggregation"].items():
        for core in spec["uplinks"]:
            edges.append((agg, core, float(spec["uplink_gbps"] or _SPINE_GBPS)))
    return edges


def wiring(expanded: ExpandedPlan) -> Wiring:
    scale = float(lab_settings(expanded)["rate_scale"])
    networks = expanded["networks"]
    topo = expanded["topology"]
    switches = [*topo["core"], *topo["aggregation"], *topo["access"]]
    tags = network_tags(list(networks))
    bridges = [
        Bridge(bridge_name(sw, net, tags), sw, net, int(spec["mtu"]))
        for sw in switches
        for net, spec in networks.items()
    ]
    edges = _edges(topo)
    left_alone = bypasses(expanded)
    uplinks = []
    for n, (lower, upper, gbps) in enumerate(edges):
        for k, net in enumerate(networks):
            uplinks.append(
                Uplink(
                    f"up{n}n{k}l",
                    f"up{n}n{k}u",
                    bridge_name(lower, net, tags),
                    bridge_name(upper, net, tags),
                    scaled_mbit(gbps, scale),
                    int(networks[net]["mtu"]),
                    left_alone.get(net, ()),
                )
            )
    ports = []
    net_index = {net: k for k, net in enumerate(networks)}
    for host, spec in expanded["hosts"].items():
        if spec["access_switch"] is None or spec["link_gbps"] is None:
            raise LabError(f"host {host} stands in no rack an access switch serves")
        for net, iface in spec["interfaces"].items():
            # named by host, not position, so that a plan that grows renames no cable
            ports.append(
                Port(
                    host,
                    net,
                    iface["device"],
                    ifname(host, f"n{net_index[net]}"),
                    bridge_name(spec["access_switch"], net, tags),
                    iface["address"],
                    int(iface["prefixlen"]),
                    int(iface["mtu"]),
                    scaled_mbit(float(spec["link_gbps"]), scale),
                    left_alone.get(net, ()),
                )
            )
    loops = len(edges) >= len(switches)  # a tree over n switches has n-1 edges
    return Wiring(bridges, uplinks, ports, loops)


def _digest(shape: object) -> str:
    import hashlib

    return hashlib.sha256(repr(shape).encode()).hexdigest()[:16]


def fabric_digest(expanded: ExpandedPlan) -> str:
    """What the running fabric was built from: switches, uplinks, networks, admin addresses."""
    wires = wiring(expanded)
    return _digest((wires.bridges, wires.uplinks, wires.loops, admin_addresses(expanded)))


def host_digests(expanded: ExpandedPlan) -> dict[str, str]:
    """Per host, what its node was built from: its cables and its stand-in hardware."""
    ports = wiring(expanded).ports
    return {
        host: _digest(
            (
                [p for p in ports if p.host == host],
                spec["accelerators"],
                spec["disks"],
                spec["hostname"],
            )
        )
        for host, spec in expanded["hosts"].items()
    }


def plan_changes(
    expanded: ExpandedPlan, fabric: str, hosts: dict[str, str]
) -> tuple[list[str], list[str]]:
    """(what changed under a running lab and needs down/up, hosts that can simply be added)."""
    if fabric and fabric != fabric_digest(expanded):
        return ["switches, networks or service addresses"], []
    now = host_digests(expanded)
    changed = [h for h, d in hosts.items() if now.get(h) != d]
    added = [h for h in now if hosts and h not in hosts]
    return [f"host {h}" for h in changed], added


def admin_addresses(expanded: ExpandedPlan) -> tuple[str, list[str], int]:
    """(network, addresses, prefixlen) the admin namespace holds on the management network,
    the one Ansible reaches nodes on (`cluster.management_network`, else the first).

    It stands in for the site services the plan points at on that network: the package
    proxy, DNS and NTP (e.g. 10.40.0.2), or, when none is set, the network's last address no
    host holds (hosts are given the lowest free addresses).
    """
    from urllib.parse import urlparse

    import netaddr

    net_name = expanded["cluster"]["management_network"]
    spec = expanded["networks"][net_name]
    cidr = netaddr.IPNetwork(spec["cidr"])
    wanted: list[str] = []
    proxy = expanded["packages"]["proxy"]
    host = urlparse(proxy).hostname if proxy else None
    for candidate in [host, *spec["dns"], *spec["ntp"]]:
        if candidate and _in(candidate, cidr) and candidate not in wanted:
            wanted.append(candidate)
    held = {h["interfaces"][net_name]["address"] for h in expanded["hosts"].values()
            if net_name in h["interfaces"]}  # fmt: skip
    if not wanted:
        free = (str(a) for a in reversed(list(cidr.iter_hosts())) if str(a) not in held)
        wanted.append(next(free, str(cidr[-2])))
    return net_name, wanted, cidr.prefixlen


def _in(address: str, cidr: Any) -> bool:
    import netaddr

    try:
        return netaddr.IPAddress(address) in cidr
    except (netaddr.AddrFormatError, ValueError):
        return False


def bypasses(expanded: ExpandedPlan) -> dict[str, tuple[Bypass, ...]]:
    """Per network, the traffic its links' rate leaves alone: the package proxy on the
    management network; a Kubernetes plan's mirror (registry and files) on its node network."""
    found: dict[str, tuple[Bypass, ...]] = {
        expanded["cluster"]["management_network"]: (proxy_bypass(expanded),)
    }
    scheduler = expanded["scheduler"]
    kubernetes: dict[str, Any] = (scheduler.get("kubernetes") if scheduler else None) or {}
    mirror = kubernetes.get("mirror")
    if mirror:
        network = str(kubernetes["node_network"])
        address = expanded["hosts"][mirror["host"]]["interfaces"][network]["address"]
        ports = (int(mirror["registry_port"]), int(mirror["files_port"]))
        found[network] = (*found.get(network, ()), *(Bypass(address, p) for p in ports))
    return found


def proxy_bypass(expanded: ExpandedPlan) -> Bypass:
    """Where the lab's package proxy listens: the plan's proxy port (3142 when the plan names
    none) on the admin namespace's first address."""
    from urllib.parse import urlparse

    proxy = expanded["packages"]["proxy"]
    return Bypass(
        admin_addresses(expanded)[1][0], (urlparse(proxy).port if proxy else None) or 3142
    )
