"""The cluster's identity: its time zone and time reference, its DNS domain and its admins."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from functools import cache
from zoneinfo import available_timezones

from cluster_plan.plan.checks.base import Plan
from cluster_plan.plan.findings import Finding
from cluster_plan.plan.nodes import Node


@cache
def iana_timezones() -> frozenset[str]:
    """The IANA names this system's time zone database knows (empty without one)."""
    return frozenset(available_timezones())


def timezone_hint(name: str, known: frozenset[str]) -> str:
    by_case = {z.lower(): z for z in known}
    if name.lower() in by_case:
        return f"did you mean {by_case[name.lower()]!r}? (names are case-sensitive)"
    if name.isalpha() and name.isupper():  # CEST, PST: one abbreviation, many zones
        return f"{name} is an abbreviation; use the IANA name of a place, e.g. Europe/Berlin"
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.8)
    if close:
        return f"did you mean {close[0]!r}?"
    return "use an IANA name such as UTC, Europe/Berlin or America/New_York"


def check_cluster(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    cluster = plan["cluster"]
    timezone = cluster.get("timezone")
    known = iana_timezones()
    # Without a time zone database there is nothing to compare with; the nodes have one.
    if isinstance(timezone, str) and known and timezone not in known:
        yield Finding(
            "unknown-timezone",
            f"{timezone!r} is not an IANA time zone name; nodes would have no "
            f"/usr/share/zoneinfo/{timezone}",
            ("cluster", "timezone"),
            hint=timezone_hint(timezone, known),
        )
    domain = str(cluster.get("domain", ""))
    if domain == "local" or domain.endswith(".local"):
        yield Finding(
            "domain-local",
            f"domain {domain} ends in .local, which is multicast DNS's (RFC 6762): resolvers "
            "send such names to mDNS, not to the cluster's DNS servers",
            ("cluster", "domain"),
            severity="warning",
            hint="use a name under a domain you own, or .internal (e.g. lab.internal)",
        )


def check_time_reference(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    """`cluster.time_reference` makes the ntp_server hosts the site's reference: it needs one."""
    if plan["cluster"].get("time_reference") is None:
        return
    if not any("ntp_server" in node.roles for node in nodes):
        yield Finding(
            "missing-role",
            "cluster.time_reference makes the hosts with role ntp_server the site's time "
            "reference, but no host has that role: nothing would serve the site's time",
            ("cluster", "time_reference"),
            hint="add ntp_server to the roles of the node group that serves time (e.g. the "
            "head node's), or remove time_reference",
        )


def check_admin_users(plan: Plan, nodes: list[Node]) -> Iterator[Finding]:
    seen: set[str] = set()
    for i, user in enumerate((plan.get("access") or {}).get("admin_users") or []):
        if user["name"] in seen:
            yield Finding(
                "duplicate-user",
                f"admin user {user['name']} is listed twice; the second would overwrite the first",
                ("access", "admin_users", i, "name"),
                hint="merge the two entries (ssh_keys is a list)",
            )
        seen.add(user["name"])
