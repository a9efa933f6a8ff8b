"""The plan subcommands: validate, lock, expand, diff, graph, audit, capacity.

Each handler returns an exit status or raises (cluster_plan.cli.policy maps what it raises);
what it prints goes through the reporter that `--format` chose.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from cluster_plan.cli.policy import CheckFailed, Exit, Refused, UsageError, exit_for
from cluster_plan.cli.reporters import FileReport
from cluster_plan.plan.findings import Finding, PlanError, errors
from cluster_plan.plan.lockfile import lock_path_for
from cluster_plan.plan.validate import validate_file


def _strict(findings: list[Finding]) -> list[Finding]:
    return [dataclasses.replace(f, severity="error") for f in findings]


def cmd_validate(args: argparse.Namespace) -> Exit:
    reports = []
    for path in args.plans:
        result = validate_file(path, check_lock=not args.no_lock)
        findings = _strict(result.findings) if args.strict else result.findings
        reports.append(
            FileReport(result.doc.file, findings, result.doc.source_lines, len(result.nodes))
        )
    args.reporter.files(reports)
    return max((exit_for(r.findings) for r in reports), default=Exit.OK)


def cmd_lock(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import lock_plan

    path = lock_path_for(args.plan)
    outcome = lock_plan(
        args.plan, reclaim=args.reclaim, allow_moves=args.allow_moves, write=not args.check
    )
    hosts = {h for net in outcome.lock["networks"].values() for h in net["hosts"]}
    if args.check:
        if outcome.out_of_date:
            raise CheckFailed(f"{path}: out of date; run `cluster-plan lock {args.plan}`")
        verb = "up to date"
    else:
        verb = "wrote" if outcome.changed else "unchanged"
    data = {
        "lock": str(path),
        "status": verb,
        "hosts": len(hosts),
        "networks": len(outcome.lock["networks"]),
        "moves": outcome.moves,
    }

    def text() -> str:
        lines = [f"{path}: {verb} ({len(hosts)} hosts on {len(outcome.lock['networks'])} networks)"]
        lines += [f"  moved {move}" for move in outcome.moves]
        return "\n".join(lines)

    args.reporter.result(data, text)
    validation = outcome.validation
    args.reporter.warnings(validation.findings, validation.doc.file, validation.doc.source_lines)
    return Exit.OK


def cmd_expand(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import load_expanded

    expanded = load_expanded(args.plan)
    if args.host and args.host not in expanded["hosts"]:
        raise UsageError(f"{args.plan}: no host {args.host!r} in the plan")
    data = expanded["hosts"][args.host] if args.host else expanded
    args.reporter.result(data, lambda: "")
    return Exit.OK


def cmd_diff(args: argparse.Namespace) -> Exit:
    from cluster_plan.views.diff import diff_files, render_changes

    changes = diff_files(args.old, args.new)
    args.reporter.result([c.as_dict() for c in changes], lambda: render_changes(changes))
    destructive = [c for c in changes if c.destructive]
    if destructive and not args.allow_destructive:
        raise Refused(
            f"{len(destructive)} destructive change(s); pass --allow-destructive to accept them"
        )
    return Exit.OK


def cmd_graph(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import expand_validation
    from cluster_plan.output_files import marked, write_output
    from cluster_plan.views.capacity import capacity_model
    from cluster_plan.views.graph import GRAPH_MARK, render_svg

    result = validate_file(args.plan)
    expanded = expand_validation(result)
    racks = capacity_model(result.plan, result.nodes)["racks"]
    svg = render_svg(expanded, {r["rack"]: r for r in racks})
    if args.output:
        own = marked(GRAPH_MARK, ": network topology</title>")  # or an earlier version's
        write_output(Path(args.output), svg, own, "graph")
        args.reporter.note(f"wrote {args.output}")
    else:
        args.reporter.result(svg, lambda: svg.rstrip("\n"))
    return Exit.OK


def cmd_audit(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import load_expanded
    from cluster_plan.views.audit import audit, render_audit

    report = audit(load_expanded(args.plan))
    args.reporter.result(report, lambda: render_audit(report))
    return Exit.FAILED if report["problems"] else Exit.OK


def cmd_capacity(args: argparse.Namespace) -> Exit:
    from cluster_plan.output_files import marked, write_output
    from cluster_plan.views.capacity import capacity_model
    from cluster_plan.views.capacity_report import CAPACITY_MARK, render_html, render_text

    # No lock needed: the figures need nodes and racks, not addresses (a lock, when there is
    # one, still says where each host stands).
    result = validate_file(args.plan, check_lock=False)
    if not result.ok:
        raise PlanError(errors(result.findings), result.doc.source_lines)
    model = capacity_model(result.plan, result.nodes, result.findings)
    if args.html:
        own = marked(CAPACITY_MARK, ": capacity</title>")  # or an earlier version's page
        write_output(Path(args.html), render_html(model), own, "capacity")
        args.reporter.note(f"wrote {args.html}")
    args.reporter.result(model, lambda: render_text(model))
    args.reporter.warnings(result.findings, result.doc.file, result.doc.source_lines)
    return Exit.OK


def _add_format(parser: argparse.ArgumentParser, *choices: str) -> None:
    parser.add_argument(
        "--format", choices=choices, default=choices[0], help="output format (default: %(default)s)"
    )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "validate", help="check plans against the schema, the semantic rules and their locks"
    )
    p.add_argument("plans", nargs="+", metavar="PLAN")
    p.add_argument("--no-lock", action="store_true", help="do not check the lock file")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    _add_format(p, "text", "json")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("lock", help="allocate addresses and racks; write PLAN's lock file")
    p.add_argument("plan", metavar="PLAN")
    p.add_argument(
        "--reclaim",
        action="store_true",
        help="let new hosts reuse addresses freed by removed hosts",
    )
    p.add_argument(
        "--allow-moves",
        action="store_true",
        help="let hosts change address or rack where the plan leaves them no other choice "
        "(a gateway or reserved range over a locked address, a new CIDR, a rack taken out of "
        "a group); every move is listed",
    )
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when the lock is out of date"
    )
    _add_format(p, "text", "json")
    p.set_defaults(func=cmd_lock)

    p = sub.add_parser("expand", help="print the expanded cluster")
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("--host", help="only this host")
    _add_format(p, "yaml", "json")
    p.set_defaults(func=cmd_expand)

    p = sub.add_parser("diff", help="changes between two plans and their impact")
    p.add_argument("old", metavar="OLD")
    p.add_argument("new", metavar="NEW")
    p.add_argument(
        "--allow-destructive",
        action="store_true",
        help="exit 0 even when a change reinstalls, moves or renumbers hosts",
    )
    _add_format(p, "text", "json")
    p.set_defaults(func=cmd_diff)

    p = sub.add_parser("graph", help="an SVG picture of the topology")
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("-o", "--output", help="write the SVG here (default: standard output)")
    p.set_defaults(func=cmd_graph)

    p = sub.add_parser(
        "capacity",
        help="GPUs, memory, throughput and power per pool; draw against budgets per rack; "
        "team shares",
    )
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("--html", metavar="OUT", help="also write the report as an HTML page here")
    _add_format(p, "text", "json")
    p.set_defaults(func=cmd_capacity)

    p = sub.add_parser("audit", help="capacity, address use and oversubscription of a plan")
    p.add_argument("plan", metavar="PLAN")
    _add_format(p, "text", "json")
    p.set_defaults(func=cmd_audit)
