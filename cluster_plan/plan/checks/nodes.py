"""Nodes: host names, duplicates, and per-node overrides (pinned addresses)."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from cluster_plan.plan.allocate import pin_refusal
from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.checks.hints import did_you_mean
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.networks import AddressError, network_space
from cluster_plan.plan.nodes import Node, hostname_findings

_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def check_nodes(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    pattern_findings = hostname_findings(plan)
    yield from pattern_findings
    yield from _invalid_names(nodes)
    # a pattern without {n} is reported once, as such, not again as duplicate host names
    without_n = {f.path[1] for f in pattern_findings}
    yield from _duplicates([n for n in nodes if n.group not in without_n])
    domain = plan["cluster"].get("domain", "")
    longest = max((node.name for node in nodes), key=len, default="")
    if len(longest) + 1 + len(domain) > 253:
        yield Finding(
            "hostname-invalid",
            f"{longest}.{domain} is longer than 253 characters",
            ("cluster", "domain"),
        )
    yield from _overrides(plan, nodes)


def _invalid_names(nodes: list[Node]) -> Iterator[Finding]:
    """One finding per group: a bad pattern makes every host of the group bad the same way."""
    bad: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        if not _DNS_LABEL.match(node.name):
            bad[node.group].append(node.name)
    for group, names in bad.items():
        shown = ", ".join(repr(n) for n in names[:3]) + (
            f" and {len(names) - 3} more" if len(names) > 3 else ""
        )
        verb = "is not a valid DNS label" if len(names) == 1 else "are not valid DNS labels"
        yield Finding(
            "hostname-invalid",
            f"{shown} {verb} (a-z, 0-9 and '-', at most 63, no '-' at either end)",
            ("node_groups", group, "hostname"),
        )


def _duplicates(nodes: list[Node]) -> Iterator[Finding]:
    seen: dict[str, Node] = {}
    # one finding per pair of groups: two copies of a 40,000-node group are one mistake
    duplicates: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node in nodes:
        if node.name in seen:
            duplicates[(seen[node.name].group, node.group)].append(node.name)
        else:
            seen[node.name] = node
    for (first, second), names in duplicates.items():
        hosts = (
            f"host {names[0]} is"
            if len(names) == 1
            else f"{len(names)} hosts ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
            " are"
        )
        by = (
            f"node group {first} more than once"
            if first == second
            else f"both node groups {first} and {second}"
        )
        yield Finding(
            "duplicate-hostname", f"{hosts} produced by {by}", ("node_groups", second, "hostname")
        )


def _overrides(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    pins: dict[tuple[str, str], str] = {}
    produced_by: dict[str, set[str]] = defaultdict(set)  # once, not once per group
    for node in nodes:
        produced_by[node.group].add(node.name)
    for group_name, group in plan["node_groups"].items():
        produced = produced_by[group_name]
        networks = group.get("networks", list(plan["networks"]))
        for host, override in (group.get("nodes") or {}).items():
            path = ("node_groups", group_name, "nodes", host)
            if host not in produced:
                yield Finding(
                    "unknown-node",
                    f"{host} is not a node of group {group_name}",
                    path,
                    hint=did_you_mean(host, sorted(produced)[:50]),
                )
                continue
            for net, address in ((override or {}).get("address") or {}).items():
                yield from _pin(plan, pins, networks, host, net, str(address), path)


def _pin(
    plan: Plan,
    pins: dict[tuple[str, str], str],
    networks: list[str],
    host: str,
    net: str,
    address: str,
    path: tuple[Any, ...],
) -> Iterator[Finding]:
    at = (*path, "address", net)
    if net not in networks:
        yield Finding(
            "unknown-reference",
            f"{host} is not on network {net}",
            at,
            hint=did_you_mean(net, networks),
        )
    elif (net, address) in pins:
        yield Finding(
            "duplicate-address",
            f"{address} is pinned for both {pins[(net, address)]} and {host}",
            at,
        )
    else:
        pins[(net, address)] = host
        # refused here too, so `validate --no-lock` and a plan without a lock say so
        try:
            space = network_space(net, plan["networks"][net])
        except AddressError:
            return  # reported by check_networks
        refusal = pin_refusal(space, address, at)
        if refusal is not None:
            yield refusal
