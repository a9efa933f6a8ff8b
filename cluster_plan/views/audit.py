"""`cluster-plan audit`: what the plan adds up to: capacity, address use, oversubscription."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cluster_plan.plan.contract import AccessSwitch, ExpandedPlan, Host, Network
from cluster_plan.plan.networks import allocatable, nearly_full, network_space

OVERSUBSCRIPTION_LIMIT = 3.0


def audit(expanded: ExpandedPlan) -> dict[str, Any]:
    hosts = list(expanded["hosts"].values())
    accelerators: Counter[str] = Counter()
    for host in hosts:
        if host["accelerators"]:
            accelerators[host["accelerators"]["model"]] += host["accelerators"]["count"]
    problems: list[str] = []
    networks = {
        name: _network_use(name, spec, hosts, problems)
        for name, spec in expanded["networks"].items()
    }
    switches = {
        name: _switch_load(name, switch, hosts, problems)
        for name, switch in expanded["topology"]["access"].items()
    }
    return {
        "cluster": expanded["cluster"]["name"],
        "hosts": len(hosts),
        "cpu_cores": sum(h["cpu_cores"] for h in hosts),
        "memory_gb": sum(h["memory_gb"] for h in hosts),
        "accelerators": dict(sorted(accelerators.items())),
        "pools": dict(sorted(Counter(h["pool"] for h in hosts if h["pool"]).items())),
        "networks": networks,
        "access_switches": switches,
        "problems": problems,
    }


def _network_use(
    name: str, spec: Network, hosts: list[Host], problems: list[str]
) -> dict[str, Any]:
    """How full a network is; a full or nearly full one adds to `problems`."""
    space = network_space(name, _site_spec(spec))
    free = allocatable(space)
    used = sum(1 for h in hosts if name in h["interfaces"])
    share = used / free if free > 0 else 1.0
    if used > free or nearly_full(used, free):
        problems.append(
            f"network {name} is {share:.0%} used ({used} hosts, {free} addresses free "
            "of reservations)"
        )
    return {
        "cidr": spec["cidr"],
        "hosts": used,
        "addresses": space.usable,
        "reserved": space.usable - free,
        "used_pct": round(100 * share, 1),  # of the addresses hosts can be given
    }


def _switch_load(
    name: str, switch: AccessSwitch, hosts: list[Host], problems: list[str]
) -> dict[str, Any]:
    """An access switch's host bandwidth against its uplink; oversubscription adds to
    `problems`."""
    members = [h for h in hosts if h["access_switch"] == name]
    demand = len(members) * switch["link_gbps"]
    uplink = switch["uplink_gbps"]
    ratio = round(demand / uplink, 2) if uplink else None
    if ratio is not None and ratio > OVERSUBSCRIPTION_LIMIT:
        problems.append(f"access switch {name} is oversubscribed {ratio}:1")
    return {
        "hosts": len(members),
        "host_gbps": demand,
        "uplink_gbps": uplink,
        "oversubscription": ratio,
    }


def _site_spec(network: Network) -> dict[str, Any]:
    """The expanded network as network_space reads it: the addresses the site takes (gateway,
    DNS, NTP) and the plan's reserved ranges count as used, as validate counts them."""
    return {
        "cidr": network["cidr"],
        "gateway": network["gateway"],
        "dns": network["dns"],
        "ntp": network["ntp"],
        "reserved": network["reserved"],
    }


def render_audit(report: dict[str, Any]) -> str:
    lines = [
        f"cluster {report['cluster']}: {report['hosts']} hosts, {report['cpu_cores']} "
        f"cores, {report['memory_gb']:,.0f} GB memory"
    ]
    for model, count in report["accelerators"].items():
        lines.append(f"  {count} x {model}")
    for pool, count in report["pools"].items():
        lines.append(f"  pool {pool}: {count} hosts")
    lines.append("networks:")
    for name, net in report["networks"].items():
        reserved = f", {net['reserved']} reserved" if net["reserved"] else ""
        lines.append(
            f"  {name} {net['cidr']}: {net['hosts']} hosts on {net['addresses'] - net['reserved']}"
            f" free addresses ({net['used_pct']}%){reserved}"
        )
    lines.append("access switches:")
    for name, sw in report["access_switches"].items():
        ratio = f"{sw['oversubscription']}:1" if sw["oversubscription"] is not None else "n/a"
        lines.append(
            f"  {name}: {sw['hosts']} hosts, {sw['host_gbps']:g} Gb/s down, "
            f"{sw['uplink_gbps'] or '?'} Gb/s up ({ratio})"
        )
    lines += [f"problem: {p}" for p in report["problems"]] or ["no problems"]
    return "\n".join(lines)
