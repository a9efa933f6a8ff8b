"""The small API every consumer uses: a plan path in, the expanded cluster out."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster_plan.allocate import allocate_addresses
from cluster_plan.expand import expand
from cluster_plan.findings import PlanError, errors
from cluster_plan.load import parse_plan_text
from cluster_plan.lockfile import lock_path_for, read_lock, write_lock
from cluster_plan.validate import Validation, validate_document, validate_file


def expand_validation(result: Validation) -> dict[str, Any]:
    if not result.ok or result.lock is None:
        raise PlanError(errors(result.findings), result.doc.source_lines)
    return expand(result.plan, result.nodes, result.lock)


def load_expanded(plan_path: str | Path) -> dict[str, Any]:
    """Validate the plan, check its lock and expand it; PlanError lists every problem."""
    return expand_validation(validate_file(plan_path))


def load_expanded_text(text: bytes | str, plan_path: str | Path) -> dict[str, Any]:
    """As load_expanded, for plan text already read (e.g. through Ansible's loader)."""
    doc = parse_plan_text(text, str(plan_path))
    return expand_validation(validate_document(doc, lock_path=lock_path_for(plan_path)))


def lock_plan(
    plan_path: str | Path, *, reclaim: bool = False, write: bool = True
) -> tuple[Validation, dict[str, Any] | None, dict[str, Any]]:
    """Allocate addresses for the plan, keeping those of the existing lock; returns
    (validation, previous lock, new lock). Raises PlanError when the plan is not sound."""
    result = validate_file(plan_path, check_lock=False)
    if not result.ok:
        raise PlanError(errors(result.findings), result.doc.source_lines)
    path = lock_path_for(plan_path)
    previous, problem = read_lock(path)
    if problem and problem.code != "lock-missing":
        raise PlanError([problem])
    fresh, findings = allocate_addresses(result.plan, result.nodes, previous, reclaim=reclaim)
    placed = [result.doc.place(f) for f in findings]
    if placed:
        raise PlanError(placed, result.doc.source_lines)
    if write and fresh != previous:
        write_lock(path, fresh)
    result.lock = fresh
    return result, previous, fresh


__all__ = ["PlanError", "expand_validation", "load_expanded", "load_expanded_text", "lock_plan"]
