"""`cluster-plan usage PLAN`: usage per team of the plan, from `sacct` on the first Slurm
controller (over SSH, or inside a lab node), or from a file of its output.

0 the report was made; 1 the cluster could not be asked (sacct failed or is unreachable); 2 a
usage error or unreadable input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import tempfile
from pathlib import Path
from typing import Any

from cluster_plan.cli.policy import CheckFailed, Exit, UsageError
from cluster_plan.day2.usage.report import (
    parse_sacct,
    period_start,
    render_text,
    sacct_argv,
    team_usage,
)
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.plan.input_files import read_text
from cluster_plan.transport.options import add_transport_options, executor_for

SACCT_TIMEOUT_S = 60


def register(subparsers: Any) -> None:
    usage = subparsers.add_parser(
        "usage",
        help="usage per team (jobs, CPU-, GPU- and accelerator-hours) against the plan's budgets",
        description="Reads Slurm's accounting (sacct) on the first slurm_controller and sums "
        "each team's usage since the start of the plan's usage period.",
    )
    usage.add_argument("plan", type=Path, help="the cluster plan (YAML)")
    usage.add_argument(
        "--since", help="first day counted, YYYY-MM-DD (default: start of the usage period)"
    )
    usage.add_argument(
        "--from",
        dest="source",
        type=Path,
        help="read sacct output from this file ('-' for stdin) instead of asking the cluster; "
        "made with: " + " ".join(sacct_argv("DATE")),
    )
    # sacct runs on the controller: lab-netns would run this machine's
    add_transport_options(usage, ("ssh", "lab", "exec"))
    usage.add_argument("--format", choices=["text", "json", "yaml"], default="text")
    usage.set_defaults(func=usage_command)


def _since(args: argparse.Namespace, expanded: ExpandedPlan) -> str:
    if args.since:
        try:
            return dt.date.fromisoformat(args.since).isoformat()
        except ValueError as exc:
            raise UsageError(f"--since {args.since!r} is not a date (YYYY-MM-DD)") from exc
    scheduler = expanded["scheduler"]
    slurm = scheduler.get("slurm") if scheduler else None
    start = period_start(slurm["usage_period"], dt.date.today()) if slurm else None
    return (start or dt.date(1970, 1, 1)).isoformat()


MAX_SACCT_BYTES = 1024 * 1024 * 1024  # a year of a busy cluster's job records


def _read_source(source: Path) -> str:
    if str(source) == "-":
        return sys.stdin.read()
    return read_text(source, MAX_SACCT_BYTES)  # InputError: a FIFO, binary data, too large


def _ask_cluster(args: argparse.Namespace, expanded: ExpandedPlan, since: str) -> str:
    controllers = expanded["groups"].get("slurm_controller") or []
    if not controllers:
        raise UsageError("the plan has no slurm_controller to ask for accounting")
    controller = controllers[0]
    addresses = {controller: expanded["hosts"][controller]["address"]}
    with tempfile.TemporaryDirectory(prefix="cluster-plan-usage-") as control_dir:
        executor = executor_for(args, expanded, addresses, Path(control_dir))
        result = executor.run(controller, sacct_argv(since), timeout=SACCT_TIMEOUT_S)
    if result.rc != 0:
        raise CheckFailed(
            f"sacct on {controller} failed (exit {result.rc}): {result.stderr.strip()[-400:]}"
        )
    return result.stdout


def usage_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import load_expanded

    expanded = load_expanded(str(args.plan))
    since = _since(args, expanded)
    text = _read_source(args.source) if args.source else _ask_cluster(args, expanded, since)
    try:
        jobs = parse_sacct(text)
    except ValueError as exc:
        raise UsageError(f"{args.source or 'sacct'}: {exc}") from exc
    report = team_usage(expanded, jobs, since)
    args.reporter.result(report, lambda: render_text(report))
    return Exit.OK
