"""Services the plan confines to some of its networks, for the nftables firewall.

Every plan network reaches every other service of the cluster; these ports are reachable
only from the networks the plan names for them: Ceph's from its public and cluster
networks, NFS from each export's network.
"""

from __future__ import annotations

from typing import Any

Plan = dict[str, Any]

CEPH_TCP_PORTS = ["3300", "6789", "6800-7300"]  # msgr2, msgr1 monitors; OSD/MGR/MDS range
NFS_TCP_PORTS = ["2049"]  # NFSv4 only: no portmapper, no side protocols


def common_restricted_services(plan: Plan) -> list[dict[str, Any]]:
    """[{name, tcp_ports, sources (CIDRs)}] for the services the plan runs."""
    networks = plan.get("networks") or {}
    storage = plan.get("storage") or {}
    services: list[dict[str, Any]] = []
    ceph = storage.get("ceph")
    if ceph and networks:
        names = list(networks)
        public = ceph.get("public_network") or ("storage" if "storage" in names else names[0])
        cluster = ceph.get("cluster_network") or public
        sources = sorted({networks[n]["cidr"] for n in (public, cluster) if n in networks})
        services.append({"name": "ceph", "tcp_ports": CEPH_TCP_PORTS, "sources": sources})
    exports = (storage.get("nfs") or {}).get("exports") or []
    nfs_nets = {e["network"] for e in exports if e.get("network") in networks}
    if nfs_nets:
        sources = sorted(networks[n]["cidr"] for n in nfs_nets)
        services.append({"name": "nfs", "tcp_ports": NFS_TCP_PORTS, "sources": sources})
    return services


class FilterModule:
    """Ansible filters; see each function's docstring."""

    def filters(self) -> dict[str, Any]:
        return {"common_restricted_services": common_restricted_services}
