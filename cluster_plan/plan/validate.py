"""The validation pipeline: YAML -> schema -> semantic checks -> lock, every finding kept."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cluster_plan.plan.allocate import allocate_addresses
from cluster_plan.plan.checks import ALL_CHECKS, MAX_NODES
from cluster_plan.plan.defaults import with_defaults
from cluster_plan.plan.findings import Finding, errors, format_path, sort_key
from cluster_plan.plan.load import PlanDocument, load_plan_file, parse_plan_text
from cluster_plan.plan.lockfile import (
    identity_problem,
    lock_differences,
    lock_path_for,
    read_lock,
)
from cluster_plan.plan.nodes import Node, iter_nodes
from cluster_plan.plan.placement import place_racks
from cluster_plan.plan.schema import schema_findings, secret_values
from cluster_plan.plan.secrets import mask


@dataclass
class Validation:
    doc: PlanDocument
    findings: list[Finding] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    lock: dict[str, Any] | None = None  # the lock, when it is current for the plan
    lock_path: Path | None = None
    previous: dict[str, Any] | None = None  # the lock as read, current or not
    lock_problem: Finding | None = None  # why there is no lock to read
    rack_moves: list[str] = field(default_factory=list)
    filled: dict[str, Any] | None = None  # the plan with every default filled in

    @property
    def ok(self) -> bool:
        return not errors(self.findings)

    @property
    def plan(self) -> dict[str, Any]:
        """The plan as every consumer reads it: defaults filled (cluster_plan.plan.defaults)."""
        if self.filled is None:
            self.filled = with_defaults(self.doc.data)
        return self.filled


_BROKEN = (
    KeyError,
    TypeError,
    AttributeError,
    ValueError,
    IndexError,
    ZeroDivisionError,
    OverflowError,
)


def _semantic_findings(
    doc: PlanDocument,
    plan: dict[str, Any],
    schema_clean: bool,
    previous: dict[str, Any] | None,
    allow_moves: bool,
) -> tuple[list[Finding], list[Node], list[str]]:
    groups = plan.get("node_groups")
    planned = (
        sum(
            g["count"]
            for g in groups.values()
            if isinstance(g, dict) and type(g.get("count")) is int and g["count"] > 0
        )
        if isinstance(groups, dict)
        else 0
    )
    if planned > MAX_NODES:  # enumerating ten million nodes would take minutes
        too_many = Finding(
            "too-many-nodes",
            f"the plan has {planned} nodes; the limit is {MAX_NODES}",
            ("node_groups",),
        )
        return [doc.place(too_many)], [], []
    try:
        nodes, placement, moves = place_racks(
            plan, list(iter_nodes(plan)), previous, allow_moves=allow_moves
        )
    except _BROKEN:
        if schema_clean:
            raise
        return [], [], []
    findings = [doc.place(f) for f in placement]
    for check in ALL_CHECKS:
        try:
            found = list(check(plan, nodes))
        except _BROKEN:
            # A plan with schema errors can break a check's assumptions; the schema findings
            # already say what is wrong.
            if schema_clean:
                raise
            continue
        findings.extend(doc.place(f) for f in found)
    return findings, nodes, moves


def _apply_suppressions(doc: PlanDocument, findings: list[Finding]) -> list[Finding]:
    rules = (doc.data or {}).get("suppress") or []
    if not isinstance(rules, list):
        return findings
    used = [False] * len(rules)
    out = []
    for finding in findings:
        i = _rule_for(rules, finding)
        if i is not None:
            used[i] = True
            if finding.severity == "warning":
                finding = dataclasses.replace(finding, suppressed_by=str(rules[i].get("reason")))
        out.append(finding)
    rule_findings = [
        _rule_finding(i, rule, used[i], out)
        for i, rule in enumerate(rules)
        if isinstance(rule, dict)
    ]
    return out + [doc.place(finding) for finding in rule_findings if finding is not None]


def _masked(doc: PlanDocument, findings: list[Finding]) -> list[Finding]:
    """Findings whose message or hint quotes a secret of the plan, with *** instead."""
    if not doc.secrets:
        return findings
    return [
        dataclasses.replace(
            f, message=mask(f.message, doc.secrets), hint=f.hint and mask(f.hint, doc.secrets)
        )
        for f in findings
    ]


def _rule_for(rules: list[Any], finding: Finding) -> int | None:
    """The first suppression rule that names the finding's code (and path, if it gives one)."""
    for i, rule in enumerate(rules):
        if not isinstance(rule, dict) or rule.get("code") != finding.code:
            continue
        if rule.get("path") in (None, finding.json_path):
            return i
    return None


def _rule_finding(
    i: int, rule: dict[str, Any], used: bool, findings: list[Finding]
) -> Finding | None:
    """A rule that suppressed nothing, or that matched only errors (never suppressed)."""
    if not used:
        where = f" at {rule['path']}" if rule.get("path") else ""
        return Finding(
            "unused-suppression",
            f"no warning {rule.get('code')!r}{where} to suppress",
            ("suppress", i),
            severity="warning",
        )
    if not any(f.suppressed_by is not None and f.code == rule.get("code") for f in findings):
        return Finding(
            "suppress-error",
            f"{rule.get('code')!r} is an error; only warnings can be suppressed",
            ("suppress", i),
        )
    return None


def cluster_name(data: Any) -> Any:
    cluster = data.get("cluster") if isinstance(data, dict) else None
    return cluster.get("name") if isinstance(cluster, dict) else None


def _read_own_lock(
    doc: PlanDocument, lock_path: Path
) -> tuple[dict[str, Any] | None, Finding | None]:
    """The plan's lock, or why there is none: a lock written for another plan is none."""
    lock, problem = read_lock(lock_path)
    if lock is not None:
        problem = identity_problem(lock, lock_path, doc.file, cluster_name(doc.data))
    return (None, problem) if problem else (lock, None)


def validate_document(
    doc: PlanDocument,
    *,
    lock_path: Path | None = None,
    check_lock: bool = True,
    allow_moves: bool = False,
) -> Validation:
    result = Validation(doc=doc, findings=list(doc.findings), lock_path=lock_path)
    if doc.data is None or not isinstance(doc.data, dict):
        return result
    doc.secrets = frozenset(secret_values(doc.data))
    if lock_path is not None:
        result.previous, result.lock_problem = _read_own_lock(doc, lock_path)
    found = schema_findings(doc)
    # a value the loader refused (NaN, an octal slip) may break a check's arithmetic; the
    # loader's finding says what is wrong, as a schema finding would
    schema_clean = not errors([*doc.findings, *found])
    try:
        result.filled = with_defaults(doc.data)
    except _BROKEN:
        if schema_clean:
            raise
        result.filled = doc.data  # the schema findings say what is wrong
    semantic, nodes, moves = _semantic_findings(
        doc, result.filled, schema_clean, result.previous, allow_moves
    )
    result.findings.extend(found + semantic)
    result.nodes = nodes
    result.rack_moves = moves
    result.findings = _masked(doc, _apply_suppressions(doc, result.findings))
    if check_lock and lock_path is not None and result.ok:
        _check_lock(result, lock_path)
    result.findings.sort(key=sort_key)
    return result


def _check_lock(result: Validation, lock_path: Path) -> None:
    problem = result.lock_problem
    if problem is not None:
        if problem.code == "lock-missing":  # not locked yet: the next step, not a mistake
            problem = dataclasses.replace(
                problem,
                severity="warning",
                message="the plan is not locked yet",
                hint=f"run `cluster-plan lock {result.doc.file}` to give every host its "
                "address, and commit the lock file",
            )
        result.findings.append(problem)
        return
    lock = result.previous
    assert lock is not None
    fresh, refusals = allocate_addresses(result.plan, result.nodes, lock)
    result.findings.extend(result.doc.place(f) for f in refusals)
    if refusals:
        return
    differences = lock_differences(lock, fresh)
    if differences:
        result.findings.append(
            Finding(
                "lock-stale",
                "the lock file does not match the plan: " + "; ".join(differences),
                (),
                file=str(lock_path),
                hint="run `cluster-plan lock PLAN` to update it (surviving hosts keep their "
                "addresses and racks), review the diff, and commit it",
            )
        )
        return
    result.lock = lock


def validate_file(
    path: str | Path, *, check_lock: bool = True, allow_moves: bool = False
) -> Validation:
    doc = load_plan_file(path)
    return validate_document(
        doc, lock_path=lock_path_for(path), check_lock=check_lock, allow_moves=allow_moves
    )


def validate_text(
    text: str | bytes,
    file: str = "<plan>",
    *,
    lock_path: Path | None = None,
    check_lock: bool = False,
) -> Validation:
    return validate_document(
        parse_plan_text(text, file), lock_path=lock_path, check_lock=check_lock
    )


__all__ = ["Validation", "format_path", "validate_document", "validate_file", "validate_text"]
