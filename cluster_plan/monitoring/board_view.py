"""One rendered Grafana dashboard read without Grafana: each panel's series at one moment, as
a self-contained HTML page, each value coloured by the panel's thresholds (the plan's limits).
The answers are Prometheus' /api/v1/query answers keyed by the query asked (the dashboard's
`$node` already replaced). Label values are data and are escaped."""

from __future__ import annotations

import re
from collections.abc import Sequence
from html import escape
from typing import Any

from cluster_plan.monitoring.grafana import NODE_VARIABLE
from cluster_plan.monitoring.status import STATUS_MARK, AnswerError
from cluster_plan.page.shell import page
from cluster_plan.page.table import Cell, table

COLOURS = {"green": "#5cb85c", "orange": "#f0ad4e", "red": "#d9534f"}


def queries(board: dict[str, Any], node: str | None) -> list[str]:
    """Every query of the dashboard, `$node` replaced (by nothing asked for when None)."""
    out = []
    for panel in board.get("panels", []):
        for target in panel.get("targets", []):
            expr = target["expr"]
            out.append(expr.replace(NODE_VARIABLE, node) if node is not None else expr)
    return out


def _duration(seconds: float) -> str:
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if abs(seconds) >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.3g} s"


def _value(value: float, unit: str) -> str:
    if unit == "s":
        return _duration(value)
    suffix = {"Gbits": " Gb/s", "percent": " %", "celsius": " °C", "watt": " W", "bytes": " B"}
    return f"{value:,.4g}{suffix.get(unit, '')}"


def _colour(value: float, steps: list[dict[str, Any]]) -> str:
    colour = "green"
    for step in steps:
        if step["value"] is None or value >= step["value"]:
            colour = step["color"]
    return COLOURS.get(colour, "#999")


def _legend(template: str, labels: dict[str, str]) -> str:
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), template)


def _natural(text: str) -> list[Any]:
    """gpu2 before gpu10: digits compare as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _series(answer: Any, expr: str) -> list[tuple[dict[str, str], float]]:
    if not isinstance(answer, dict) or answer.get("status") != "success":
        raise AnswerError(f"{expr}: no successful answer")
    return [(r["metric"], float(r["value"][1])) for r in answer["data"]["result"]]


def _panel(panel: dict[str, Any], results: dict[str, Any], node: str | None) -> str:
    defaults = panel["fieldConfig"]["defaults"]
    steps = defaults["thresholds"]["steps"]
    found = []
    for target in panel["targets"]:
        expr = target["expr"].replace(NODE_VARIABLE, node or NODE_VARIABLE)
        for labels, value in _series(results.get(expr), expr):
            found.append((_legend(target.get("legendFormat", ""), labels), value))
    rows: list[Sequence[str | Cell]] = [
        [
            escape(name) or "-",
            Cell(
                escape(_value(value, defaults["unit"])),
                "v",
                f"border-left:6px solid {_colour(value, steps)}",
            ),
        ]
        for name, value in sorted(found, key=lambda item: _natural(item[0]))
    ]
    body = table(None, rows or [[Cell("no data", colspan=2)]])
    note = f'<p class="d">{escape(panel["description"])}</p>' if panel.get("description") else ""
    return f'<div class="p"><h3>{escape(panel["title"])}</h3>{note}{body}</div>'


_CSS = """
body{font-family:sans-serif;margin:24px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin:24px 0 8px;border-bottom:2px solid #ccc}
.g{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:12px}
.p{border:1px solid #ddd;border-radius:4px;padding:8px 12px}
h3{font-size:14px;margin:0 0 6px}.d{color:#666;font-size:12px;margin:0 0 6px}
table{border-collapse:collapse;width:100%}
td{border-bottom:1px solid #eee;padding:3px 8px;font-size:13px}
td.v{text-align:right;white-space:nowrap;width:30%}
.meta{color:#666;font-size:12px}
"""


def board_html(board: dict[str, Any], results: dict[str, Any], node: str | None, at: str) -> str:
    """The page: a heading per row of the dashboard, its panels two to a line."""
    title = board["title"].replace(NODE_VARIABLE, node or NODE_VARIABLE)
    parts: list[str] = []
    open_grid = False
    for panel in board["panels"]:
        if panel["type"] == "row":
            parts.append(("</div>" if open_grid else "") + f"<h2>{escape(panel['title'])}</h2>")
            parts.append('<div class="g">')
            open_grid = True
        else:
            parts.append(_panel(panel, results, node))
    if open_grid:
        parts.append("</div>")
    body = (
        f'<h1>{escape(title)}</h1><p class="meta">Values at {escape(at)}; colours are the '
        f"panels' thresholds, from the plan.</p>{''.join(parts)}"
    )
    return page(title, body, _CSS, STATUS_MARK)
