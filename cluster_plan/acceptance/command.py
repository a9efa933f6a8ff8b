"""`cluster-plan report` and `cluster-plan acceptance run|history`: thin shells over the
package.

0 the cluster passed, 1 it failed (every fault printed); errors are raised and mapped by
cluster_plan.cli.policy (2 unreadable input or a usage error). No traceback for a user's
mistake.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

from cluster_plan.acceptance import history_command as history
from cluster_plan.acceptance.freshness import FORCE_HINT, Decision, decide, inputs_fingerprint
from cluster_plan.acceptance.html import render_html
from cluster_plan.acceptance.report import (
    ReportError,
    check_report_paths,
    judge_report,
    load_report,
    own_html,
    write_report,
)
from cluster_plan.acceptance.runner import PHASES, AcceptanceRunner, RunOptions
from cluster_plan.acceptance.spec import spec_from_expanded
from cluster_plan.cli.envelope import EnvelopeError, unwrapped
from cluster_plan.cli.policy import Exit, UsageError
from cluster_plan.output_files import check_output, write_output
from cluster_plan.plan.contract import ExpandedPlan, conformance_errors
from cluster_plan.plan.input_files import read_json
from cluster_plan.transport.options import add_transport_options, executor_for

MAX_EXPANDED_BYTES = 1024 * 1024 * 1024  # a 20,000-host expansion is some hundred MB


def register(subparsers: Any) -> None:
    """Add `report` and `acceptance` to the CLI's subparsers (argparse `add_subparsers()`)."""
    report = subparsers.add_parser(
        "report",
        help="render an acceptance report (JSON) as HTML",
        description="Validate an acceptance report against its schema and write it as HTML. "
        "Exit 1 when the cluster failed, 2 when the file cannot be read.",
    )
    report.add_argument("results", type=Path, help="acceptance.json written by `acceptance`")
    report.add_argument("--output", type=Path, help="HTML file (default: beside RESULTS)")
    report.add_argument("--format", choices=["text", "json"], default="text")
    history.add_report_options(report)
    report.set_defaults(func=report_command)

    acceptance = subparsers.add_parser(
        "acceptance",
        help="run network acceptance tests on the cluster and judge them against the plan",
        description="`acceptance run PLAN` (or `acceptance PLAN`) measures and judges the "
        "cluster; `acceptance history PLAN` lists the recorded runs.",
    )
    actions = acceptance.add_subparsers(
        dest="acceptance_command", required=True, metavar="ACTION", action=_RunByDefault
    )
    run = actions.add_parser(
        "run",
        help="measure the cluster and judge it against the plan (the default action)",
        description="Bandwidth (iperf3), latency, loss and MTU (fping) between every pair of "
        "nodes; writes reports/<cluster>/acceptance.json and .html, records the run in the "
        "history and compares it with an earlier one. `acceptance history PLAN` lists the "
        "recorded runs.",
    )
    run.add_argument("plan", type=Path, help="the cluster plan (YAML)")
    history.add_run_options(run)
    _add_expanded(run)
    add_transport_options(run)
    run.add_argument("--nodes", help="comma-separated hosts to test (default: all)")
    run.add_argument("--duration", type=float, help="seconds per iperf3 test (default: plan)")
    run.add_argument("--omit", type=int, default=1, help="warm-up seconds left out (default 1)")
    run.add_argument("--probes", type=int, help="fping probes per pair (default: from the plan)")
    run.add_argument("--phases", default=",".join(PHASES), help="subset of " + ",".join(PHASES))
    run.add_argument("--no-retest", action="store_true", help="do not retest suspects alone")
    run.add_argument("--sequential", action="store_true", help="one pair at a time (baseline)")
    _add_output_dir(run)
    run.add_argument(
        "--when",
        choices=["always", "changed"],
        default="always",
        help="changed: skip the run when the last report in --output-dir passed, tested exactly "
        "what would be tested now, no host in --changed-hosts, and is younger than --max-age-days",
    )
    run.add_argument(
        "--changed-hosts",
        default="",
        help="comma-separated hosts whose network setup changed (site.yml passes them)",
    )
    run.add_argument(
        "--max-age-days", type=float, default=7.0, help="with --when changed (default 7)"
    )
    run.add_argument("--format", choices=["text", "json"], default="text")
    run.set_defaults(func=acceptance_command)

    listing = actions.add_parser(
        "history",
        help="the cluster's recorded acceptance runs, newest first",
        description="The runs recorded in the cluster's acceptance history, newest first; "
        "--mark-baseline makes one the run later runs are compared with.",
    )
    listing.add_argument("plan", type=Path, help="the cluster plan (YAML)")
    history.add_history_options(listing)
    _add_expanded(listing)
    _add_output_dir(listing)
    listing.add_argument("--format", choices=["text", "json"], default="text")
    listing.set_defaults(func=history_command)


class _ActionsOrPlan(Mapping[str, argparse.ArgumentParser]):
    """`acceptance`'s actions by name, as argparse checks the first word against them before
    the action sees it: any word passes, as one that names no action is `run`'s PLAN."""

    def __init__(self, actions: dict[str, argparse.ArgumentParser]) -> None:
        self._actions = actions

    def __getitem__(self, name: str) -> argparse.ArgumentParser:
        return self._actions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._actions)

    def __len__(self) -> int:
        return len(self._actions)

    def __contains__(self, word: object) -> bool:
        return True


class _RunByDefault(argparse._SubParsersAction):
    """`acceptance PLAN ...`, as the command was first spelt, is `acceptance run PLAN ...`;
    the command's name stays `acceptance` then (the JSON envelope's `command`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.choices = _ActionsOrPlan(self._name_parser_map)  # type: ignore[assignment]

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if values and self._name_parser_map.get(values[0]) is None:
            super().__call__(parser, namespace, ["run", *values], option_string)
            setattr(namespace, self.dest, None)
            return
        super().__call__(parser, namespace, values, option_string)


def _add_expanded(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--expanded", type=Path, help="read the expanded plan from this JSON file instead"
    )


def _add_output_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--output-dir", type=Path, help="default: reports/<cluster name>")


def _summary(report: dict[str, Any]) -> str:
    lines = [f"{report['cluster']}: {'PASSED' if report['passed'] else 'FAILED'}"]
    for f in report["findings"]:
        where = f["node"] or " <-> ".join(f["pairs"][0])
        cause = f" (explained by {f['explained_by']})" if f["explained_by"] else ""
        lines.append(f"  {f['severity']:7} {f['kind']:17} {where:20} {f['message']}{cause}")
    storage = report.get("storage")
    if storage:
        write, read = storage["bench"]["write"], storage["bench"]["read"]
        lines.append(
            f"  storage {'passed' if storage['passed'] else 'FAILED'}: {storage['health']}, "
            f"{storage['osds']['up']}/{storage['osds']['planned']} OSDs up, "
            f"{storage['pgs']['active_clean']}/{storage['pgs']['total']} PGs active+clean, "
            f"rados bench write {write['mb_s']} MB/s, read {read['mb_s']} MB/s"
        )
        lines += [f"  fault   storage           {p}" for p in storage["problems"]]
    lines += _collectives_summary(report.get("collectives"))
    return "\n".join(lines)


def _collectives_summary(section: dict[str, Any] | None) -> list[str]:
    if not section:
        return []
    lines = []
    for pool in section["pools"]:
        busbw = "n/a" if pool["busbw_GBps"] is None else f"{pool['busbw_GBps']:g} GB/s"
        lines.append(
            f"  collectives {'passed' if pool['passed'] else 'FAILED'}: pool {pool['pool']}, "
            f"{pool['backend']} all-reduce on {pool['ranks']} ranks, bus bandwidth {busbw} "
            f"(floor {pool['floor_GBps']:g})"
        )
    for job in section["training"]:
        lines.append(
            f"  training {'passed' if job['passed'] else 'FAILED'}: pool {job['pool']}, job "
            f"{job['job']}, loss {job['first_loss']} -> {job['last_loss']} in {job['steps']} "
            f"steps, weights {'identical' if job['identical_weights'] else 'DIFFERENT'} on "
            f"{job['ranks']} ranks"
        )
    lines += [
        f"  skipped collectives on pool {s['pool']}: {s['reason']}" for s in section["skipped"]
    ]
    lines += [f"  fault   collectives       {p}" for p in section["problems"]]
    return lines


def _html_output(results: Path, output: Path | None) -> Path:
    """Where the HTML goes; never over the report it is made from (`x.html` as RESULTS)."""
    chosen = output or results.with_suffix(".html")
    if chosen.resolve() == results.resolve() or (
        chosen.exists() and os.path.samefile(chosen, results)
    ):
        raise UsageError(
            f"{chosen}: is the report itself; pass --output with another file for the HTML"
        )
    return chosen


def report_command(args: argparse.Namespace) -> Exit:
    try:
        report = load_report(args.results)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    output = _html_output(args.results, args.output)
    judged = judge_report(report)
    if judged != report["passed"]:
        args.reporter.note(
            f"{args.results}: the file says passed={str(report['passed']).lower()}, but its "
            f"findings say {'PASSED' if judged else 'FAILED'}; judged by the findings"
        )
        report = {**report, "passed": judged}
    check_output(output, own_html(), "report")
    if args.compare:
        history.compare_report(args, report)
    write_output(output, render_html(report), own_html(), "report")
    summary = {"passed": judged, "html": str(output),
               "nodes_at_fault": report["nodes_at_fault"]}  # fmt: skip
    if args.compare:
        summary |= {"findings": report["findings"], "comparison": report["comparison"]}
    compared = history.comparison_text(report, every_figure=True) if args.compare else ""
    args.reporter.result(
        summary,
        lambda: "\n".join(filter(None, [_summary(report), compared, f"wrote {output}"])),
        report["findings"],
    )
    return Exit.OK if judged else Exit.FAILED


def _load_expanded(args: argparse.Namespace) -> ExpandedPlan:
    if args.expanded:
        try:  # `expand --format json` output, or the expanded plan alone
            data = unwrapped(
                read_json(args.expanded, MAX_EXPANDED_BYTES, "an expanded plan (JSON)"), "expand"
            )
        except EnvelopeError as exc:
            raise UsageError(f"{args.expanded}: not an expanded plan: {exc}") from None
        if not isinstance(data, dict):
            raise UsageError(f"{args.expanded}: not an expanded plan (a JSON object)")
        problems = conformance_errors(data, ExpandedPlan)
        if problems:
            raise UsageError(
                f"{args.expanded}: not an expanded plan of this version: {'; '.join(problems[:3])}"
            )
        return cast(ExpandedPlan, data)
    from cluster_plan.api import load_expanded

    return load_expanded(str(args.plan))  # PlanError: the CLI prints every finding


def _freshness(args: argparse.Namespace, last: Path, inputs: str) -> Decision:
    """Decide from the last report; an unreadable one is a reason to run, never an error."""
    try:
        previous: dict[str, Any] | None = load_report(last) if last.exists() else None
    except ReportError:
        previous = None
    changed = [h for h in args.changed_hosts.split(",") if h]
    return decide(
        previous,
        inputs,
        now=dt.datetime.now(dt.UTC),
        max_age=dt.timedelta(days=args.max_age_days),
        changed_hosts=changed,
    )


def history_command(args: argparse.Namespace) -> Exit:
    """`acceptance history PLAN [--mark-baseline RUN]`."""
    return history.history_command(args, _load_expanded(args))


def acceptance_command(args: argparse.Namespace) -> Exit:
    """`acceptance run PLAN` (or `acceptance PLAN`)."""
    history.check_run_arguments(args)
    phases = tuple(p for p in args.phases.split(",") if p)
    if unknown := sorted(set(phases) - set(PHASES)):
        raise UsageError(f"unknown phase {', '.join(unknown)}")
    expanded = _load_expanded(args)
    nodes = args.nodes.split(",") if args.nodes else None
    spec = spec_from_expanded(expanded, nodes=nodes, duration_s=args.duration)
    addresses = {n: str(h.get("address", n)) for n, h in (expanded.get("hosts") or {}).items()}
    options = RunOptions(
        omit_s=args.omit, probes=args.probes, phases=phases, retest=not args.no_retest,
        sequential=args.sequential, node_programs=args.transport != "lab-netns",
    )  # fmt: skip
    out_dir = args.output_dir or Path("reports") / spec.cluster
    inputs = inputs_fingerprint(spec, phases)
    if args.when == "changed":
        decision = _freshness(args, out_dir / "acceptance.json", inputs)
        if not decision.run:
            skipped = {"skipped": True, "reason": decision.reason, "report": str(out_dir),
                       "force": FORCE_HINT}  # fmt: skip
            args.reporter.result(
                skipped, lambda: f"{spec.cluster}: acceptance skipped, {decision.reason} "
                f"(last report in {out_dir}); {FORCE_HINT}",
            )  # fmt: skip
            return Exit.OK
        args.reporter.note(f"{spec.cluster}: acceptance runs: {decision.reason}")
    check_report_paths(out_dir)  # a foreign acceptance.json stops the run before it measures
    with tempfile.TemporaryDirectory(prefix="cluster-plan-acceptance-") as control_dir:
        executor = executor_for(args, expanded, addresses, Path(control_dir))
        tracker = history.open_for_run(args, expanded, out_dir)  # before anything is measured
        report = AcceptanceRunner(spec, executor, options).run()
    report["inputs"] = inputs
    failure = history.record_run(tracker, args, report, expanded, out_dir / "acceptance.json")
    json_path, html_path = write_report(report, out_dir)
    if failure is not None:  # the report is written: the measurements are kept even so
        raise failure
    compared = history.comparison_text(report, every_figure=False)
    args.reporter.result(
        report, lambda: "\n".join(filter(None, [_summary(report), compared,
                                                f"wrote {json_path} and {html_path}"])),
        report["findings"],
    )  # fmt: skip
    return Exit.OK if report["passed"] else Exit.FAILED
