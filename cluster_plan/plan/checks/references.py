"""References: every name the plan uses (profile, rack, network, host) is defined."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.catalog import load_catalog
from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.checks.hints import missing
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node
from cluster_plan.plan.topology import normalize, rack_switches


def declared_racks(plan: Plan) -> set[str]:
    """The plan's racks: its `racks` section, or the racks its access switches serve."""
    declared = plan.get("racks")
    if declared is not None:
        return set(declared)
    return set(rack_switches(normalize(plan["topology"])))


def check_references(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    racks = declared_racks(plan)
    if not isinstance(plan["networks"], dict):
        return  # the schema reports it; every network name would look unknown
    networks = list(plan["networks"])
    for name, group in plan["node_groups"].items():
        yield from _group_references(plan, name, group, racks, networks)
    yield from _hardware_references(plan, networks)
    mgmt = plan["cluster"].get("management_network")
    if mgmt and mgmt not in networks:
        yield missing("network", mgmt, networks, ("cluster", "management_network"))
    tested = ((plan.get("acceptance") or {}).get("network") or {}).get("networks", [])
    for i, net in enumerate(tested):
        if net not in networks:
            yield missing("network", net, networks, ("acceptance", "network", "networks", i))
    yield from _storage_references(plan, nodes, networks)
    yield from _lab_references(plan, nodes)
    if plan.get("racks") is not None:
        served = rack_switches(normalize(plan["topology"]))
        for rack in sorted(set(served) - set(plan["racks"])):
            switch = served[rack][0]
            yield missing(
                "rack", rack, sorted(plan["racks"]), ("topology", "access", switch, "racks")
            )


def _group_references(
    plan: Plan, name: str, group: dict[str, Any], racks: set[str], networks: list[str]
) -> Iterator[Finding]:
    path = ("node_groups", name)
    hardware = plan["hardware"]
    # a missing value (`hardware:`) is a type error in the schema, not an unknown name
    if isinstance(group["hardware"], str) and group["hardware"] not in hardware:
        yield missing("hardware profile", group["hardware"], list(hardware), (*path, "hardware"))
    yield from _group_racks(path, group, racks)
    for i, net in enumerate(group.get("networks", [])):
        if net not in networks:
            yield missing("network", net, networks, (*path, "networks", i))


def _group_racks(
    path: tuple[str, str], group: dict[str, Any], racks: set[str]
) -> Iterator[Finding]:
    """rack or racks (one of the two), each declared; and each node's own rack, if it has one."""
    if "rack" in group and "racks" in group:
        yield Finding("conflicting-keys", "give rack or racks, not both", (*path, "racks"))
    if "rack" not in group and "racks" not in group:
        yield Finding("missing-key", "a node group needs rack or racks", path)
    listed = group.get("racks", [group["rack"]] if "rack" in group else [])
    # `racks: r1` is a type error in the schema, not the unknown racks 'r' and '1'
    for i, rack in enumerate(listed if isinstance(listed, list) else []):
        if isinstance(rack, str) and rack not in racks:
            at = (*path, "racks", i) if "racks" in group else (*path, "rack")
            yield missing("rack", rack, sorted(racks), at)
    yield from _node_racks(path, group, racks)


def _node_racks(path: tuple[str, str], group: dict[str, Any], racks: set[str]) -> Iterator[Finding]:
    for host, override in (group.get("nodes") or {}).items():
        rack = (override or {}).get("rack")
        if rack and rack not in racks:
            yield missing("rack", rack, sorted(racks), (*path, "nodes", host, "rack"))


def _hardware_references(plan: Plan, networks: list[str]) -> Iterator[Finding]:
    catalog = load_catalog()
    for name, profile in plan["hardware"].items():
        accel = profile.get("accelerators")
        if accel and accel["model"] not in catalog:
            yield missing(
                "accelerator model",
                accel["model"],
                sorted(catalog),
                ("hardware", name, "accelerators", "model"),
            )
        for i, nic in enumerate(profile.get("nics", [])):
            for j, net in enumerate(nic.get("networks", [])):
                if net not in networks:
                    yield missing(
                        "network", net, networks, ("hardware", name, "nics", i, "networks", j)
                    )


def _storage_references(plan: Plan, nodes: list[Node], networks: list[str]) -> Iterator[Finding]:
    storage = plan.get("storage") or {}
    ceph = storage.get("ceph") or {}
    for key in ("public_network", "cluster_network"):
        if key in ceph and ceph[key] not in networks:
            yield missing("network", ceph[key], networks, ("storage", "ceph", key))
    hosts = sorted({node.name for node in nodes})
    if storage.get("nfs"):
        yield from _nfs_references(storage["nfs"], hosts, networks)
    backups = plan.get("backups") or {}
    for target in ("target", "offsite"):
        host = (backups.get(target) or {}).get("host")
        if host is not None and host not in hosts:
            yield missing("host", host, hosts[:50], ("backups", target, "host"))


def _nfs_references(
    nfs: dict[str, Any], hosts: list[str], networks: list[str]
) -> Iterator[Finding]:
    if "server" in nfs and nfs["server"] not in hosts:
        yield missing("host", nfs["server"], hosts[:50], ("storage", "nfs", "server"))
    for i, export in enumerate(nfs.get("exports", [])):
        if export["network"] not in networks:
            path = ("storage", "nfs", "exports", i, "network")
            yield missing("network", export["network"], networks, path)


def _lab_references(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """`lab.bare` names hosts of the plan (a typo would boot that host on its image, and the
    install path it was meant to prove would go unproven)."""
    bare = (plan.get("lab") or {}).get("bare") or []
    hosts = [node.name for node in nodes]
    for i, name in enumerate(bare if isinstance(bare, list) else []):
        if isinstance(name, str) and name not in hosts:
            yield missing("host", name, hosts, ("lab", "bare", i))
