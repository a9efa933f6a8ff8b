"""Host interfaces: which NIC of a hardware profile carries which plan network, and whether
the networks sharing one NIC can live on it (one MTU per untagged device)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node

DEFAULT_MTU = 1500


def check_interfaces(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    networks = plan["networks"]
    for name, profile in plan["hardware"].items():
        nics = profile.get("nics") or []
        yield from _nic_names(name, nics)
        yield from _carried_twice(name, nics)
        for i, nic in enumerate(nics):
            yield from _shared_nic(name, i, nic, networks)
    yield from _networks_without_nic(plan, nodes)
    yield from _off_management(plan)


def _nic_names(profile: str, nics: list[dict[str, Any]]) -> Iterator[Finding]:
    seen: dict[str, int] = {}
    for i, nic in enumerate(nics):
        if nic["name"] in seen:
            yield Finding(
                "duplicate-nic",
                f"NIC {nic['name']!r} is listed twice (also nics[{seen[nic['name']]}])",
                ("hardware", profile, "nics", i, "name"),
            )
        seen.setdefault(nic["name"], i)


def _carried_twice(profile: str, nics: list[dict[str, Any]]) -> Iterator[Finding]:
    first: dict[str, str] = {}
    for i, nic in enumerate(nics):
        for j, net in enumerate(nic.get("networks") or []):
            if net in first and first[net] != nic["name"]:
                yield Finding(
                    "network-on-two-nics",
                    f"network {net} is on NICs {first[net]} and {nic['name']}; hosts configure "
                    f"it on {first[net]} only",
                    ("hardware", profile, "nics", i, "networks", j),
                    hint="a network lives on one NIC (bonds are set up outside the plan)",
                )
            first.setdefault(net, nic["name"])


def _shared_nic(
    profile: str, index: int, nic: dict[str, Any], networks: dict[str, Any]
) -> Iterator[Finding]:
    """Networks on one NIC share its device unless each has its own VLAN: those must agree
    on the MTU, which is a property of the device."""
    by_vlan: dict[Any, list[str]] = defaultdict(list)
    for net in nic.get("networks") or []:
        if net in networks:
            by_vlan[networks[net].get("vlan")].append(net)
    for vlan, names in by_vlan.items():
        mtus = {net: networks[net].get("mtu", DEFAULT_MTU) for net in names}
        if len(set(mtus.values())) > 1:
            shared = "untagged" if vlan is None else f"on VLAN {vlan}"
            listed = ", ".join(f"{net} (MTU {mtu})" for net, mtu in mtus.items())
            yield Finding(
                "nic-mtu-conflict",
                f"NIC {nic['name']} carries {listed} {shared}: one device has one MTU",
                ("hardware", profile, "nics", index, "networks"),
                hint="give the networks the same mtu, put them on different NICs, or tag each "
                "with its own vlan",
            )
    untagged = by_vlan.get(None)
    if untagged:
        device_mtu = networks[untagged[0]].get("mtu", DEFAULT_MTU)
        over = [
            net
            for vlan, names in by_vlan.items()
            if vlan is not None
            for net in names
            if networks[net].get("mtu", DEFAULT_MTU) > device_mtu
        ]
        if over:
            yield Finding(
                "nic-mtu-conflict",
                f"NIC {nic['name']} is at MTU {device_mtu} for untagged {untagged[0]}, but its "
                f"VLAN network {over[0]} wants MTU {networks[over[0]].get('mtu')}: a VLAN "
                "device cannot exceed the MTU of the NIC under it",
                ("hardware", profile, "nics", index, "networks"),
                hint=f"raise {untagged[0]}'s mtu, or tag it with a vlan too",
            )


def _network_without_nic(
    plan: Plan, node: Node, group: dict[str, Any], profile: dict[str, Any], net: str
) -> Finding:
    # a group on every network (the default) is fixed in its profile's nics
    listed = group.get("networks")
    if listed == list(plan["networks"]):
        listed = None
    at: tuple[Any, ...] = (
        ("node_groups", node.group, "networks", listed.index(net))
        if listed and net in listed
        else ("hardware", node.hardware, "nics")
    )
    names = ", ".join(nic["name"] for nic in profile["nics"])
    return Finding(
        "network-without-nic",
        f"hosts of group {node.group} are on network {net}, but none of the NICs of "
        f"hardware {node.hardware} ({names}) carries it",
        at,
        hint=f"add {net} to the networks of one of its nics"
        + ("" if listed else f", or give group {node.group} a networks list without it"),
    )


def _networks_without_nic(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """A profile that lists its NICs must carry every network its hosts are on; otherwise the
    host would get a device named after the network, which the hardware does not have."""
    reported: set[tuple[str, str]] = set()
    for node in nodes:
        profile = plan["hardware"].get(node.hardware)
        if not isinstance(profile, dict) or not profile.get("nics"):
            continue
        carried = {net for nic in profile["nics"] for net in nic.get("networks") or []}
        group = plan["node_groups"][node.group]
        for net in node.networks:
            if net in carried or (node.group, net) in reported or net not in plan["networks"]:
                continue
            reported.add((node.group, net))
            yield _network_without_nic(plan, node, group, profile, net)


def _off_management(plan: Plan) -> Iterator[Finding]:
    """Ansible, DNS names and the package proxy are on the management network."""
    mgmt = plan["cluster"].get("management_network") or next(iter(plan["networks"]), None)
    if mgmt not in plan["networks"]:
        return  # an unknown management network is reported as such
    for name, group in plan["node_groups"].items():
        listed = group.get("networks")
        if listed and mgmt not in listed and group.get("count"):
            yield Finding(
                "not-on-management-network",
                f"hosts of group {name} are not on the management network {mgmt}: Ansible "
                f"would reach them on {listed[0]} instead",
                ("node_groups", name, "networks"),
                severity="warning",
                hint=f"add {mgmt} to the group's networks",
            )
