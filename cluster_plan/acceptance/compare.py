"""One run's figures against an earlier run's: the difference per figure and what got worse.

The tolerance is ReFrame's reference model: per kind of figure a lower and an upper bound, as
fractions of the earlier value (`lower: -0.05` accepts down to 95 %; null drops the bound). A
figure outside the bound on its worse side (a bandwidth below, a round trip above) is
*degraded*: a warning finding that names the node (when several of its pairs got worse) or
the link, even while the plan's own floor is met. Outside on the better side it is
*improved*, shown and never a finding. Only figures both runs measured are compared; the rest,
and a plan that changed in between, are listed as what could not be compared.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cluster_plan.acceptance.figures import HIGHER, METRICS, Figure
from cluster_plan.acceptance.history import Run
from cluster_plan.acceptance.verdicts import Finding, localise

DEFAULT_TOLERANCE: dict[str, dict[str, float | None]] = {
    "bandwidth": {"lower": -0.05, "upper": None},
    "latency": {"lower": None, "upper": None},
    "storage": {"lower": -0.05, "upper": None},
}
UNCHANGED, DEGRADED, IMPROVED, CHANGED = "unchanged", "degraded", "improved", "changed"
FAILED, NO_REFERENCE = "failed", "no_reference"
# criteria whose change alters what a figure means; the others only how it was measured
CRITERIA = ("min_gbps", "max_latency_ms", "max_loss_pct", "duration_s", "rate_scale", "probes")


def tolerance_from_plan(acceptance: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The plan's acceptance.history.tolerance over the defaults (an older expanded plan has
    none)."""
    history = (acceptance or {}).get("history") or {}
    chosen = history.get("tolerance") or {}
    return {
        kind: {**bound, **(chosen.get(kind) or {})} for kind, bound in DEFAULT_TOLERANCE.items()
    }


def _outside(pdiff: float, bound: Mapping[str, Any]) -> str | None:
    """ "low" or "high" when the change leaves the band, else None."""
    lower, upper = bound.get("lower"), bound.get("upper")
    if lower is not None and pdiff < lower:
        return "low"
    if upper is not None and pdiff > upper:
        return "high"
    return None


def judge_figure(
    metric: str, value: float | None, reference: float | None, tolerance: Mapping[str, Any]
) -> tuple[float | None, str]:
    """(relative difference, outcome) of one figure against its earlier value."""
    if value is None:
        return None, FAILED
    if reference is None:
        return None, NO_REFERENCE
    if reference == 0:
        return None, UNCHANGED if value == 0 else CHANGED
    pdiff = (value - reference) / reference
    kind = METRICS[metric].tolerance if metric in METRICS else None
    side = _outside(pdiff, tolerance.get(kind) or {}) if kind else None
    if side is None:
        return pdiff, UNCHANGED
    worse = "low" if METRICS[metric].better == HIGHER else "high"
    return pdiff, DEGRADED if side == worse else IMPROVED


def _row(now: Figure, then: Figure, tolerance: Mapping[str, Any]) -> dict[str, Any]:
    pdiff, outcome = judge_figure(now.metric, now.value, then.value, tolerance)
    diff = None if now.value is None or then.value is None else now.value - then.value
    return {
        "metric": now.metric,
        "network": now.network,
        "source": now.source,
        "target": now.target,
        "unit": METRICS[now.metric].unit if now.metric in METRICS else "",
        "value": now.value,
        "floor": now.floor,
        "reference": then.value,
        "reference_floor": then.floor,
        "diff": None if diff is None else round(diff, 4),
        "pdiff": None if pdiff is None else round(pdiff, 4),
        "outcome": outcome,
    }


def compare_figures(
    current: Sequence[Figure], reference: Sequence[Figure], tolerance: Mapping[str, Any]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(a row per figure both runs measured, a row per figure only one of them did)."""
    earlier = {f.key: f for f in reference}
    now = {f.key: f for f in current}
    rows = [_row(f, earlier[f.key], tolerance) for f in current if f.key in earlier]

    def missing(f: Figure, why: str) -> dict[str, Any]:
        return {"metric": f.metric, "network": f.network, "source": f.source,
                "target": f.target, "why": why}  # fmt: skip

    gaps = [missing(f, "only this run measured it") for f in current if f.key not in earlier]
    gaps += [missing(f, "only the earlier run measured it") for f in reference if f.key not in now]
    return rows, gaps


def plan_notes(
    current: Mapping[str, Any], reference: Run, plan_hash: str | None, lock_hash: str | None
) -> list[str]:
    """What changed in the plan between the runs, in words."""
    notes = []
    if plan_hash is not None and plan_hash != reference.plan_hash:
        notes.append(
            f"the plan changed since run {reference.id} (plan hash {reference.plan_hash[:12]} "
            f"-> {plan_hash[:12]}): only figures both runs measured are compared"
        )
    if lock_hash != reference.lock_hash and plan_hash is not None:
        notes.append(f"the lock (addresses) changed since run {reference.id}")
    for key in CRITERIA:
        old, new = reference.criteria.get(key), current.get(key)
        if old != new:
            notes.append(f"{key} was {_num(old)} in run {reference.id}, is {_num(new)} now")
    return notes


def _pair(row: Mapping[str, Any]) -> tuple[str, str]:
    a, b = row["source"], row["target"]
    return (a, b) if a <= b else (b, a)


def _evidence(row: Mapping[str, Any], reference_run: int) -> str:
    label = METRICS[row["metric"]].label if row["metric"] in METRICS else row["metric"]
    where = f"{row['source']} -> {row['target']}" if row["target"] else row["source"]
    return (
        f"{where} {label} {row['value']:g} {row['unit']}, {row['pdiff']:+.1%} against run "
        f"{reference_run} ({row['reference']:g})"
    )


def degraded_findings(rows: Sequence[Mapping[str, Any]], reference_run: int) -> list[Finding]:
    """Warnings for the degraded figures: per network, the node shared by several degraded
    links, else each link (the fault localisation's greedy cover); storage per host."""
    findings: list[Finding] = []
    links: dict[str, dict[tuple[str, str], list[str]]] = {}
    for row in rows:
        if row["outcome"] != DEGRADED:
            continue
        if not row["target"]:
            findings.append(Finding(
                kind="degraded", severity="warning", network=row["network"], pairs=[],
                node=row["source"], evidence=[_evidence(row, reference_run)],
                message=f"{row['source']}: {_evidence(row, reference_run)}",
            ))  # fmt: skip
            continue
        links.setdefault(row["network"], {}).setdefault(_pair(row), []).append(
            _evidence(row, reference_run)
        )
    for network, pairs in sorted(links.items()):
        joined = {pair: "; ".join(texts) for pair, texts in pairs.items()}
        for finding in localise(joined, "degraded", network, severity="warning"):
            if finding.node:
                finding.message = (
                    f"{finding.node}: {len(finding.pairs)} links got worse than in run "
                    f"{reference_run} on {network}"
                )
            else:
                finding.message = f"link {' <-> '.join(finding.pairs[0])}: {finding.evidence[0]}"
            findings.append(finding)
    return findings


def render_text(comparison: Mapping[str, Any], every_figure: bool = True) -> str:
    """The comparison for people: what it compared with, then a line per figure."""
    ref = comparison["reference"]
    if ref is None:
        return "no comparison: " + "; ".join(comparison["notes"])
    counts: dict[str, int] = {}
    for row in comparison["figures"]:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    lines = [
        f"compared with run {ref['run']} ({'baseline, ' if ref['baseline'] else ''}"
        f"{ref['generated_at']}, {'passed' if ref['passed'] else 'failed'}): "
        f"{summary or 'no figure in common'}; {len(comparison['not_compared'])} not compared"
    ]
    lines += [f"  note: {n}" for n in comparison["notes"]]
    if every_figure:
        lines.append(f"  {'figure':18} {'network':8} {'where':22} {'value':>9} {'floor':>7} "
                     f"{'earlier':>9} {'diff':>8}  outcome")  # fmt: skip
        lines += [_text_row(r) for r in comparison["figures"]]
        lines += [
            f"  not compared: {g['metric']} {g['network']} "
            f"{g['source']}{' -> ' + g['target'] if g['target'] else ''}: {g['why']}"
            for g in comparison["not_compared"]
        ]
    return "\n".join(lines)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _text_row(row: Mapping[str, Any]) -> str:
    where = f"{row['source']} -> {row['target']}" if row["target"] else row["source"]
    pdiff = "-" if row["pdiff"] is None else f"{row['pdiff']:+.1%}"
    return (
        f"  {row['metric']:18} {row['network']:8} {where:22} {_num(row['value']):>9} "
        f"{_num(row['floor']):>7} {_num(row['reference']):>9} {pdiff:>8}  {row['outcome']}"
    )
