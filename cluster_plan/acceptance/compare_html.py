"""The report's comparison view: a heatmap of the change per pair and direction, a small trend
line per degraded figure over the last runs, and what could not be compared. Inline SVG, as
the rest of the page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from cluster_plan.acceptance.figures import METRICS
from cluster_plan.page.heatmap import BAD, EMPTY, ERRORED, GOOD, heatmap
from cluster_plan.page.shell import bullets
from cluster_plan.page.table import table, text_table
from cluster_plan.page.trend import trend

# better than before beyond the tolerance; worse, past half the tolerance; no tolerance set
IMPROVED_COLOUR, SLOWER, NOT_JUDGED = "#1565c0", "#8d6e00", "#607d8b"
HEATMAPS = ("bandwidth_gbps", "rtt_median_ms")  # the figures that vary from run to run


def _percent(pdiff: float) -> str:
    """Percent without the sign, at most four characters so it fits its cell: -0.4, +3.1,
    -12."""
    if abs(pdiff) < 0.0005:
        return "0.0"
    return f"{pdiff * 100:+.1f}" if abs(pdiff) < 0.0995 else f"{pdiff * 100:+.0f}"


def _cell(row: Mapping[str, Any], tolerance: Mapping[str, Any]) -> tuple[str, str]:
    outcome, pdiff = row["outcome"], row["pdiff"]
    if outcome == "failed":
        return ERRORED, "err"
    if pdiff is None:
        return EMPTY, "n/a"
    text = _percent(pdiff)
    if outcome == "degraded":
        return BAD, text
    if outcome == "improved":
        return IMPROVED_COLOUR, text
    metric = METRICS[row["metric"]]
    bound = tolerance.get(metric.tolerance or "") or {}
    limit = bound.get("lower") if metric.better == "higher" else bound.get("upper")
    if limit is None:
        return NOT_JUDGED, text
    # amber: more than half of the way to degraded, so a trend shows before it crosses
    return (SLOWER if pdiff / limit > 0.5 else GOOD), text


def _legend(tolerance: Mapping[str, Any]) -> str:
    bands = ", ".join(
        f"{kind} {_band(b)}" for kind, b in sorted(tolerance.items()) if _band(b) != "not judged"
    )
    items = [
        (GOOD, "as before"), (SLOWER, "worse, over half the tolerance"), (BAD, "degraded"),
        (IMPROVED_COLOUR, "better beyond the tolerance"), (NOT_JUDGED, "no tolerance set"),
        (ERRORED, "measurement failed"), (EMPTY, "not compared"),
    ]  # fmt: skip
    keys = "".join(
        f'<i style="font-style:normal;white-space:nowrap"><span style="background:{colour}">'
        f"</span>{text}</i> "
        for colour, text in items
    )
    return (
        f'<p class="legend">{keys}<br>Tolerance (fractions of the earlier value): '
        f"{escape(bands or 'none')}</p>"
    )


def _band(bound: Mapping[str, Any]) -> str:
    lower, upper = bound.get("lower"), bound.get("upper")
    if lower is None and upper is None:
        return "not judged"
    low = "-" if lower is None else f"{lower:+.0%}"
    high = "-" if upper is None else f"{upper:+.0%}"
    return f"[{low}, {high}]"


def _heatmaps(
    report: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], tolerance: Mapping[str, Any]
) -> list[str]:
    out = []
    for network in report["networks"]:
        nodes = [n["name"] for n in network["nodes"]]
        for metric in HEATMAPS:
            cells = {
                (r["source"], r["target"]): _cell(r, tolerance)
                for r in rows
                if r["metric"] == metric and r["network"] == network["name"]
            }
            if not cells:
                continue
            label = METRICS[metric].label
            out += [
                f"<h3>{escape(network['name'])}: {escape(label)}, change in % against the "
                "earlier run (row to column)</h3>",
                heatmap(nodes, cells, f"{label} change {network['name']}"),
            ]
    return out


def trend_svg(points: Sequence[Mapping[str, Any]], floor: float | None, title: str) -> str:
    """One figure over the runs (each point a run's `value`, None when it failed): the trend
    line of cluster_plan.page.trend."""
    return trend([p["value"] for p in points], floor, title)


def _trends(trends: Sequence[Mapping[str, Any]]) -> list[str]:
    if not trends:
        return []
    rows = []
    for t in trends:
        where = f"{t['source']} -> {t['target']}" if t["target"] else t["source"]
        label = METRICS[t["metric"]].label if t["metric"] in METRICS else t["metric"]
        title = f"{t['network']}: {where} {label}"
        values = ", ".join(
            f"run {p['run']}: {'failed' if p['value'] is None else format(p['value'], 'g')}"
            for p in t["points"]
        )
        floor = "" if t["floor"] is None else f"; plan floor {t['floor']:g} (dashed)"
        rows.append(
            [
                escape(title),
                trend_svg(t["points"], t["floor"], title),
                f"{escape(values)} {escape(t['unit'])}{escape(floor)}",
            ]
        )
    return [
        "<h3>Degraded figures over the last runs</h3>",
        table(["figure", "trend", "values"], rows),
    ]


def _figure_rows(rows: Sequence[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (
            r["network"], f"{r['source']} -> {r['target']}" if r["target"] else r["source"],
            r["metric"], r["value"], r["floor"], r["reference"],
            None if r["pdiff"] is None else f"{r['pdiff']:+.1%}", r["outcome"],
        )
        for r in rows
    ]  # fmt: skip


def reference_words(comparison: Mapping[str, Any]) -> str:
    """What the run compared with is, in words: "the baseline", "the last passed run"..."""
    ref, selector = comparison["reference"], comparison["selector"]
    if ref["baseline"] and selector in ("auto", "baseline"):
        return "the baseline"
    if selector in ("auto", "last-passed"):
        return "the last passed run"
    return f"chosen run, {'passed' if ref['passed'] else 'failed'}"


def render_comparison(report: Mapping[str, Any]) -> list[str]:
    """The comparison section of the page (empty when the report has none)."""
    comparison = report.get("comparison")
    if not comparison:
        return []
    ref = comparison["reference"]
    notes = bullets(comparison["notes"])
    if ref is None:
        return ["<h2>Comparison with earlier runs</h2>", notes or "<ul></ul>"]
    rows = comparison["figures"]
    degraded = [r for r in rows if r["outcome"] == "degraded"]
    headers = ["network", "where", "figure", "value", "plan floor", "earlier", "change", "outcome"]
    gaps = [
        (g["network"], f"{g['source']} -> {g['target']}" if g["target"] else g["source"],
         g["metric"], g["why"])
        for g in comparison["not_compared"]
    ]  # fmt: skip
    return [
        f"<h2>Comparison with run {ref['run']} ({escape(reference_words(comparison))}, "
        f"{escape(ref['generated_at'])})</h2>",
        f"<p>{len(rows)} figures compared, {len(degraded)} degraded, {len(gaps)} not compared.</p>",
        notes,
        _legend(comparison["tolerance"]),
        *_heatmaps(report, rows, comparison["tolerance"]),
        *_trends(comparison["trends"]),
        "<h3>Degraded figures</h3>",
        text_table(headers, _figure_rows(degraded)) if degraded else "<p>None.</p>",
        "<details><summary>Every compared figure</summary>",
        text_table(headers, _figure_rows(rows)),
        "</details>",
        "<h3>Not compared</h3>",
        text_table(["network", "where", "figure", "why"], gaps) if gaps else "<p>Nothing.</p>",
    ]
