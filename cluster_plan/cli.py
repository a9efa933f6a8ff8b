"""`cluster-plan`: the command line. Exit 0 ok, 1 a check failed, 2 usage or unreadable input."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from cluster_plan.findings import Finding, PlanError, errors, warnings
from cluster_plan.validate import Validation, validate_file

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
_INPUT_CODES = {"file-not-found", "not-a-file", "unreadable", "not-text", "plan-too-large"}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # usage errors exit 2, as argparse does, with a hint
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _print_findings(result: Validation, fmt: str, *, verbose: bool = True) -> None:
    shown = [f for f in result.findings if f.suppressed_by is None]
    if fmt == "json":
        return
    for finding in shown:
        print(finding.render(result.doc.source_lines), file=sys.stderr)
    suppressed = len(result.findings) - len(shown)
    if verbose:
        status = "ok" if result.ok else "FAILED"
        note = f", {suppressed} suppressed" if suppressed else ""
        print(
            f"{result.doc.file}: {status}: {len(errors(shown))} error(s), "
            f"{len(warnings(shown))} warning(s){note}",
            file=sys.stderr,
        )


def _exit_for(findings: Sequence[Finding]) -> int:
    errs = errors(findings)
    if not errs:
        return EXIT_OK
    return EXIT_USAGE if all(f.code in _INPUT_CODES for f in errs) else EXIT_FAILED


def cmd_validate(args: argparse.Namespace) -> int:
    results = [validate_file(path, check_lock=not args.no_lock) for path in args.plans]
    worst = EXIT_OK
    for result in results:
        findings = result.findings
        if args.strict:
            findings = [
                Finding(
                    f.code,
                    f.message,
                    f.path,
                    "error",
                    f.hint,
                    f.file,
                    f.line,
                    f.column,
                    f.suppressed_by,
                )
                for f in findings
            ]
            result.findings = findings
        _print_findings(result, args.format)
        worst = max(worst, _exit_for(findings))
    if args.format == "json":
        json.dump(
            [
                {
                    "file": r.doc.file,
                    "ok": r.ok,
                    "nodes": len(r.nodes),
                    "findings": [f.as_dict() for f in r.findings],
                }
                for r in results
            ],
            sys.stdout,
            indent=2,
        )
        print()
    return worst


def _plan_error(exc: PlanError) -> int:
    print(exc.render(), file=sys.stderr)
    return _exit_for(exc.findings)


def cmd_lock(args: argparse.Namespace) -> int:
    from cluster_plan.api import lock_plan
    from cluster_plan.lockfile import lock_path_for

    path = lock_path_for(args.plan)
    try:
        result, previous, fresh = lock_plan(args.plan, reclaim=args.reclaim, write=not args.check)
    except PlanError as exc:
        return _plan_error(exc)
    except OSError as exc:  # the lock cannot be written: a read-only checkout, a full disk
        print(f"{path}: cannot write the lock file: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    changed = previous != fresh
    hosts = {h for net in fresh["networks"].values() for h in net["hosts"]}
    if args.check:
        if changed:
            print(f"{path}: out of date; run `cluster-plan lock {args.plan}`", file=sys.stderr)
            return EXIT_FAILED
        print(f"{path}: up to date ({len(hosts)} hosts)")
        return EXIT_OK
    verb = "wrote" if changed else "unchanged"
    print(f"{path}: {verb} ({len(hosts)} hosts on {len(fresh['networks'])} networks)")
    for warning in warnings(result.findings):
        print(warning.render(result.doc.source_lines), file=sys.stderr)
    return EXIT_OK


class _PlainDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Hosts share data (a profile's disks, a switch's path); print it in full each time
    rather than as &id001 anchors and *id001 aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def cmd_expand(args: argparse.Namespace) -> int:
    from cluster_plan.api import load_expanded

    try:
        expanded = load_expanded(args.plan)
    except PlanError as exc:
        return _plan_error(exc)
    data: Any = expanded
    if args.host:
        if args.host not in expanded["hosts"]:
            print(f"{args.plan}: no host {args.host!r} in the plan", file=sys.stderr)
            return EXIT_USAGE
        data = expanded["hosts"][args.host]
    if args.format == "json":
        json.dump(data, sys.stdout, indent=2)
        print()
    else:
        yaml.dump(
            data,
            sys.stdout,
            Dumper=_PlainDumper,
            sort_keys=False,
            default_flow_style=False,
            width=100,
        )
    return EXIT_OK


def cmd_diff(args: argparse.Namespace) -> int:
    from cluster_plan.diff import diff_files, render_changes

    try:
        changes = diff_files(args.old, args.new)
    except PlanError as exc:
        return _plan_error(exc)
    destructive = [c for c in changes if c.destructive]
    if args.format == "json":
        json.dump([c.as_dict() for c in changes], sys.stdout, indent=2)
        print()
    else:
        print(render_changes(changes))
    if destructive and not args.allow_destructive:
        print(
            f"{len(destructive)} destructive change(s); pass --allow-destructive to accept them",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK


def cmd_graph(args: argparse.Namespace) -> int:
    from cluster_plan.api import load_expanded
    from cluster_plan.graph import render_svg

    try:
        expanded = load_expanded(args.plan)
    except PlanError as exc:
        return _plan_error(exc)
    svg = render_svg(expanded)
    if args.output:
        Path(args.output).write_text(svg)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(svg)
    return EXIT_OK


def cmd_audit(args: argparse.Namespace) -> int:
    from cluster_plan.api import load_expanded
    from cluster_plan.audit import audit, render_audit

    try:
        expanded = load_expanded(args.plan)
    except PlanError as exc:
        return _plan_error(exc)
    report = audit(expanded)
    if args.format == "json":
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print(render_audit(report))
    return EXIT_FAILED if report["problems"] else EXIT_OK


def _add_format(parser: argparse.ArgumentParser, *choices: str) -> None:
    parser.add_argument(
        "--format", choices=choices, default=choices[0], help="output format (default: %(default)s)"
    )


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cluster-plan",
        description="Describe a GPU cluster once; validate, "
        "allocate, expand, provision and verify it.",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=_Parser
    )
    p = sub.add_parser(
        "validate", help="check plans against the schema, the semantic rules and their lock files"
    )
    p.add_argument("plans", nargs="+", metavar="PLAN")
    p.add_argument("--no-lock", action="store_true", help="do not check the lock file")
    p.add_argument("--strict", action="store_true", help="treat warnings as errors")
    _add_format(p, "text", "json")
    p.set_defaults(func=cmd_validate)
    p = sub.add_parser("lock", help="allocate addresses and write PLAN's lock file")
    p.add_argument("plan", metavar="PLAN")
    p.add_argument(
        "--reclaim",
        action="store_true",
        help="let new hosts reuse addresses freed by removed hosts",
    )
    p.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 when the lock is out of date"
    )
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
        help="exit 0 even when a change reinstalls or renumbers hosts",
    )
    _add_format(p, "text", "json")
    p.set_defaults(func=cmd_diff)
    p = sub.add_parser("graph", help="an SVG picture of the topology")
    p.add_argument("plan", metavar="PLAN")
    p.add_argument("-o", "--output", help="write the SVG here (default: standard output)")
    p.set_defaults(func=cmd_graph)
    p = sub.add_parser("audit", help="capacity, address use and oversubscription of a plan")
    p.add_argument("plan", metavar="PLAN")
    _add_format(p, "text", "json")
    p.set_defaults(func=cmd_audit)
    for command, module in (
        ("lab", "cluster_plan.lab.command"),
        ("report", "cluster_plan.acceptance.command"),
        ("k8s", "cluster_plan.kubernetes.command"),
    ):
        try:
            importlib.import_module(module).register(sub)
        except ImportError as exc:
            # The plan commands must keep working even when an optional part cannot load.
            broken = sub.add_parser(command, help=f"(unavailable: {exc})")
            broken.add_argument("rest", nargs=argparse.REMAINDER)
            broken.set_defaults(
                func=lambda _args, exc=exc, command=command: _unavailable(command, exc)
            )
    return parser


def _unavailable(command: str, exc: ImportError) -> int:
    print(f"cluster-plan {command} is unavailable: {exc}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_OK
    return code


if __name__ == "__main__":
    sys.exit(main())
