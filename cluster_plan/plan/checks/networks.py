"""Networks: addresses that parse and sit inside their network, overlaps, capacity."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import netaddr

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.networks import (
    AddressError,
    allocatable,
    nearly_full,
    network_space,
    parse_address,
    parse_network,
)
from cluster_plan.plan.nodes import Node


def check_networks(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    parsed: dict[str, netaddr.IPNetwork] = {}
    for name, spec in plan["networks"].items():
        path = ("networks", name)
        try:
            net = parse_network(spec["cidr"])
        except AddressError as exc:
            yield Finding("network-address", str(exc), (*path, "cidr"))
            continue
        parsed[name] = net
        yield from _unusable(net, (*path, "cidr"))
        yield from _site_addresses(spec, net, name)
        yield from _reserved(spec, net, name)
    yield from _kubernetes_cidrs(plan, parsed)
    yield from _overlaps(parsed)
    yield from _vlans(plan["networks"])
    gateways = [n for n, s in plan["networks"].items() if s.get("gateway")]
    if len(gateways) > 1:
        yield Finding(
            "multiple-gateways",
            f"networks {', '.join(gateways)} all have a gateway; hosts get one default route",
            ("networks", gateways[1], "gateway"),
            severity="warning",
            hint="keep the gateway on one network",
        )


def _site_addresses(spec: dict[str, Any], net: Any, name: str) -> Iterator[Finding]:
    path = ("networks", name)
    if spec.get("gateway") is not None:
        yield from _inside(spec["gateway"], net, name, (*path, "gateway"), "gateway")
    for key in ("dns", "ntp"):
        for i, value in enumerate(spec.get(key, []) or []):
            if key == "ntp" and not re.match(r"^[0-9.]+$", value):
                continue  # a host name
            # off the network it is reached through the gateway; without one, it needs a route
            yield from _inside(
                value,
                net,
                name,
                (*path, key, i),
                key.upper() + " server",
                outside_ok=True,
                routed=bool(spec.get("gateway")),
            )


def _reserved(spec: dict[str, Any], net: Any, name: str) -> Iterator[Finding]:
    reserved = spec.get("reserved", [])
    if not isinstance(reserved, list):
        return
    for i, entry in enumerate(reserved):
        path = ("networks", name, "reserved", i)
        try:
            space = network_space(name, {"cidr": spec["cidr"], "reserved": [entry]})
        except AddressError as exc:
            yield Finding("network-address", str(exc), path)
            continue
        if not space.reserved or len(space.reserved) < _entry_size(entry):
            yield Finding(
                "reserved-outside", f"reserved {entry!r} is not (wholly) inside {net}", path
            )


def _vlans(networks: dict[str, Any]) -> Iterator[Finding]:
    first: dict[int, str] = {}
    for name, spec in networks.items():
        vlan = spec.get("vlan")
        if vlan is None:
            continue
        if vlan in first:
            yield Finding(
                "duplicate-vlan",
                f"networks {first[vlan]} and {name} are both on VLAN {vlan}: one layer-2 "
                "segment for two networks",
                ("networks", name, "vlan"),
                severity="warning",
                hint="give each network its own vlan; suppress with a reason if two subnets "
                "really share one segment",
            )
        first.setdefault(vlan, name)


def _kubernetes_cidrs(plan: Plan, parsed: dict[str, Any]) -> Iterator[Finding]:
    k8s = (plan.get("scheduler") or {}).get("kubernetes") or {}
    for key in ("pod_cidr", "service_cidr"):
        if key in k8s:
            try:
                net = parse_network(k8s[key])
            except AddressError as exc:
                yield Finding("network-address", str(exc), ("scheduler", "kubernetes", key))
                continue
            parsed[f"scheduler.kubernetes.{key}"] = net
            yield from _unusable(net, ("scheduler", "kubernetes", key))


# Ranges no host or pod address may come from: the kernel routes loopback to itself,
# multicast is for groups, and 0/8 and 240/4 are refused as interface addresses.
UNUSABLE = (
    (netaddr.IPNetwork("127.0.0.0/8"), "loopback"),
    (netaddr.IPNetwork("224.0.0.0/4"), "multicast"),
    (netaddr.IPNetwork("0.0.0.0/8"), "'this network' (0.0.0.0/8)"),
    (netaddr.IPNetwork("240.0.0.0/4"), "reserved (240.0.0.0/4)"),
)


def _unusable(net: Any, path: tuple[Any, ...]) -> Iterator[Finding]:
    for special, what in UNUSABLE:
        if net.first <= special.last and special.first <= net.last:
            yield Finding(
                "network-range",
                f"{net} is in the {what} range {special}: hosts cannot use addresses there",
                path,
                hint="use a private range: 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16",
            )
            return


def _overlaps(parsed: dict[str, Any]) -> Iterator[Finding]:
    names = list(parsed)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if parsed[a].first <= parsed[b].last and parsed[b].first <= parsed[a].last:
                at: tuple[str, ...] = (
                    ("networks", b, "cidr")
                    if not b.startswith("scheduler.")
                    else ("scheduler", "kubernetes", b.rsplit(".", 1)[1])
                )
                yield Finding(
                    "network-overlap", f"{b} ({parsed[b]}) overlaps {a} ({parsed[a]})", at
                )


def _entry_size(entry: str) -> int:
    try:
        space = network_space("x", {"cidr": "0.0.0.0/0", "reserved": [entry]})
    except AddressError:
        return 0
    return len(space.reserved)


def _inside(
    value: str,
    net: Any,
    name: str,
    path: tuple[Any, ...],
    what: str,
    outside_ok: bool = False,
    routed: bool = False,
) -> Iterator[Finding]:
    try:
        address = parse_address(value)
    except AddressError as exc:
        yield Finding("network-address", str(exc), path)
        return
    if not net.first <= address <= net.last:
        if not outside_ok:
            yield Finding(
                "address-outside", f"{what} {value} is not inside network {name} ({net})", path
            )
        elif not routed:
            yield Finding(
                "address-outside",
                f"{what} {value} is not on network {name} ({net}), which has no gateway; "
                "nodes need a route to it",
                path,
                severity="warning",
            )
    elif address in (net.first, net.last) and net.prefixlen < 31:
        yield Finding(
            "address-outside", f"{what} {value} is the network or broadcast address of {net}", path
        )


def check_service_addresses(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """The package proxy or mirror, given by address inside a plan network, must be kept out
    of allocation (like the gateway, DNS and NTP, which are) or a host may be given it."""
    packages = plan.get("packages") or {}
    for key in ("proxy", "mirror"):
        try:
            host = urlsplit(str(packages.get(key, ""))).hostname
            address = parse_address(host or "")
        except (AddressError, ValueError):
            continue  # a host name, no URL, or one the schema refuses
        for name, spec in plan["networks"].items():
            try:
                space = network_space(name, spec)
            except AddressError:
                continue  # reported by check_networks
            if space.contains(address) and address not in space.reserved:
                yield Finding(
                    "address-not-reserved",
                    f"the package {key} {host} is inside network {name} ({space.network}) but "
                    "not reserved: the allocator may give that address to a host",
                    ("packages", key),
                    hint=f"add {host} to networks.{name}.reserved",
                )


def check_capacity(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    for name, spec in plan["networks"].items():
        try:
            space = network_space(name, spec)
        except AddressError:
            continue  # reported by check_networks
        hosts = sum(1 for node in nodes if name in node.networks)
        free = allocatable(space)
        if hosts > free:
            yield Finding(
                "network-capacity",
                f"network {name} ({space.network}) has {free} free addresses for {hosts} hosts",
                ("networks", name, "cidr"),
                hint="use a larger prefix, or fewer reserved addresses",
            )
        elif nearly_full(hosts, free):
            yield Finding(
                "network-nearly-full",
                f"network {name} would be {hosts}/{free} full; there is little room to grow",
                ("networks", name, "cidr"),
                severity="warning",
            )
