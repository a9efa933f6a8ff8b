"""The report's comparison view: a heatmap of the change per pair and direction, a small trend
line per degraded figure over the last runs, and what could not be compared. Inline SVG, as
the rest of the page."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from cluster_plan.acceptance.figures import METRICS
from cluster_plan.acceptance.html import BAD, EMPTY, ERRORED, GOOD, _heatmap, _table

# better than before beyond the tolerance; worse, past half the tolerance; no tolerance set
IMPROVED_COLOUR, SLOWER, NOT_JUDGED = "#1565c0", "#8d6e00", "#607d8b"
HEATMAPS = ("bandwidth_gbps", "rtt_median_ms")  # the figures that vary from run to run
TREND_W, TREND_H, PAD = 260, 70, 6


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
                _heatmap(nodes, cells, f"{label} change {network['name']}"),
            ]
    return out


def _scale(values: Sequence[float], lo: float, hi: float) -> list[float]:
    span = (hi - lo) or 1.0
    return [TREND_H - PAD - (v - lo) / span * (TREND_H - 2 * PAD) for v in values]


def trend_svg(points: Sequence[Mapping[str, Any]], floor: float | None, title: str) -> str:
    """One figure over the runs: a line through its values, the plan's floor dashed red, the
    latest value as a red dot."""
    known = [(i, float(p["value"])) for i, p in enumerate(points) if p["value"] is not None]
    if not known:
        return ""
    values = [v for _, v in known] + ([floor] if floor is not None else [])
    lo, hi = min(values), max(values)
    lo, hi = lo - (hi - lo) * 0.1, hi + (hi - lo) * 0.1
    step = (TREND_W - 2 * PAD) / max(1, len(points) - 1)
    ys = _scale([v for _, v in known], lo, hi)
    coords = [(PAD + i * step, y) for (i, _), y in zip(known, ys, strict=True)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{TREND_W}" height="{TREND_H}" '
        f'role="img" aria-label="{escape(title)}" style="background:#fafafa;border:1px solid '
        f'#ddd"><title>{escape(title)}</title>'
    ]
    if floor is not None:
        (fy,) = _scale([floor], lo, hi)
        out.append(f'<line x1="0" x2="{TREND_W}" y1="{fy:.1f}" y2="{fy:.1f}" stroke="{BAD}" '
                   'stroke-dasharray="4 3"/>')  # fmt: skip
    out.append(f'<polyline points="{line}" fill="none" stroke="#37474f" stroke-width="2"/>')
    out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#37474f"/>' for x, y in coords[:-1]]
    x, y = coords[-1]
    out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{BAD}"/></svg>')
    return "".join(out)


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
            f"<tr><td>{escape(title)}</td><td>{trend_svg(t['points'], t['floor'], title)}</td>"
            f"<td>{escape(values)} {escape(t['unit'])}{escape(floor)}</td></tr>"
        )
    return [
        "<h3>Degraded figures over the last runs</h3>",
        "<table><tr><th>figure</th><th>trend</th><th>values</th></tr>" + "".join(rows) + "</table>",
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
    notes = "".join(f"<li>{escape(n)}</li>" for n in comparison["notes"])
    if ref is None:
        return ["<h2>Comparison with earlier runs</h2>", f"<ul>{notes}</ul>"]
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
        f"<ul>{notes}</ul>" if notes else "",
        _legend(comparison["tolerance"]),
        *_heatmaps(report, rows, comparison["tolerance"]),
        *_trends(comparison["trends"]),
        "<h3>Degraded figures</h3>",
        _table(headers, _figure_rows(degraded)) if degraded else "<p>None.</p>",
        "<details><summary>Every compared figure</summary>",
        _table(headers, _figure_rows(rows)),
        "</details>",
        "<h3>Not compared</h3>",
        _table(["network", "where", "figure", "why"], gaps) if gaps else "<p>Nothing.</p>",
    ]
