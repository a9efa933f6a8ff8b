"""The acceptance report as one self-contained HTML page: heatmaps as inline SVG, no assets."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import Any

from cluster_plan.acceptance.collectives_html import collectives_html
from cluster_plan.acceptance.compare_html import render_comparison
from cluster_plan.output_files import html_mark
from cluster_plan.page.heatmap import BAD, ERRORED, GOOD, UNJUDGED, WARN, heatmap
from cluster_plan.page.shell import bullets, page, verdict
from cluster_plan.page.table import text_table

# `acceptance` and `report` replace only a page with this mark (or an earlier version's title)
REPORT_MARK = html_mark("acceptance report")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:70em}
h1 .pass{color:#2e7d32} h1 .fail{color:#c62828}
table{border-collapse:collapse;margin:1em 0} td,th{border:1px solid #ccc;padding:.25em .6em}
th{background:#f4f4f4;text-align:left} pre{background:#f7f7f7;padding:.6em;overflow:auto}
.legend span{display:inline-block;width:1em;height:1em;vertical-align:middle;margin:0 .3em}
svg text{font-size:11px;font-family:monospace}
"""


def _short(value: float | None) -> str:
    """At most four characters, so the figure fits its cell (n/a: no figure in the report)."""
    if value is None or not math.isfinite(value):
        return "n/a"
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _bandwidth_cells(
    rows: Sequence[Mapping[str, Any]], network: str
) -> dict[tuple[str, str], tuple[str, str, str]]:
    cells = {}
    for row in rows:
        if row["network"] != network:
            continue
        if row["status"] == "error":
            cell = (ERRORED, "err", "")
        else:
            colour = {"fail": BAD, "inconclusive": UNJUDGED}.get(
                row["status"], WARN if row["outlier"] else GOOD
            )
            cell = (colour, _short(row["gbps"]), _cpu_note(row))
        cells[(row["client"], row["server"])] = cell
        cells[(row["server"], row["client"])] = cell
    return cells


def _end_cpu(cpu: Mapping[str, Any] | None) -> str:
    """One end's CPU during a measurement, as the report keeps it (docs/acceptance.md)."""
    if not cpu:
        return "CPU not read"
    parts = []
    if cpu.get("load1") is not None:
        parts.append(f"load {cpu['load1']:g} on {cpu.get('cpus') or '?'} CPUs")
    if cpu.get("busy_pct") is not None:
        parts.append(f"CPUs {cpu['busy_pct']:.0f}% busy")
    if cpu.get("steal_pct"):
        parts.append(f"{cpu['steal_pct']:.0f}% stolen")
    if cpu.get("wait_pct") is not None:
        parts.append(f"iperf3 waited for a CPU {cpu['wait_pct']:.0f}% of the test")
    if cpu.get("iperf3_pct") is not None:
        parts.append(f"iperf3 used {cpu['iperf3_pct']:.0f}% of a CPU")
    bound = " (CPU-bound)" if cpu.get("bound") else ""
    return (", ".join(parts) or "CPU not read") + bound


def _cpu_note(row: Mapping[str, Any]) -> str:
    cpu = row.get("cpu") or {}
    return "; ".join(
        f"{row[end]} ({end}): {_end_cpu(cpu.get(end))}" for end in ("client", "server")
    )


def _cpu_bound_rows(report: Mapping[str, Any]) -> list[str]:
    """The figures taken with an end CPU-bound, and whether the CPU accounts for them."""
    rows = []
    for row in report["bandwidth"]:
        cpu = row.get("cpu") or {}
        if any((cpu.get(end) or {}).get("bound") for end in ("client", "server")):
            rows.append((
                row["network"], f"{row['client']} <-> {row['server']}", _short(row["gbps"]),
                row["status"], _end_cpu(cpu.get("client")), _end_cpu(cpu.get("server")),
            ))  # fmt: skip
    if not rows:
        return []
    return [
        "<h2>CPU-bound measurements</h2>",
        "<p>Figures taken while iperf3 at one end used most of a CPU or waited for one. "
        "<b>inconclusive</b>: below the floor, and the CPU accounts for the shortfall, so "
        "the figure says nothing about the link (a warning, not a fault).</p>",
        text_table(["network", "pair", "Gb/s", "verdict", "client CPU", "server CPU"], rows),
    ]


def _latency_cells(
    rows: Sequence[Mapping[str, Any]], network: str
) -> dict[tuple[str, str], tuple[str, str]]:
    cells = {}
    for row in rows:
        if row["network"] != network:
            continue
        if row["error"]:
            cells[(row["source"], row["target"])] = (ERRORED, "err")
            continue
        bad = row["latency_status"] == "fail" or row["loss_status"] == "fail"
        median = row["rtt_median_ms"]
        text = "lost" if median is None else _short(median)
        cells[(row["source"], row["target"])] = (BAD if bad else GOOD, text)
    return cells


def _raw_outputs(report: Mapping[str, Any]) -> str:
    parts = []
    sections: list[tuple[str, Callable[[Mapping[str, Any]], str]]] = [
        ("bandwidth", lambda r: f"iperf3 {r['client']} -> {r['server']}"),
        ("probes", lambda r: f"fping {r['source']} -> {r['target']}"),
        ("mtu", lambda r: f"MTU {r['source']} -> {r['target']}"),
    ]
    for key, label in sections:
        for row in report[key]:
            for attempt in (row, row.get("first_attempt") or {}):
                if attempt.get("raw"):
                    parts.append(
                        f"<details><summary>{escape(row['network'])}: {escape(label(row))}: "
                        f"{escape(attempt.get('error') or 'failed')}</summary>"
                        f"<pre>{escape(attempt['raw'])}</pre></details>"
                    )
    return "".join(parts) or "<p>None.</p>"


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def _storage(storage: Mapping[str, Any]) -> list[str]:
    """The storage section: verdict, health, OSDs, PGs and the rados bench figures."""
    osds, pgs, bench = storage["osds"], storage["pgs"], storage["bench"]

    def figure(run: Mapping[str, Any]) -> str:
        if run["mb_s"] is None:
            return f"failed: {run['error']}"
        return (
            f"{_figure(run['mb_s'])} MB/s, {_figure(run['iops'])} IOPS, "
            f"{_figure(run['latency_s'])} s mean latency"
        )

    checks = ", ".join(storage["health_checks"])
    rows = [
        ("health", storage["health"] + (f" ({checks})" if checks else "")),
        ("OSDs up / in / total (planned)",
         f"{osds['up']} / {osds['in']} / {osds['total']} ({osds['planned']})"),
        ("placement groups active+clean", f"{pgs['active_clean']} of {pgs['total']}"),
        (f"rados bench write ({bench['seconds']} s, {bench['threads']} threads, "
         f"{bench['object_size'] // 2**20} MiB objects, pool {bench['pool']})",
         figure(bench["write"])),
        ("rados bench sequential read", figure(bench["read"])),
    ]  # fmt: skip
    return [
        f"<h2>Storage (Ceph, from {escape(storage['host'])}) {verdict(storage['passed'])}</h2>",
        text_table(["check", "result"], rows),
        bullets(storage["problems"]),
    ]


def render_html(report: Mapping[str, Any]) -> str:
    c = report["criteria"]
    findings = report["findings"]
    body = [
        f"<h1>Network acceptance: {escape(report['cluster'])} {verdict(report['passed'])}</h1>",
        f"<p>Generated {escape(report['generated_at'])}. Plan thresholds: at least "
        f"{c['min_gbps']:g} Gb/s per pair, median round trip at most {c['max_latency_ms']:g} ms, "
        f"loss at most {c['max_loss_pct']:g}% ({c['probes']} probes per direction), "
        f"{c['duration_s']:g} s iperf3 tests. Bandwidth is shown in plan units "
        f"(measured / rate scale {c['rate_scale']:g}).</p>",
        "<h2>Faults</h2>",
        text_table(
            ["node", "cause", "all kinds", "network"],
            [
                (n["node"], n["kind"], ", ".join(n["kinds"]), n["network"])
                for n in report["nodes_at_fault"]
            ],
        )
        if report["nodes_at_fault"]
        else "<p>No node at fault.</p>",
        "<h2>Findings</h2>",
        text_table(
            ["severity", "kind", "where", "network", "message", "explained by"],
            [
                (
                    f["severity"],
                    f["kind"],
                    f["node"] or " <-> ".join(f["pairs"][0]),
                    f["network"],
                    f["message"],
                    f["explained_by"],
                )
                for f in findings
            ],
        )
        if findings
        else "<p>None.</p>",
    ]
    legend = (
        '<p class="legend">'
        f'<span style="background:{GOOD}"></span>meets the plan'
        f'<span style="background:{WARN}"></span>outlier'
        f'<span style="background:{BAD}"></span>fails the plan'
        f'<span style="background:{UNJUDGED}"></span>inconclusive (CPU-bound)'
        f'<span style="background:{ERRORED}"></span>measurement failed</p>'
    )
    for network in report["networks"]:
        nodes = [n["name"] for n in network["nodes"]]
        name = network["name"]
        body += [
            f"<h2>Network {escape(name)} (MTU {network['mtu']})</h2>",
            legend,
            "<h3>Bandwidth, Gb/s (plan units)</h3>",
            heatmap(nodes, _bandwidth_cells(report["bandwidth"], name), f"bandwidth {name}"),
            "<h3>Median round trip, ms (row pings column; red: over the latency limit or "
            "losing more probes than the plan allows)</h3>",
            heatmap(nodes, _latency_cells(report["probes"], name), f"latency {name}"),
        ]
    body += _cpu_bound_rows(report)
    if report.get("storage"):
        body += _storage(report["storage"])
    if report.get("collectives"):
        body += collectives_html(report["collectives"])
    body += render_comparison(report)
    body += ["<h2>Raw output of failed measurements</h2>", _raw_outputs(report)]
    timing = report.get("timing") or {}
    if timing:
        body += ["<h2>Timing</h2>", text_table(["phase", "value"], sorted(timing.items()))]
    return page(f"Network acceptance: {report['cluster']}", "".join(body), _STYLE, REPORT_MARK)
