"""`cluster-plan backup status PLAN`: per node, the last snapshot's age and size and the last
restore drill. Exit 1 when a snapshot is older than the schedule allows, a backup or a
drill failed, or a node cannot be reached; 2 usage or an unreadable plan."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cluster_plan.backup.status import judge, render
from cluster_plan.cli.policy import CheckFailed, Exit, UsageError
from cluster_plan.transport.options import SshOptions, add_ssh_options


def register(subparsers: Any) -> None:
    """Add `backup` (with `status`) to the CLI's subparsers."""
    backup = subparsers.add_parser(
        "backup",
        help="the cluster's backups (docs/operations.md)",
        description="Backups are made by each node's timer (roles/backup); this reads them.",
    )
    actions = backup.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser(
        "status",
        help="last snapshot and restore drill per node",
        description="Per node and repository: the last snapshot's age, its size, what it "
        "added, and the last restore drill. Exit 1 when a snapshot is overdue or a backup or "
        "drill failed.",
    )
    status.add_argument("plan", type=Path, help="the cluster plan (YAML)")
    status.add_argument("--hosts", help="comma-separated hosts (default: all)")
    add_ssh_options(status, user=None)
    status.add_argument("--format", choices=["text", "json"], default="text")
    status.set_defaults(func=status_command)


def status_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import load_expanded
    from cluster_plan.day2.drift.command import chosen_hosts
    from cluster_plan.day2.remote.session import GatherError, gather

    expanded = load_expanded(str(args.plan))
    if expanded["backups"] is None:
        raise UsageError(f"{args.plan}: the plan has no backups section")
    hosts = chosen_hosts(expanded, args.hosts)
    try:
        ssh = SshOptions.from_args(args)
        results = gather(expanded, str(args.plan), "backup-status", {}, hosts, ssh=ssh)
    except GatherError as exc:
        raise CheckFailed(str(exc)) from None
    rows, findings = judge(results)
    document = {
        "plan": str(args.plan),
        "ok": not findings,
        "hosts": [r.as_dict() for r in rows],
        "findings": [f.as_dict() for f in findings],
    }
    args.reporter.result(document, lambda: render(rows, findings), document["findings"])
    return Exit.FAILED if findings else Exit.OK
