"""`cluster-plan monitoring render PLAN [-o DIR]`: Prometheus' configuration, file_sd targets
and alert rules, and Alertmanager's configuration, from the plan. Exit statuses as every
subcommand's (cluster_plan.cli.policy): 0 ok; 1 the plan has errors or no monitoring server,
every finding printed; 2 the plan cannot be read."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cluster_plan.cli.policy import Exit
from cluster_plan.findings import PlanError


def register(subparsers: Any) -> None:
    monitoring = subparsers.add_parser(
        "monitoring",
        help="Prometheus and Alertmanager configuration and alert rules from the plan",
        description="Monitoring from the plan; see docs/monitoring.md.",
    )
    sub = monitoring.add_subparsers(dest="monitoring_command", required=True, metavar="COMMAND")
    render = sub.add_parser(
        "render",
        help="write prometheus.yml, the file_sd targets, the alert rules and alertmanager.yml",
        description="Render a plan's monitoring. With -o DIR, write every file under DIR and "
        "remove files of an earlier rendering that no longer apply; without it, print them.",
    )
    render.add_argument("plan", metavar="PLAN", help="a cluster plan with a monitoring_server")
    render.add_argument("-o", "--output", type=Path, metavar="DIR", help="write the files here")
    render.set_defaults(func=render_command)


def render_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import expand_validation
    from cluster_plan.monitoring.render import render, write
    from cluster_plan.validate import validate_file

    result = validate_file(args.plan)
    try:
        files = render(expand_validation(result))
    except PlanError as exc:  # point the renderer's findings at the plan's lines
        placed = [result.doc.place(f) if f.file is None else f for f in exc.findings]
        raise PlanError(placed, result.doc.source_lines) from None
    if args.output is None:
        for path, text in files.items():
            sys.stdout.write(f"--- {path}\n{text}")
        return Exit.OK
    written = write(files, args.output)  # OSError: the policy names the file
    print(f"{args.output}: {len(written)} files")
    return Exit.OK
