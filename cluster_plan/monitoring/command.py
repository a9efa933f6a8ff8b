"""`cluster-plan monitoring render PLAN [-o DIR]`: Prometheus' configuration, file_sd targets
and alert rules, Alertmanager's configuration and Grafana dashboards, from the plan. Exit
statuses as every subcommand's (cluster_plan.cli.policy): 0 ok; 1 the plan has errors or no
monitoring server, every finding printed; 2 the plan cannot be read.

`cluster-plan monitoring status (--url URL | --from-json FILE) [-o HTML] [--save-json FILE]`:
the status page from a Prometheus' API answers; 2 when they cannot be had or read."""

from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.error
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cluster_plan.cli.policy import Exit
from cluster_plan.plan.findings import PlanError

MAX_ANSWERS = 256 * 1024 * 1024  # a large cluster's saved answers; more is not one


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
        "remove files of an earlier rendering that no longer apply; DIR must be new, empty or "
        "written by this command (its .cluster-plan-files.json lists what it wrote); without "
        "it, print them.",
    )
    render.add_argument("plan", metavar="PLAN", help="a cluster plan with a monitoring_server")
    render.add_argument("-o", "--output", type=Path, metavar="DIR", help="write the files here")
    render.set_defaults(func=render_command)
    status = sub.add_parser(
        "status",
        help="an HTML status page from Prometheus' API: alerts, targets, GPUs, Ceph",
        description="Ask a Prometheus (--url) or read its answers saved earlier (--from-json) "
        "and write one self-contained HTML page: the alerts firing, the node_exporter targets "
        "up and down per node group and rack, and a GPU and Ceph summary.",
    )
    source = status.add_mutually_exclusive_group(required=True)
    source.add_argument("--url", metavar="URL", help="Prometheus, e.g. http://127.0.0.1:9090")
    source.add_argument("--from-json", type=Path, metavar="FILE", help="answers saved earlier")
    status.add_argument("-o", "--output", type=Path, metavar="HTML", help="write the page here")
    status.add_argument(
        "--save-json", type=Path, metavar="FILE", help="also keep the answers (with --url)"
    )
    status.add_argument(
        "--dashboard",
        type=Path,
        metavar="JSON",
        help="instead, one rendered dashboard's panels (dashboards/*.json of monitoring render)",
    )
    status.add_argument("--node", metavar="NAME", help="the node of the per-node dashboard")
    status.set_defaults(func=status_command)


def render_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import expand_validation
    from cluster_plan.monitoring.render import render, write
    from cluster_plan.plan.validate import validate_file

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
    written = write(files, args.output, str(args.plan))  # OSError, OutputError: named
    print(f"{args.output}: {len(written)} files")
    return Exit.OK


def _page(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The page and the answers it was made from."""
    from cluster_plan.cli.policy import UsageError
    from cluster_plan.monitoring import board_view
    from cluster_plan.monitoring.grafana import NODE_VARIABLE
    from cluster_plan.monitoring.status import fetch_answers, fetch_queries, status_html
    from cluster_plan.plan.input_files import read_json

    if args.dashboard is None:
        if args.url is not None:
            answers = fetch_answers(args.url)
        else:
            answers = read_json(args.from_json, MAX_ANSWERS, "Prometheus API answers")
        return status_html(answers), answers
    board = read_json(args.dashboard, MAX_ANSWERS, "a dashboard's JSON")
    if args.node is None and any(NODE_VARIABLE in q for q in board_view.queries(board, None)):
        raise UsageError(f"{args.dashboard}: a per-node dashboard: name the node with --node")
    if args.url is not None:
        now = time.time()
        asked = board_view.queries(board, args.node)
        answers = {"source": args.url, "time": now, "panels": fetch_queries(args.url, asked, now)}
    else:
        answers = read_json(args.from_json, MAX_ANSWERS, "Prometheus API answers")
    at = datetime.fromtimestamp(float(answers["time"]), UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return board_view.board_html(board, answers["panels"], args.node, at), answers


def _is_answers(data: Any) -> bool:
    return isinstance(data, dict) and {"source", "time"} <= data.keys()


def status_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.cli.policy import UsageError
    from cluster_plan.monitoring.status import STATUS_MARK, AnswerError
    from cluster_plan.output_files import (
        check_output,
        finite_json,
        json_document,
        marked,
        write_output,
    )
    from cluster_plan.plan.input_files import InputError

    # replace only a page (or saved answers) of an earlier run, or an earlier version's page
    own_page = marked(STATUS_MARK, "<title>Cluster status</title>")
    own_answers = json_document(_is_answers)
    for path, own in ((args.output, own_page), (args.save_json, own_answers)):
        if path is not None:
            check_output(path, own, "monitoring status")
    where = args.url or str(args.from_json)
    try:
        page, answers = _page(args)
    except InputError:  # the policy names the file
        raise
    except (AnswerError, urllib.error.URLError, json.JSONDecodeError) as exc:
        raise UsageError(f"{where}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a document of another shape
        raise UsageError(f"{where}: not Prometheus API answers ({exc!r})") from None
    if args.save_json is not None:
        text = finite_json(answers, str(args.save_json), indent=1) + "\n"
        write_output(args.save_json, text, own_answers, "monitoring status")
    if args.output is None:
        sys.stdout.write(page)
    else:
        write_output(args.output, page, own_page, "monitoring status")
        print(f"{args.output}: status page")
    return Exit.OK
