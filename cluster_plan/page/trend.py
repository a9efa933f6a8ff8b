"""The trend line: one figure over the last runs, small enough for a table cell; inline SVG.
A failed run (None) leaves a gap in the points, the plan's floor is dashed red, the latest
value a red dot."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from cluster_plan.page.heatmap import BAD

TREND_W, TREND_H, PAD = 260, 70, 6


def _scale(values: Sequence[float], lo: float, hi: float) -> list[float]:
    span = (hi - lo) or 1.0
    return [TREND_H - PAD - (v - lo) / span * (TREND_H - 2 * PAD) for v in values]


def trend(values: Sequence[float | None], floor: float | None, title: str) -> str:
    """The line through `values` (oldest first); nothing when none is known."""
    known = [(i, float(v)) for i, v in enumerate(values) if v is not None]
    if not known:
        return ""
    span = [v for _, v in known] + ([floor] if floor is not None else [])
    lo, hi = min(span), max(span)
    lo, hi = lo - (hi - lo) * 0.1, hi + (hi - lo) * 0.1
    step = (TREND_W - 2 * PAD) / max(1, len(values) - 1)
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
