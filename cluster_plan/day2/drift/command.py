"""`cluster-plan drift PLAN`: is the running cluster still what the plan says?

Read-only: facts are gathered with pyinfra over the inventory's SSH settings (and the user's
`--ssh-*`, as acceptance and change take them), and compared
with the plan and with what the roles recorded at the last converge. Exit 0 no drift, 1
drift (every finding printed, an unreachable host included), 2 usage or unreadable plan.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from cluster_plan.cli.policy import CheckFailed, Exit, UsageError
from cluster_plan.day2.drift.checks import drift_findings, slurm_view_host
from cluster_plan.day2.remote.findings import HostFinding
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.transport.options import SshOptions, add_ssh_options


def register(subparsers: Any) -> None:
    """Add `drift` to the CLI's subparsers."""
    drift = subparsers.add_parser(
        "drift",
        help="compare the live cluster with the plan and the last converge (read-only)",
        description="Connect to every host of the plan (pyinfra, the inventory's SSH settings) "
        "and report each difference from the plan and from what the roles recorded at the "
        "last converge: host name, addresses and MTU, default route, services, held packages, "
        "the firewall, the roles' files, and Slurm's own view of its nodes. Exit 1 on drift.",
    )
    drift.add_argument("plan", type=Path, help="the cluster plan (YAML)")
    drift.add_argument("--hosts", help="comma-separated hosts to check (default: all)")
    add_ssh_options(drift, user=None)
    drift.add_argument("--format", choices=["text", "json"], default="text")
    drift.set_defaults(func=drift_command)


def chosen_hosts(expanded: ExpandedPlan, hosts: str | None) -> list[str]:
    if not hosts:
        return list(expanded["hosts"])
    chosen = [h for h in hosts.split(",") if h]
    if unknown := [h for h in chosen if h not in expanded["hosts"]]:
        raise UsageError(f"no host {', '.join(repr(h) for h in unknown)} in the plan")
    return chosen


def collector_options(expanded: ExpandedPlan) -> dict[str, dict[str, Any]]:
    view = slurm_view_host(expanded)
    return {view: {"slurm_view": True}} if view else {}


def render(findings: list[HostFinding], hosts: int, reachable: int, seconds: float) -> str:
    lines = [f.render() for f in findings]
    verdict = f"{len(findings)} drift finding(s)" if findings else "no drift"
    lines.append(f"{verdict} on {hosts} host(s), {reachable} reachable ({seconds:.1f}s)")
    return "\n".join(lines)


def drift_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import load_expanded
    from cluster_plan.day2.remote.session import GatherError, gather

    expanded = load_expanded(str(args.plan))  # PlanError: every finding printed, exit 1/2
    hosts = chosen_hosts(expanded, args.hosts)
    started = time.monotonic()
    options = collector_options(expanded)
    try:
        results = gather(
            expanded, str(args.plan), "drift", options, hosts, ssh=SshOptions.from_args(args)
        )
    except GatherError as exc:
        raise CheckFailed(str(exc)) from None
    findings = drift_findings(expanded, results)
    seconds = time.monotonic() - started
    reachable = sum(r.reachable for r in results.values())
    document = {
        "plan": str(args.plan),
        "ok": not findings,
        "hosts": len(hosts),
        "reachable": reachable,
        "seconds": round(seconds, 3),
        "findings": [f.as_dict() for f in findings],
    }
    args.reporter.result(
        document,
        lambda: render(findings, len(hosts), reachable, seconds),
        document["findings"],
    )
    return Exit.FAILED if findings else Exit.OK
