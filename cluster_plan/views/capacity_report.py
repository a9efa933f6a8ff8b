"""Shells of `cluster-plan capacity`: the capacity model (cluster_plan.views.capacity) as text for a
terminal and as one self-contained HTML page (no script, no external files)."""

from __future__ import annotations

from html import escape
from typing import Any

from cluster_plan.output_files import html_mark
from cluster_plan.page.shell import page
from cluster_plan.page.table import Cell, table

CAPACITY_MARK = html_mark("capacity")  # `capacity --html` replaces only a page with it

_WARN, _OVER, _OK = "#f3c969", "#ef8a7e", "#a8d98a"  # light: the label stays legible


def _gpus(gpus: dict[str, int]) -> str:
    return ", ".join(f"{count:,} x {model}" for model, count in gpus.items()) or "-"


def _num(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:,.1f}" if value < 100 else f"{value:,.0f}"
    return text + unit


def _budget(draw: float, budget: float | None, pct: float | None) -> str:
    if budget is None:
        return "no budget"
    return f"{_num(draw)} of {_num(budget, ' kW')} ({pct:.0f} %)"


def render_text(model: dict[str, Any]) -> str:
    totals = model["totals"]
    lines = [
        f"cluster {model['cluster']}: {totals['nodes']} nodes, {_gpus(totals['gpus'])}; "
        f"{_num(totals['peak_kw'], ' kW')} peak, {_num(totals['typical_kw'], ' kW')} typical "
        f"({model['settings']['typical_load_pct']:g} % of peak)",
        "",
        "pools:",
    ]
    for pool in model["pools"]:
        classes = ", ".join(pool["classes"]) or "no class"
        accel = (
            f"{_gpus(pool['gpus'])}, {_num(pool['gpu_memory_gb'])} GB GPU memory, "
            f"{_num(pool['bf16_pflops'])} PFLOPS BF16 dense, "
            if pool["gpus"]
            else "no GPUs, "
        )
        lines.append(
            f"  {pool['pool']} ({classes}): {pool['nodes']} nodes, {accel}"
            f"{_num(pool['peak_kw'], ' kW')} peak"
        )
    lines += ["", "racks (peak draw against power and cooling budgets):"]
    for rack in model["racks"]:
        cooling = _budget(rack["peak_kw"], rack["cooling_kw"], rack["cooling_pct"])
        kind = f" {rack['cooling_kind']}" if rack["cooling_kind"] else ""
        lines.append(
            f"  {rack['rack']}: {rack['nodes']} nodes, {_num(rack['peak_kw'], ' kW')} peak, "
            f"{_num(rack['typical_kw'], ' kW')} typical; power "
            f"{_budget(rack['peak_kw'], rack['power_kw'], rack['power_pct'])}; cooling{kind} "
            f"{cooling}"
        )
    if model["teams"]:
        lines += ["", "teams (GPU limit against the GPUs of their classes' pools):"]
        for team in model["teams"]:
            limit = team["limit_gpus"]
            share = "no limit" if limit is None else f"limit {limit:g} ({team['share_pct']:g} %)"
            lines.append(
                f"  {team['team']}: pools {', '.join(team['pools']) or '-'} hold "
                f"{team['pool_gpus']} GPUs; {share}"
            )
    if model["findings"]:
        lines += ["", f"{len(model['findings'])} finding(s): see `cluster-plan validate`"]
    for entry in model["suppressed"]:
        lines.append(f"suppressed: {entry['count']} x {entry['code']}: {entry['reason']}")
    return "\n".join(lines)


_CSS = """
body{font-family:sans-serif;margin:24px;color:#222}
table{border-collapse:collapse;margin-bottom:24px}
th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left;font-size:13px}
th{background:#f0f0f0}
td.n{text-align:right}
.bar{position:relative;width:240px;height:16px;background:#eee;border:1px solid #999}
.fill{height:16px}
.bar span{position:absolute;left:6px;top:0;font-size:11px;line-height:16px}
.none{color:#777;font-size:12px}
.error{color:#c0392b}.warning{color:#9a6700}
"""


def _bar(rack: dict[str, Any], key: str, warn_pct: float) -> str:
    budget, pct = rack[f"{key}_kw"], rack[f"{key}_pct"]
    if budget is None:
        return '<span class="none">no budget</span>'
    color = _OVER if pct > 100 else _WARN if pct > warn_pct else _OK
    width = min(pct, 100.0)
    label = f"{_num(rack['peak_kw'])} / {_num(budget)} kW ({pct:.0f} %)"
    return (
        f'<div class="bar" data-rack="{escape(rack["rack"])}" data-kind="{key}" '
        f'data-pct="{pct:g}"><div class="fill" style="width:{width:.1f}%;background:{color}">'
        f"</div><span>{escape(label)}</span></div>"
    )


def _table(head: list[str], rows: list[list[str]], numeric: set[int]) -> list[str]:
    """A table of HTML cells; the columns in `numeric` align right (class n)."""
    cells = [[Cell(c, "n") if i in numeric else c for i, c in enumerate(row)] for row in rows]
    return [table(head, cells)]


def _rack_rows(model: dict[str, Any]) -> list[list[str]]:
    warn = model["settings"]["warn_utilization_pct"]
    rows = []
    for rack in model["racks"]:
        largest = ", ".join(f"{c['nodes']} x {c['group']}" for c in rack["largest"])
        rows.append(
            [
                escape(rack["rack"]),
                str(rack["nodes"]),
                _num(rack["peak_kw"]),
                _num(rack["typical_kw"]),
                _bar(rack, "power", warn),
                _bar(rack, "cooling", warn),
                escape(rack["cooling_kind"] or "-"),
                escape(largest),
            ]
        )
    return rows


def render_html(model: dict[str, Any]) -> str:
    totals = model["totals"]
    title = f"{model['cluster']}: capacity"
    parts = [
        f"<h1>{escape(title)}</h1>",
        f"<p>{totals['nodes']} nodes, {escape(_gpus(totals['gpus']))}; "
        f"{_num(totals['peak_kw'], ' kW')} at full load, {_num(totals['typical_kw'], ' kW')} "
        f"typical ({model['settings']['typical_load_pct']:g} % of peak). Figures are estimates "
        "from datasheet board power plus server overhead: see docs/capacity.md.</p>",
        "<h2>Pools</h2>",
    ]
    pool_rows = [
        [
            escape(p["pool"]),
            escape(", ".join(p["classes"]) or "-"),
            str(p["nodes"]),
            escape(_gpus(p["gpus"])),
            _num(p["gpu_memory_gb"] or None),  # none, or not in the catalog (tpu)
            _num(p["bf16_pflops"] or None),
            _num(p["peak_kw"]),
            _num(p["typical_kw"]),
        ]
        for p in model["pools"]
    ]
    head = ["pool", "classes", "nodes", "GPUs", "GPU memory GB", "BF16 PFLOPS", "peak kW"]
    parts += _table([*head, "typical kW"], pool_rows, {2, 4, 5, 6, 7})
    parts.append("<h2>Racks: peak draw against budgets</h2>")
    head = ["rack", "nodes", "peak kW", "typical kW", "power", "cooling", "cooling kind"]
    parts += _table([*head, "largest consumers"], _rack_rows(model), {1, 2, 3})
    if model["teams"]:
        parts.append("<h2>Teams: GPU limit against their pools</h2>")
        team_rows = [
            [
                escape(t["team"]),
                escape(", ".join(t["pools"]) or "-"),
                str(t["pool_gpus"]),
                "-" if t["limit_gpus"] is None else f"{t['limit_gpus']:g}",
                "-" if t["share_pct"] is None else f"{t['share_pct']:g} %",
            ]
            for t in model["teams"]
        ]
        head = ["team", "pools", "pool GPUs", "GPU limit", "share"]
        parts += _table(head, team_rows, {2, 3, 4})
    parts += _findings(model["findings"])
    parts += [
        f"<p>suppressed by the plan: {s['count']} x {escape(s['code'])}: {escape(s['reason'])}</p>"
        for s in model["suppressed"]
    ]
    return page(title, "\n".join(parts), _CSS, CAPACITY_MARK)


def _findings(findings: list[dict[str, Any]]) -> list[str]:
    if not findings:
        return ["<h2>Findings</h2>", "<p>none</p>"]
    out = ["<h2>Findings</h2>", "<ul>"]
    for f in findings:
        where = f"{f['file']}:{f['line']}"
        out.append(
            f'<li class="{escape(f["severity"])}">{escape(where)} '
            f"{escape(f['severity'])}[{escape(f['code'])}] {escape(f['message'])}</li>"
        )
    out.append("</ul>")
    return out
