"""The report's collectives and training sections as HTML: per pool, a chart of bus bandwidth
against message size (log scale, as nccl-tests' users plot it) with the plan's floor, the
figures, and the training job's loss curve and weights check. Inline SVG, no scripts."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from cluster_plan.page.shell import bullets, verdict
from cluster_plan.page.table import table

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 260, 64, 16, 16, 44
LINE, FLOOR, FAIL = "#1f6fb2", "#c0392b", "#c0392b"


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def _frame(
    title: str, x_label: str, y_label: str, y_top: float, ticks_x: Sequence[tuple[float, str]]
) -> list[str]:
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{escape(title)}" '
        f'width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" class="chart">',
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="#fff" '
        'stroke="#999"/>',
    ]
    for i in range(5):  # y grid: 0 .. y_top
        value = y_top * i / 4
        y = TOP + plot_h - plot_h * i / 4
        parts.append(
            f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_w}" y2="{y:.1f}" stroke="#eee"/>'
        )
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{value:.3g}</text>')
    for x, label in ticks_x:
        parts.append(
            f'<text x="{x:.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{escape(label)}</text>'
        )
    parts.append(
        f'<text x="{LEFT + plot_w / 2:.1f}" y="{HEIGHT - 6}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    parts.append(
        f'<text x="14" y="{TOP + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {TOP + plot_h / 2:.1f})">{escape(y_label)}</text>'
    )
    return parts


def busbw_chart(pool: Mapping[str, Any]) -> str:
    """Bus bandwidth (plan GB/s) against message size, with the floor as a dashed line."""
    rows = pool["sizes"]
    if not rows:
        return "<p>No figures: the sweep did not run.</p>"
    floor = float(pool["floor_GBps"])
    top = max([r["busbw_GBps"] for r in rows] + [floor]) * 1.15 or 1.0
    lo, hi = math.log2(rows[0]["bytes"]), math.log2(rows[-1]["bytes"])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def x(size: int) -> float:
        return LEFT + (plot_w * (math.log2(size) - lo) / (hi - lo) if hi > lo else plot_w / 2)

    def y(value: float) -> float:
        return TOP + plot_h - plot_h * value / top

    ticks = [(x(r["bytes"]), _size(r["bytes"])) for r in rows]
    parts = _frame(f"bus bandwidth of pool {pool['pool']}", "message size",
                   "bus bandwidth, GB/s (plan units)", top, ticks)  # fmt: skip
    fy = y(floor)
    parts.append(
        f'<line x1="{LEFT}" y1="{fy:.1f}" x2="{LEFT + plot_w}" y2="{fy:.1f}" stroke="{FLOOR}" '
        f'stroke-dasharray="6 4"/><text x="{LEFT + plot_w - 4}" y="{fy - 5:.1f}" '
        f'text-anchor="end" font-size="11" fill="{FLOOR}">floor {floor:g} GB/s</text>'
    )
    points = " ".join(f"{x(r['bytes']):.1f},{y(r['busbw_GBps']):.1f}" for r in rows)
    parts.append(f'<polyline points="{points}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    for r in rows:
        colour = FAIL if r is rows[-1] and r["busbw_GBps"] < floor else LINE
        parts.append(
            f'<circle cx="{x(r["bytes"]):.1f}" cy="{y(r["busbw_GBps"]):.1f}" r="4" '
            f'fill="{colour}"><title>{_size(r["bytes"])}: {r["busbw_GBps"]:g} GB/s</title></circle>'
        )
    parts.append("</svg>")
    return "".join(parts)


def loss_chart(job: Mapping[str, Any]) -> str:
    """The training loss per step."""
    losses = [float(v) for v in job["losses"]]
    if len(losses) < 2:
        return "<p>No loss curve.</p>"
    top = max(losses) * 1.1 or 1.0
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    last = len(losses) - 1
    ticks = [(LEFT + plot_w * i / 4, str(round(last * i / 4))) for i in range(5)]
    parts = _frame(f"training loss of pool {job['pool']}", "step", "loss (mean over ranks)",
                   top, ticks)  # fmt: skip
    points = " ".join(
        f"{LEFT + plot_w * i / last:.1f},{TOP + plot_h - plot_h * v / top:.1f}"
        for i, v in enumerate(losses)
    )
    parts.append(f'<polyline points="{points}" fill="none" stroke="{LINE}" stroke-width="2"/>')
    parts.append("</svg>")
    return "".join(parts)


def _rows_table(rows: Sequence[Mapping[str, Any]]) -> str:
    head = ("size", "time, µs", "algbw, GB/s", "busbw, GB/s")
    return table(
        head,
        [
            [_size(r["bytes"]), f"{r['time_us']:g}", f"{r['algbw_GBps']:g}", f"{r['busbw_GBps']:g}"]
            for r in rows
        ],
    )


def _intra_text(intra: Mapping[str, Any]) -> str:
    """The intra-node figures per node (failing ones in bold), or why there are none."""
    if not intra.get("measured"):
        return escape(str(intra.get("reason")))
    floor = intra.get("floor_GBps")
    figures = []
    for node in intra.get("nodes") or []:
        text = escape(node["error"] or f"{node['busbw_GBps']:g} GB/s")
        text = f"{escape(node['node'])} {text}"
        figures.append(text if node["passed"] else f"<b>{text}</b>")
    against = f"floor {floor:g} GB/s" if floor is not None else escape(str(intra.get("reason")))
    return f"NCCL within each node ({against}): " + ", ".join(figures)


def collectives_html(section: Mapping[str, Any]) -> list[str]:
    """The collectives and training sections of the HTML report."""
    if section.get("scheduler") == "kubernetes":
        parts = [
            f"<h2>Training through Kubernetes {verdict(section['passed'])}</h2>",
            "<p>The plan's training Job, applied through the API server: one pod per node of "
            "the training class, DistributedDataParallel across them.</p>",
        ]
    else:
        parts = [
            f"<h2>Collectives (job network {escape(section['network'])}) "
            f"{verdict(section['passed'])}</h2>",
            "<p>All-reduce across each pool's nodes through Slurm; bus bandwidth = algbw x "
            "2(n-1)/n (nccl-tests), in plan units (measured / rate scale "
            f"{section['rate_scale']:g}). The floor is {section['min_link_fraction']:g} of the "
            "slowest link the traffic crosses.</p>",
        ]
    for pool in section["pools"]:
        busbw = "n/a" if pool["busbw_GBps"] is None else f"{pool['busbw_GBps']:g} GB/s"
        named = ", ".join(pool["suspects"])
        parts += [
            f"<h3>Pool {escape(pool['pool'])} ({escape(pool['backend'])}, {pool['ranks']} ranks on "
            f"{escape(', '.join(pool['nodes']))}, partition {escape(pool['partition'])}) "
            f"{verdict(pool['passed'])}</h3>",
            f"<p>Largest message: {busbw} against the floor {pool['floor_GBps']:g} GB/s "
            f"({pool['link_gbps']:g} Gb/s links)"
            + (
                f"; slow: <b>{escape(named)}</b> (by {escape(str(pool['localised_by']))})"
                if named
                else ""
            )
            + f". Intra-node: {_intra_text(pool['intra_node'])}.</p>",
            busbw_chart(pool),
            _rows_table(pool["sizes"]),
        ]
        if pool["error"]:
            parts.append(f"<pre>{escape(pool['error'])}</pre>")
    for job in section["training"]:
        digests = sorted(set(job["weights_sha256"]))
        parts += [
            f"<h3>Training on pool {escape(job['pool'])} (job {escape(str(job['job']))}) "
            f"{verdict(job['passed'])}</h3>",
            f"<p>DistributedDataParallel on {job['ranks']} ranks "
            f"({escape(', '.join(job['hosts']))}), {job['steps']} steps: loss "
            f"{job['first_loss']} -> {job['last_loss']}; final weights "
            f"{'identical on every rank' if job['identical_weights'] else 'DIFFER between ranks'}"
            f" ({escape(', '.join(d[:12] for d in digests))}).</p>",
            loss_chart(job),
        ]
    for skipped in section["skipped"]:
        parts.append(
            f"<p>Pool {escape(skipped['pool'])} not tested: {escape(skipped['reason'])}.</p>"
        )
    if section["problems"]:
        parts.append(bullets(section["problems"]))
    return parts
