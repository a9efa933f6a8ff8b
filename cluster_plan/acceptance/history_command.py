"""The history's side of `cluster-plan acceptance` and `cluster-plan report`: the options, the
recording of each run, `acceptance history PLAN` and `report --compare`."""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from cluster_plan.acceptance.compare import DEFAULT_TOLERANCE, render_text, tolerance_from_plan
from cluster_plan.acceptance.history import History, HistoryError, Run, file_hash
from cluster_plan.acceptance.tracking import AUTO, attach, comparison_section, history_path
from cluster_plan.cli.policy import Exit, UsageError
from cluster_plan.plan.contract import ExpandedPlan

COMPARE_HELP = "a run id, last-passed or baseline"


def add_run_options(run: argparse.ArgumentParser) -> None:
    """`acceptance run PLAN`: where the run is recorded and what it is compared with."""
    run.add_argument(
        "--history",
        type=Path,
        help="the history database (default: the plan's acceptance.history.database, else "
        "history.sqlite in the output folder)",
    )
    run.add_argument("--no-history", action="store_true", help="record nothing, compare nothing")
    run.add_argument(
        "--compare",
        default=AUTO,
        help=f"compare with this run: {COMPARE_HELP} (default: the baseline when one is "
        "marked, else the last passed run)",
    )
    # what goes with `acceptance history`: refused in words that say so (check_run_arguments)
    run.add_argument("misplaced", nargs="*", help=argparse.SUPPRESS)
    run.add_argument("--mark-baseline", type=int, help=argparse.SUPPRESS)


def check_run_arguments(args: argparse.Namespace) -> None:
    """A second plan, or a history option, given to a run: a usage error with the hint."""
    if args.misplaced:
        words = " ".join(map(str, args.misplaced))
        raise UsageError(f"unexpected argument {words} (acceptance history PLAN?)")
    if args.mark_baseline is not None:
        raise UsageError("--mark-baseline goes with `cluster-plan acceptance history PLAN`")


def add_history_options(listing: argparse.ArgumentParser) -> None:
    """`acceptance history PLAN`."""
    listing.add_argument(
        "--history",
        type=Path,
        help="the history database (default: the plan's acceptance.history.database, else "
        "history.sqlite in the output folder)",
    )
    listing.add_argument("--mark-baseline", metavar="RUN", type=int, help="make RUN the baseline")
    listing.add_argument("--limit", type=int, default=20, help="newest runs shown (default 20)")


def add_report_options(report: argparse.ArgumentParser) -> None:
    report.add_argument("--compare", metavar="RUN", help=f"compare with a run: {COMPARE_HELP}")
    report.add_argument(
        "--history", type=Path, help="the history database (default: the one the report names)"
    )


def _hashes(args: argparse.Namespace) -> tuple[str, str | None]:
    """(the plan's hash, its lock's): the files' SHA-256, or the expanded JSON's alone."""
    from cluster_plan.plan.lockfile import lock_path_for

    if args.expanded:
        return file_hash(args.expanded) or "", None
    digest = file_hash(args.plan)
    return digest or hashlib.sha256(str(args.plan).encode()).hexdigest(), file_hash(
        lock_path_for(args.plan)
    )


def open_for_run(args: argparse.Namespace, expanded: ExpandedPlan, out_dir: Path) -> History | None:
    """The history this run is recorded in, opened (created if new) before anything is
    measured, so a foreign or unreadable database stops the run at once."""
    if args.no_history:
        return None
    if args.compare not in (AUTO, "baseline", "last-passed") and not args.compare.isdigit():
        raise UsageError(f"--compare {args.compare!r}: {COMPARE_HELP}")
    path = args.history or history_path(expanded["acceptance"], args.plan, out_dir)
    history = History(path, create=True)
    if args.compare.isdigit():  # a run that is not there stops the run before it measures
        try:
            history.resolve(args.compare, str(expanded["cluster"]["name"]))
        except HistoryError:
            history.db.close()
            raise
    return history


def record_run(
    history: History | None,
    args: argparse.Namespace,
    report: MutableMapping[str, Any],
    expanded: ExpandedPlan,
    json_path: Path,
) -> HistoryError | None:
    """Record the run, then compare it (the comparison and degraded findings go in the
    report); the error, if the history failed, for the caller to raise once the report is
    written."""
    if history is None:
        return None
    try:
        with history:
            _record(history, args, report, expanded, json_path)
    except HistoryError as exc:
        return exc
    return None


def _record(
    history: History,
    args: argparse.Namespace,
    report: MutableMapping[str, Any],
    expanded: ExpandedPlan,
    json_path: Path,
) -> None:
    plan_hash, lock_hash = _hashes(args)
    tolerance = tolerance_from_plan(expanded["acceptance"])
    run_id = history.record(report, plan_hash, lock_hash, json_path.resolve())
    report["history"] = {"database": str(history.path.resolve()), "run": run_id,
                         "tolerance": tolerance}  # fmt: skip
    comparison = comparison_section(
        history, report, args.compare, tolerance, (plan_hash, lock_hash), run_id
    )
    attach(report, comparison)


def compare_report(args: argparse.Namespace, report: MutableMapping[str, Any]) -> None:
    """`report --compare`: the report against the chosen run of its history."""
    recorded = report.get("history") or {}
    path = args.history or (Path(recorded["database"]) if recorded.get("database") else None)
    if path is None:
        raise UsageError(f"{args.results}: the report names no history; give --history")
    tolerance = recorded.get("tolerance") or DEFAULT_TOLERANCE
    with History(path) as history:
        comparison = comparison_section(
            history, report, args.compare, tolerance, this_run=recorded.get("run")
        )
    attach(report, comparison)


def _run_line(run: Run) -> str:
    mark = " baseline" if run.baseline else ""
    return (
        f"  {run.id:>5}  {run.generated_at:25}  {'passed' if run.passed else 'FAILED':6}  "
        f"{run.faults:>3} faults  plan {run.plan_hash[:12]}  lock {(run.lock_hash or '-')[:12]}"
        f"{mark}"
    )


def history_command(args: argparse.Namespace, expanded: ExpandedPlan) -> Exit:
    """`acceptance history PLAN [--mark-baseline RUN]`: the cluster's runs, newest first."""
    cluster = str(expanded["cluster"]["name"])
    out_dir = args.output_dir or Path("reports") / cluster
    path = args.history or history_path(expanded["acceptance"], args.plan, out_dir)
    with History(path) as history:
        if args.mark_baseline is not None:
            chosen = history.run(args.mark_baseline)
            if chosen.cluster != cluster:
                raise HistoryError(f"{path}: run {chosen.id} is of cluster {chosen.cluster}, "
                                   f"not {cluster}")  # fmt: skip
            history.mark_baseline(chosen.id)
            args.reporter.note(f"run {chosen.id} is now the baseline of {cluster}")
        runs = history.runs(cluster, args.limit)
    data = {"database": str(path), "cluster": cluster, "runs": [r.as_dict() for r in runs]}
    args.reporter.result(
        data,
        lambda: "\n".join(
            [f"{cluster}: {len(runs)} run(s) in {path}, newest first", *map(_run_line, runs)]
        ),
    )
    return Exit.OK


def comparison_text(report: MutableMapping[str, Any], every_figure: bool) -> str:
    comparison = report.get("comparison")
    return render_text(comparison, every_figure) if comparison else ""
