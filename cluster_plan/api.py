"""The small API every consumer uses: a plan path in, the expanded cluster out."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_plan.plan.allocate import build_lock
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.plan.expand import expand
from cluster_plan.plan.findings import PlanError, errors
from cluster_plan.plan.load import parse_plan_text
from cluster_plan.plan.lockfile import (
    exclusive,
    lock_path_for,
    plan_identity,
    remove_stale_temporaries,
    write_lock,
)
from cluster_plan.plan.validate import Validation, cluster_name, validate_document, validate_file


def expand_validation(result: Validation) -> ExpandedPlan:
    """The expanded cluster of a validated plan; PlanError unless the plan is sound and its
    lock current (a plan that is not locked yet cannot be expanded: it has no addresses)."""
    problems = errors(result.findings)
    if not problems and result.lock is None:
        problems = [
            dataclasses.replace(f, severity="error")
            for f in result.findings
            if f.code == "lock-missing"
        ]
    if problems or result.lock is None:
        raise PlanError(problems, result.doc.source_lines)
    return expand(result.plan, result.nodes, result.lock)


def load_expanded(plan_path: str | Path) -> ExpandedPlan:
    """Validate the plan, check its lock and expand it; PlanError lists every problem."""
    return expand_validation(validate_file(plan_path))


def load_expanded_text(text: bytes | str, plan_path: str | Path) -> ExpandedPlan:
    """As load_expanded, for plan text already read (e.g. through Ansible's loader)."""
    doc = parse_plan_text(text, str(plan_path))
    return expand_validation(validate_document(doc, lock_path=lock_path_for(plan_path)))


@dataclass
class LockResult:
    validation: Validation
    previous: dict[str, Any] | None
    lock: dict[str, Any]
    moves: list[str]  # hosts that changed address or rack (only with allow_moves)

    @property
    def changed(self) -> bool:
        """The lock file would be rewritten (an older version's lock is upgraded)."""
        return self.previous != self.lock

    @property
    def out_of_date(self) -> bool:
        """The lock's addresses or racks are not the plan's (what `lock --check` asks): a
        lock of an older version that is current otherwise is not out of date."""
        return self.previous is None or _placement(self.previous) != _placement(self.lock)


def _placement(lock: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in lock.items() if k not in ("version", "plan")}


def lock_plan(
    plan_path: str | Path, *, reclaim: bool = False, allow_moves: bool = False, write: bool = True
) -> LockResult:
    """Allocate addresses and racks for the plan, keeping those of the existing lock.
    Raises PlanError when the plan is not sound or would move a host without allow_moves."""
    with exclusive(plan_path):
        return _lock_plan(plan_path, reclaim=reclaim, allow_moves=allow_moves, write=write)


def _lock_plan(
    plan_path: str | Path, *, reclaim: bool, allow_moves: bool, write: bool
) -> LockResult:
    result = validate_file(plan_path, check_lock=False, allow_moves=allow_moves)
    if not result.ok:
        raise PlanError(errors(result.findings), result.doc.source_lines)
    problem = result.lock_problem
    if problem and problem.code != "lock-missing":
        raise PlanError([problem])
    previous = result.previous
    fresh, findings, moves = build_lock(
        result.plan, result.nodes, previous, reclaim=reclaim, allow_moves=allow_moves
    )
    placed = [result.doc.place(f) for f in findings]
    if placed:
        raise PlanError(placed, result.doc.source_lines)
    identity = plan_identity(plan_path, cluster_name(result.plan))
    fresh = {"version": fresh["version"], "plan": identity, **fresh}
    if write:
        remove_stale_temporaries(lock_path_for(plan_path))
    if write and fresh != previous:
        write_lock(lock_path_for(plan_path), fresh, Path(plan_path))
    result.lock = fresh
    return LockResult(result, previous, fresh, [*result.rack_moves, *moves])


__all__ = [
    "LockResult",
    "PlanError",
    "expand_validation",
    "load_expanded",
    "load_expanded_text",
    "lock_plan",
]
