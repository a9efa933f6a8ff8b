"""Services the plan confines to some of its networks, for the nftables firewall.

Every plan network reaches every other service of the cluster; these ports are reachable
only from the networks the plan names for them: Ceph's from its public and cluster
networks, NFS from each export's network. node_exporter (the monitoring role's, on every host)
answers only the monitoring server's management address: its metrics name every device and
process count of the host, which no other node needs.

Ceph's range (6800-7300) holds other daemons' ports too (Slurm's 6817 and 6818), so the Ceph
rule only guards the host's own addresses on Ceph's networks, the only addresses its daemons
listen on; NFS's port is its own, so that rule guards every address.
"""

from __future__ import annotations

from typing import Any

from cluster_plan.monitoring.targets import NODE_EXPORTER_PORT

Plan = dict[str, Any]
Host = dict[str, Any]

CEPH_TCP_PORTS = ["3300", "6789", "6800-7300"]  # msgr2, msgr1 monitors; OSD/MGR/MDS range
NFS_TCP_PORTS = ["2049"]  # NFSv4 only: no portmapper, no side protocols
NODE_EXPORTER_TCP_PORTS = [str(NODE_EXPORTER_PORT)]


def common_restricted_services(
    plan: Plan, host: Host | None = None, monitoring_sources: list[str] | None = None
) -> list[dict[str, Any]]:
    """[{name, tcp_ports, sources (CIDRs), addresses (the host's guarded addresses; empty:
    all)}] for the services the plan runs. `monitoring_sources`: the monitoring server's
    addresses, when the plan has one (the inventory knows them, the plan section does not)."""
    networks = plan.get("networks") or {}
    interfaces = (host or {}).get("interfaces") or {}
    storage = plan.get("storage") or {}
    services = [
        _ceph(storage.get("ceph"), networks, interfaces),
        _nfs(storage.get("nfs"), networks),
        _node_exporter(plan.get("monitoring"), monitoring_sources),
    ]
    return [service for service in services if service is not None]


def _ceph(ceph: Any, networks: dict[str, Any], interfaces: dict[str, Any]) -> dict[str, Any] | None:
    """Ceph's ports, from its public and cluster networks, on this host's addresses there."""
    if not ceph:
        return None
    nets = [n for n in (ceph.get("public_network"), ceph.get("cluster_network")) if n]
    sources = sorted({networks[n]["cidr"] for n in nets if n in networks})
    addresses = sorted({interfaces[n]["address"] for n in nets if n in interfaces})
    if not sources or not addresses:
        return None
    return {"name": "ceph", "tcp_ports": CEPH_TCP_PORTS, "sources": sources, "addresses": addresses}


def _nfs(nfs: Any, networks: dict[str, Any]) -> dict[str, Any] | None:
    """NFS's ports, from the networks the exports serve."""
    exports = (nfs or {}).get("exports") or []
    nfs_nets = {e["network"] for e in exports if e.get("network") in networks}
    if not nfs_nets:
        return None
    sources = sorted(networks[n]["cidr"] for n in nfs_nets)
    return {"name": "nfs", "tcp_ports": NFS_TCP_PORTS, "sources": sources, "addresses": []}


def _node_exporter(monitoring: Any, sources: list[str] | None) -> dict[str, Any] | None:
    """node_exporter's port, from the monitoring server's addresses only."""
    if monitoring is None or not sources:
        return None
    return {
        "name": "node_exporter",
        "tcp_ports": NODE_EXPORTER_TCP_PORTS,
        "sources": sorted(f"{a}/32" for a in sources),
        "addresses": [],
    }
