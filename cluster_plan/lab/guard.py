"""The root namespace's guard: `unreachable` routes for every plan subnet.

The root namespace must never reach a plan address: it holds no plan address and no
bridge, and with these routes a stray packet to a plan subnet fails locally
(EHOSTUNREACH) instead of leaving through the default route. They are marked with their
own route protocol number so `lab down` deletes exactly these and nothing else.
"""

from __future__ import annotations

import json
from typing import Any

import netaddr

from cluster_plan.lab.names import LabError
from cluster_plan.lab.proc import run
from cluster_plan.plan.contract import ExpandedPlan

ROUTE_PROTO = "250"  # a private protocol number: marks routes the lab made


def plan_cidrs(expanded: ExpandedPlan) -> list[str]:
    return [str(spec["cidr"]) for spec in expanded["networks"].values()]


def _root_routes() -> list[dict[str, Any]]:
    out = run(["ip", "-j", "route", "show", "table", "all"], check=False).stdout or "[]"
    routes: list[dict[str, Any]] = json.loads(out)
    return routes


def _root_addresses() -> list[netaddr.IPNetwork]:
    out = run(["ip", "-j", "-4", "addr", "show"], check=False).stdout or "[]"
    return [
        netaddr.IPNetwork(f"{a['local']}/{a['prefixlen']}")
        for link in json.loads(out)
        for a in link.get("addr_info", [])
    ]


def check_no_overlap(expanded: ExpandedPlan) -> None:
    """Refuse a plan whose subnets this machine itself uses (the guard would cut it off)."""
    problems = []
    for cidr in map(netaddr.IPNetwork, plan_cidrs(expanded)):
        for net in _root_addresses():
            if net.ip in cidr or cidr.ip in net:
                problems.append(f"plan network {cidr} overlaps this machine's {net}")
        for route in _root_routes():
            dst = route.get("dst", "default")
            if dst == "default" or str(route.get("protocol")) == ROUTE_PROTO or ":" in dst:
                continue
            if route.get("type", "unicast") not in ("unicast",):
                continue
            other = netaddr.IPNetwork(dst)
            if other in cidr or cidr in other:
                problems.append(f"plan network {cidr} overlaps this machine's route to {dst}")
    if problems:
        raise LabError("the lab cannot use this plan here:\n  " + "\n  ".join(problems))


def present(expanded: ExpandedPlan) -> bool:
    have = {
        r.get("dst")
        for r in _root_routes()
        if str(r.get("protocol")) == ROUTE_PROTO and r.get("type") == "unreachable"
    }
    return set(plan_cidrs(expanded)) <= have


def add(expanded: ExpandedPlan) -> None:
    for cidr in plan_cidrs(expanded):
        run(["ip", "route", "replace", "unreachable", cidr, "proto", ROUTE_PROTO])


def remove(expanded: ExpandedPlan, keep: set[str]) -> None:
    """Delete this plan's guard routes, except those another running lab still needs."""
    wanted = set(plan_cidrs(expanded)) - keep
    for route in _root_routes():
        if str(route.get("protocol")) != ROUTE_PROTO or route.get("type") != "unreachable":
            continue
        if route.get("dst") in wanted:
            run(
                ["ip", "route", "del", "unreachable", route["dst"], "proto", ROUTE_PROTO],
                check=False,
            )
