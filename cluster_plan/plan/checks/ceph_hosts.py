"""The hosts of Ceph daemons: on the network the daemons bind to, with the memory the OSDs are
told they may use."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan, first_names
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node

DEFAULT_OSD_MEMORY_TARGET_MIB = 4096  # Ceph's own osd_memory_target


def check_ceph_hosts(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    ceph = (plan.get("storage") or {}).get("ceph")
    if not isinstance(ceph, dict):
        return
    yield from _public_network(ceph, nodes, plan.get("networks") or {})
    yield from _osd_memory(plan, ceph, [n for n in nodes if "ceph_osd" in n.roles])


def _public_network(
    ceph: dict[str, Any], nodes: list[Node], networks: dict[str, Any]
) -> Iterator[Finding]:
    """Monitors and OSDs bind to an address of the public network; clients reach them there."""
    public = ceph.get("public_network")
    if public not in networks:
        return  # an unknown network is reported as such
    for role, what in (("ceph_mon", "monitor"), ("ceph_osd", "OSD")):
        off = [n for n in nodes if role in n.roles and public not in n.networks]
        if off:
            shown = first_names([n.name for n in off])
            yield Finding(
                "ceph-public-network",
                f"{what} host(s) {shown} are not on the Ceph public network {public}: the "
                f"{what} has no address to bind to there",
                ("node_groups", off[0].group, "networks"),
                hint=f"put group {off[0].group} on network {public}, or set "
                "storage.ceph.public_network to a network it is on",
            )


def _osd_count(plan: Plan, node: Node) -> int:
    profile = plan["hardware"].get(node.hardware) if isinstance(node.hardware, str) else None
    disks = [*((profile or {}).get("disks") or []), *node.extra_disks]
    return sum(1 for d in disks if isinstance(d, dict) and d.get("use") == "osd")


def _osd_memory(plan: Plan, ceph: dict[str, Any], osds: list[Node]) -> Iterator[Finding]:
    """Each OSD grows its caches up to osd_memory_target: together they must fit the host."""
    target = (ceph.get("memory") or {}).get("osd_memory_target_mib")
    target = target if isinstance(target, int) else DEFAULT_OSD_MEMORY_TARGET_MIB
    seen: set[str] = set()
    for node in osds:
        profile = plan["hardware"].get(node.hardware) if isinstance(node.hardware, str) else None
        memory_gb = (profile or {}).get("memory_gb")
        count = _osd_count(plan, node)
        if node.group in seen or not isinstance(memory_gb, int | float) or not count:
            continue
        if count * target > memory_gb * 1024:
            seen.add(node.group)  # one finding per group: its hosts share a profile
            yield Finding(
                "ceph-osd-memory",
                f"{node.name} runs {count} OSD(s) of osd_memory_target {target} MiB, "
                f"{count * target} MiB in all, above its {memory_gb:g} GB of memory: the "
                "OSDs would be killed for memory",
                ("storage", "ceph", "memory", "osd_memory_target_mib"),
                hint=f"lower storage.ceph.memory.osd_memory_target_mib to at most "
                f"{int(memory_gb * 1024 // count)} (Ceph's floor is 896), or give "
                f"hardware {node.hardware} more memory",
            )
