"""What drift is: the live facts of each host (cluster_plan.day2.remote) against the plan and
against the records the roles left at the last converge (their manifests).

Pure functions: expanded plan + facts in, findings out; tested without hosts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from cluster_plan.day2.remote.findings import HostFinding, sort_key
from cluster_plan.day2.remote.session import HostFacts
from cluster_plan.plan.contract import ExpandedPlan, Host
from cluster_plan.plan.roles import SLURM_HOST_ROLES
from cluster_plan.slurm.commands import NodeState
from cluster_plan.slurm.policy import slurm_node_records


def expected_records(expanded: ExpandedPlan, name: str) -> list[str]:
    """The roles whose manifest a converged host has."""
    host = expanded["hosts"][name]
    roles = ["common"]
    scheduler = expanded["scheduler"]
    if scheduler and scheduler["type"] == "slurm" and set(host["roles"]) & SLURM_HOST_ROLES:
        roles.append("slurm")
    if expanded["backups"] is not None:
        roles.append("backup")
    return roles


def slurm_view_host(expanded: ExpandedPlan) -> str | None:
    """The host whose scontrol answers for the cluster: the first controller."""
    scheduler = expanded["scheduler"]
    controllers = expanded["groups"].get("slurm_controller", [])
    return controllers[0] if scheduler and scheduler["type"] == "slurm" and controllers else None


def _short(digest: str | None) -> str:
    return "missing" if digest is None else f"sha256 {digest[:12]}"


def check_identity(name: str, host: Host, facts: dict[str, Any]) -> Iterator[HostFinding]:
    hostname = facts.get("hostname")
    if hostname is not None and hostname != host["hostname"]:
        yield HostFinding(name, "hostname", "", host["hostname"], hostname)


def check_links(
    name: str, host: Host, facts: dict[str, Any], management: str
) -> Iterator[HostFinding]:
    links = facts.get("links")
    if links is None:
        return
    for network, iface in host["interfaces"].items():
        link = links.get(iface["device"])
        if link is None:
            yield HostFinding(name, "link", network, f"device {iface['device']}", "no such link")
            continue
        if link["mtu"] != iface["mtu"]:
            yield HostFinding(name, "mtu", network, str(iface["mtu"]), str(link["mtu"]))
        wanted = f"{iface['address']}/{iface['prefixlen']}"
        found = link["addresses"]
        # off the management network the link carries the plan's address and nothing else
        exact = network != management
        if wanted not in found or (exact and found != [wanted]):
            shown = ", ".join(found) or "none"
            yield HostFinding(name, "address", network, f"{wanted} on {iface['device']}", shown)


def check_route(name: str, host: Host, facts: dict[str, Any]) -> Iterator[HostFinding]:
    routes = facts.get("default_routes")
    gateways = [(i["gateway"], i["device"]) for i in host["interfaces"].values() if i["gateway"]]
    if routes is None or not gateways:
        return
    found = [(r.get("gateway"), r.get("device")) for r in routes]
    if not any(g in found for g in gateways):
        expected = " or ".join(f"via {gw} dev {dev}" for gw, dev in gateways)
        shown = ", ".join(f"via {gw} dev {dev}" for gw, dev in found) or "no default route"
        yield HostFinding(name, "default-route", "", expected, shown)


def check_manifests(
    name: str, expanded: ExpandedPlan, facts: dict[str, Any]
) -> Iterator[HostFinding]:
    manifests = facts.get("manifests")
    if manifests is None:
        return
    for role in expected_records(expanded, name):
        if role not in manifests:
            yield HostFinding(
                name, "manifest", role, f"the {role} role's record", "none (not converged?)"
            )
    for role, manifest in sorted(manifests.items()):
        if "error" in manifest:
            yield HostFinding(name, "manifest", role, "a readable record", manifest["error"])


def check_recorded(name: str, facts: dict[str, Any]) -> Iterator[HostFinding]:
    """Files, services, held packages and firewall tables against the roles' records."""
    sums = facts.get("checksums") or {}
    units = facts.get("units") or {}
    tables = facts.get("nftables") or {}
    for role, manifest in _readable_records(facts):
        for path, digest in _entries(manifest, "files"):
            if path in sums and sums[path] != digest:
                yield HostFinding(name, "file", path, _short(digest), _short(sums[path]))
        for unit in manifest.get("services") or []:
            yield from _check_service(name, unit, units.get(unit))
        for package, version in _entries(manifest, "held_packages"):
            yield from _check_hold(name, package, version, facts.get("packages"))
        for table, ruleset in _entries(manifest, "nftables"):
            if table in tables:
                yield from _check_ruleset(name, table, ruleset, tables[table], role)


def _readable_records(facts: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The roles' records the host gave, by role; one it could not read is reported elsewhere."""
    records = (facts.get("manifests") or {}).items()
    return sorted((role, record) for role, record in records if "error" not in record)


def _entries(manifest: dict[str, Any], kind: str) -> list[tuple[str, Any]]:
    """A role record's entries of one kind, sorted by name."""
    return sorted((manifest.get(kind) or {}).items())


def _check_service(name: str, unit: str, state: dict[str, Any] | None) -> Iterator[HostFinding]:
    """A recorded service that is not running (a unit the host did not report is not judged)."""
    if not state or state["active"] == "active":
        return
    found = "not installed" if state["load"] == "not-found" else state["active"]
    sub = f" ({state['sub']})" if state["sub"] and found != "not installed" else ""
    yield HostFinding(name, "service", unit, "active", found + sub)


def _check_hold(
    name: str, package: str, version: str, packages: dict[str, Any] | None
) -> Iterator[HostFinding]:
    if packages is None:
        return
    live = packages.get(package)
    expected = f"held at {version}"
    if live is None or live.get("status") != "installed":
        yield HostFinding(name, "package-hold", package, expected, "not installed")
    elif live["selection"] != "hold":
        found = f"not held ({live['selection']}) at {live['version']}"
        yield HostFinding(name, "package-hold", package, expected, found)
    elif live["version"] != version:
        yield HostFinding(name, "package-hold", package, expected, f"held at {live['version']}")


def _check_ruleset(
    name: str, table: str, ruleset: str, live: str | None, role: str
) -> Iterator[HostFinding]:
    expected = f"the ruleset {role} loaded"
    if live is None:
        yield HostFinding(name, "nftables", table, expected, "no such table")
        return
    if live == ruleset:
        return
    want, have = ruleset.splitlines(), live.splitlines()
    added = [line.strip() for line in have if line not in want]
    removed = [line.strip() for line in want if line not in have]
    parts = [f"+ {line}" for line in added[:3]] + [f"- {line}" for line in removed[:3]]
    more = len(added) + len(removed) - len(parts)
    found = "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")
    yield HostFinding(name, "nftables", table, expected, found or "the same rules reordered")


def check_slurm_view(expanded: ExpandedPlan, view: str, facts: HostFacts) -> Iterator[HostFinding]:
    """Slurm's own view of every compute node (read on the controller ``view``), reported
    on the node it is about."""
    if not facts.reachable:
        return
    nodes = facts.facts.get("slurm_nodes")
    if nodes is None:
        return
    compute = [expanded["hosts"][h] for h in expanded["groups"].get("slurm_compute", [])]
    for record in slurm_node_records([dict(h) for h in compute]):
        node = nodes.get(record["name"])
        if node is None:
            yield HostFinding(
                record["name"], "slurm-node", "", f"known to slurmctld on {view}", "unknown"
            )
        else:
            yield from _slurm_node_differences(record, node)


def _slurm_node_differences(record: dict[str, Any], node: dict[str, Any]) -> Iterator[HostFinding]:
    """One node as slurmctld sees it against the plan's record of it: in service, its GRES
    and its features."""
    host = record["name"]
    # a node Slurm may not schedule on (DOWN, DRAIN, FAIL, NOT_RESPONDING, ...) is drift
    out = NodeState(node["state"], frozenset(node["flags"])).out_of_service
    if out:
        reason = f" ({node['reason']})" if node.get("reason") else ""
        yield HostFinding(
            host, "slurm-state", "", "a node Slurm schedules on", "+".join(out) + reason
        )
    gres = node["gres"].split("(")[0] if node["gres"] else ""
    if gres != (record["gres"] or ""):
        yield HostFinding(host, "slurm-gres", "", record["gres"] or "none", gres or "none")
    if sorted(record["features"]) != node["features"]:
        expected, found = ",".join(sorted(record["features"])), ",".join(node["features"])
        yield HostFinding(host, "slurm-features", "", expected, found or "none")


def _explained(finding: HostFinding, findings: list[HostFinding]) -> bool:
    """A node whose slurmd is stopped, or that is unreachable, is not in service: Slurm's
    view of it follows from the finding already made."""
    if finding.check != "slurm-state":
        return False
    return any(
        f.host == finding.host and (f.check == "unreachable" or (f.check, f.subject)
                                     == ("service", "slurmd"))
        for f in findings
    )  # fmt: skip


def drift_findings(expanded: ExpandedPlan, results: dict[str, HostFacts]) -> list[HostFinding]:
    """Every drift of every host, sorted by host."""
    management = expanded["cluster"]["management_network"]
    findings: list[HostFinding] = []
    for name, result in results.items():
        if not result.reachable:
            findings.append(
                HostFinding(name, "unreachable", "", "an SSH session", result.reason or "?")
            )
            continue
        host, facts = expanded["hosts"][name], result.facts
        findings += check_identity(name, host, facts)
        findings += check_links(name, host, facts, management)
        findings += check_route(name, host, facts)
        findings += check_manifests(name, expanded, facts)
        findings += check_recorded(name, facts)
        findings += [
            HostFinding(name, "fact", key, "readable output", error)
            for key, error in sorted(result.errors.items())
        ]
    view = slurm_view_host(expanded)
    if view is not None and view in results:
        slurm = [f for f in check_slurm_view(expanded, view, results[view]) if f.host in results]
        findings += [f for f in slurm if not _explained(f, findings)]
    return sorted(findings, key=sort_key)
