"""`cluster-plan change OLD NEW`: carry a plan change out on the running cluster.

OLD is the plan as deployed, NEW the plan as wanted (each with its lock; `cluster-plan lock
NEW` first). The operations are printed first, like `terraform plan`; they run after a yes at
the prompt, or with --yes. Exit 0 done (or nothing to do), 1 a step failed (run the same
command again: it continues at that step) or a plan fails its checks, 2 usage or an
unreadable plan, 3 refused (a change that cannot be made safely, or no confirmation).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from cluster_plan.cli.policy import Exit, Refused, UsageError
from cluster_plan.day2.change.journal import Journal, JournalError
from cluster_plan.day2.change.operations import Operation, Options, plan_operations, render
from cluster_plan.day2.change.playbooks import Playbooks, PlaybooksError, locate
from cluster_plan.day2.change.triage import ChangeRefused
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.transport.options import add_transport_options, executor_for


def register(subparsers: Any) -> None:
    """Add `change` to the CLI's subparsers."""
    change = subparsers.add_parser(
        "change",
        help="carry a plan change out on the running cluster: add, replace, upgrade, remove",
        description="Compare OLD (the plan as deployed) with NEW (as wanted, locked), print "
        "the operations that take the cluster there, then run them one step at a time: hosts "
        "added and converged, replaced (drained, re-provisioned, converged), upgraded in "
        "batches (drained, converged, health-checked, stopping at the first that fails), "
        "removed (drained of jobs and of Ceph data, then forgotten). A second run continues "
        "where the first stopped. Exit 1 when a step fails, 3 when the change is refused.",
    )
    change.add_argument("old", type=Path, help="the plan as deployed (YAML, with its lock)")
    change.add_argument("new", type=Path, help="the plan as wanted (YAML, with its lock)")
    change.add_argument(
        "--replace",
        action="append",
        default=[],
        metavar="HOST",
        help="the host has new hardware under the same name: drain it, re-provision it, "
        "converge it (repeatable)",
    )
    change.add_argument("--batch", type=int, default=1, help="hosts upgraded at a time (default 1)")
    change.add_argument(
        "--drain-timeout",
        type=int,
        default=600,
        help="seconds to wait for the jobs on a drained host (Kubernetes: for its pods' "
        "eviction) (default 600)",
    )
    change.add_argument(
        "--force",
        action="store_true",
        help="requeue the jobs still on a host being drained instead of waiting for them "
        "(Kubernetes: delete its pods, PodDisruptionBudgets not consulted)",
    )
    change.add_argument(
        "--check-timeout",
        type=int,
        default=180,
        help="seconds a host has to pass its health check after it is back (default 180)",
    )
    change.add_argument("--yes", action="store_true", help="run without asking")
    change.add_argument(
        "--dry-run", action="store_true", help="print the operations and stop (exit 0)"
    )
    change.add_argument(
        "--journal-dir",
        type=Path,
        help="where the record of a change's steps is kept (default: reports/<cluster>/changes)",
    )
    change.add_argument(
        "--playbooks",
        type=Path,
        help="the folder of the stage playbooks and their site.yml (default: this checkout's "
        "playbooks/, else those of the installed collection cluster_plan.cluster)",
    )
    change.add_argument("--format", choices=["text", "json"], default="text")
    # lab-netns runs this machine's tools: a change needs the nodes' own
    add_transport_options(change, ("ssh", "lab", "exec"))
    change.set_defaults(func=change_command)


def _options(args: argparse.Namespace, stages: tuple[str, ...] = ()) -> Options:
    if args.batch < 1:
        raise UsageError("--batch must be 1 or more")
    if args.drain_timeout < 0 or getattr(args, "check_timeout", 1) < 1:
        raise UsageError("--drain-timeout must be 0 or more, --check-timeout 1 or more")
    return Options(
        stages=stages,
        replace=tuple(args.replace),
        batch=args.batch,
        force=args.force,
        drain_timeout_s=args.drain_timeout,
    )


def _confirm(args: argparse.Namespace) -> None:
    """Refused unless --yes, or a `yes` at the prompt."""
    if args.yes:
        return
    if not sys.stdin.isatty():
        raise Refused("not run: pass --yes to run without a prompt")
    try:
        answer = input("Carry out these operations? Only 'yes' is accepted: ")
    except EOFError:
        answer = ""
    if answer.strip() != "yes":
        raise Refused("not run: not confirmed (only 'yes' is accepted)")


def _lock_problem(path: Path) -> str | None:
    """NEW must be locked as it is: its inventory is what every playbook runs from."""
    from cluster_plan.plan.validate import validate_file

    result = validate_file(path, check_lock=True)
    if result.lock is not None:
        return None
    problem = result.lock_problem or next(
        (f for f in result.findings if f.code.startswith("lock")), None
    )
    return f"{path}: {problem.message if problem else 'its lock cannot be used'}"


def _playbooks(args: argparse.Namespace) -> Playbooks:
    try:
        return locate(args.playbooks)
    except PlaybooksError as exc:
        raise UsageError(str(exc)) from None


def _refuse(args: argparse.Namespace, refused: ChangeRefused) -> Refused:
    """Each reason a finding of the result, for programs; all of them in the error."""
    reasons = refused.reasons
    document = {"operations": [], "refused": reasons, "journal": None, "carried_out": False}
    args.reporter.result(
        document,
        lambda: "\n".join(f"refused: {reason}" for reason in reasons),
        [r.as_finding() for r in refused.refusals],
    )
    return Refused(f"the change is refused ({len(reasons)} reason(s)): " + "; ".join(reasons))


def change_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.views.diff import deployed_pair, diff_expanded

    old, new = deployed_pair(args.old, args.new)  # PlanError: the CLI prints every finding
    playbooks = _playbooks(args)
    options = _options(args, playbooks.stages)
    try:
        ops = plan_operations(old, new, diff_expanded(old, new), options)
    except ChangeRefused as refused:
        raise _refuse(args, refused) from None
    folder = args.journal_dir or Path("reports") / str(new["cluster"]["name"]) / "changes"
    identity = {"old": old, "new": new, "replace": sorted(options.replace), "batch": options.batch}
    try:
        journal = Journal(folder, identity)
        finished = journal.finished_at()
    except JournalError as exc:
        raise UsageError(str(exc)) from None
    document: dict[str, Any] = {
        "operations": [op.as_dict() for op in ops],
        "journal": str(journal.path),
        "playbooks": playbooks.describe(),
        "carried_out": False,
    }
    # people see the operations before they are asked; a program reads them in the result
    log = args.reporter.progress
    if finished is not None:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(finished))
        closing = (
            f"this change was carried out to the end at {when} ({journal.finished_path}): "
            "nothing to do"
        )
        ops = []
    else:
        print(render(ops) + _progress(journal), file=log, flush=True)
        closing = "dry run: nothing was carried out" if args.dry_run else "nothing to do"
    exit = Exit.OK
    if ops and not args.dry_run:
        if problem := _lock_problem(args.new):
            raise UsageError(f"{problem}; run `cluster-plan lock {args.new}` first")
        _confirm(args)
        try:
            with journal.held():
                exit, closing = _carry_out(args, old, new, ops, journal, log, playbooks)
        except JournalError as exc:
            raise UsageError(str(exc)) from None
        document["carried_out"] = exit == Exit.OK
        document["failed"] = journal.failed
        document["seconds"] = journal.seconds()
    args.reporter.result(document, lambda: closing)
    return exit


def _progress(journal: Journal) -> str:
    if not journal.started:
        return ""
    text = (
        f"\ncontinuing an earlier run of this change ({journal.path}): "
        f"{len(journal.seconds())} step(s) done"
    )
    if journal.failed:
        text += f"\nit stopped at {journal.failed['step']}: {journal.failed['message']}"
    return text


def _carry_out(
    args: argparse.Namespace,
    old: ExpandedPlan,
    new: ExpandedPlan,
    ops: list[Operation],
    journal: Journal,
    log: Any,
    playbooks: Playbooks,
) -> tuple[Exit, str]:
    """Run the steps not done yet: the exit status and the closing line for people."""
    from cluster_plan.day2.change.runner import Context, carry_out

    addresses = {n: str(h["address"]) for plan in (old, new) for n, h in plan["hosts"].items()}
    with tempfile.TemporaryDirectory(prefix="cluster-plan-change-") as control_dir:
        executor = executor_for(args, new, addresses, Path(control_dir), follow_lab=True)
        ctx = Context(
            old, new, args.new, executor, lab=args.transport == "lab", log=log, playbooks=playbooks
        )
        ctx.check_timeout_s = args.check_timeout
        ctx.state_dir = journal.path.parent
        ok = carry_out(ctx, ops, journal)
    if not ok:
        failed = journal.failed or {}
        return Exit.FAILED, (
            f"stopped at {failed.get('step')}; the hosts after this step are untouched. Fix "
            "what the step says and run the same command again: it continues at that step."
        )
    times = journal.seconds()
    journal.finish()
    return Exit.OK, f"change carried out: {len(times)} step(s), {sum(times.values()):.0f} s"
