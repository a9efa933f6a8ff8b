"""An SVG picture of the plan's network tree: core, aggregation, access, racks and nodes, and
each rack's peak draw against its power and cooling budgets.

Racks stand in bands of at most 16, one aggregation pod after another, so a 64-rack plan draws
four rows rather than one row ten metres wide.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from xml.sax.saxutils import escape

from cluster_plan.output_files import svg_mark
from cluster_plan.plan.contract import ExpandedPlan, Host, Topology

GRAPH_MARK = svg_mark("graph")  # `graph -o` replaces only a picture with this mark

_COL = 150  # width of one rack column
_ROW = 90
_NODE_H = 16
_MAX_NODES_SHOWN = 12  # per rack; more are summarised so big plans stay readable
_MAX_NODES_SHOWN_BANDED = 4  # in plans of several bands, where the racks matter, not the hosts
PER_BAND = 16  # racks per band
_BAR_H = 14
_WARN, _OVER, _OK = "#f3c969", "#ef8a7e", "#a8d98a"  # light: the label stays legible on them
_COLORS = {"gpu": "#76b900", "accelerator": "#f0a030", None: "#8fa8c8"}


def _box(x: float, y: float, w: float, h: float, label: str, fill: str, sub: str = "") -> list[str]:
    out = [
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{h:.0f}" rx="4" '
        f'fill="{fill}" stroke="#333"/>',
        f'<text x="{x + w / 2:.0f}" y="{y + 14:.0f}" text-anchor="middle">{escape(label)}</text>',
    ]
    if sub:
        out.append(
            f'<text x="{x + w / 2:.0f}" y="{y + 27:.0f}" text-anchor="middle" '
            f'class="sub">{escape(sub)}</text>'
        )
    return out


def _line(x1: float, y1: float, x2: float, y2: float, label: str = "") -> list[str]:
    out = [f'<line x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" stroke="#555"/>']
    if label:
        out.append(
            f'<text x="{(x1 + x2) / 2 + 4:.0f}" y="{(y1 + y2) / 2:.0f}" '
            f'class="speed">{escape(label)}</text>'
        )
    return out


Column = tuple[str, str]  # (access switch, rack)


def bands(topo: Topology) -> list[list[Column]]:
    """Racks in access-switch order, grouped by aggregation pod, each pod cut into bands of
    at most PER_BAND racks."""
    pods: dict[str, list[Column]] = {}
    for sw, spec in topo["access"].items():
        pods.setdefault(spec["uplink"], []).extend((sw, rack) for rack in spec["racks"])
    columns = [c for pod in pods.values() for c in pod]
    if len(columns) <= PER_BAND:
        return [columns]
    out = []
    for pod in pods.values():
        out += [pod[i : i + PER_BAND] for i in range(0, len(pod), PER_BAND)]
    return out


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 20


def _bar(x: float, y: float, w: float, draw: float, budget: float | None, what: str) -> list[str]:
    """One budget bar: filled by draw/budget (capped at the box), labelled with both."""
    if not budget:
        text = f"{what}: {draw:,.1f} kW, no budget"
        return [f'<text x="{x:.0f}" y="{y + 10:.0f}" class="sub">{text}</text>']
    pct = 100 * draw / budget
    color = _OVER if pct > 100 else _WARN if pct > 80 else _OK
    fill = w * min(pct, 100) / 100
    return [
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{w:.0f}" height="{_BAR_H - 2}" fill="#eee" '
        f'stroke="#999" class="budget" data-kind="{what}" data-pct="{pct:.1f}"/>',
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{fill:.1f}" height="{_BAR_H - 2}" '
        f'fill="{color}" class="draw"/>',
        f'<text x="{x + 3:.0f}" y="{y + 10:.0f}" class="bar">{what} {draw:,.1f}/{budget:,.0f} kW '
        f"({pct:.0f} %)</text>",
    ]


class _Layout:
    """Where each box goes: cores on top, then per band its aggregation switches, access
    switches and racks."""

    def __init__(self, expanded: ExpandedPlan, power: dict[str, Any] | None) -> None:
        self.topo = expanded["topology"]
        self.power = power
        self.hosts_by_rack: dict[str, list[Host]] = {}
        for host in expanded["hosts"].values():
            self.hosts_by_rack.setdefault(host["rack"] or "", []).append(host)
        self.bands = bands(self.topo)
        self.max_shown = _MAX_NODES_SHOWN if len(self.bands) == 1 else _MAX_NODES_SHOWN_BANDED
        self.rack_head = 34 + (2 * _BAR_H + 2 if power is not None else 0)
        widest = max((len(b) for b in self.bands), default=1)
        self.width = max(widest, 1) * _COL + 40
        tallest = max(
            (min(len(v), self.max_shown + 1) for v in self.hosts_by_rack.values()), default=1
        )
        self.band_h = 3 * _ROW + self.rack_head + tallest * (_NODE_H + 2)
        self.height = 20 + _ROW + len(self.bands) * self.band_h

    def band_y(self, i: int) -> tuple[float, float, float]:
        """(aggregation, access, rack) rows of band i."""
        top = 20 + _ROW + i * self.band_h
        return top, top + _ROW, top + 2 * _ROW


def _band_parts(layout: _Layout, i: int, placed: set[str]) -> Iterator[str]:
    topo, box_w = layout.topo, _COL - 10
    band = layout.bands[i]
    y_agg, y_acc, y_rack = layout.band_y(i)
    x_of_rack: dict[str, float] = {rack: 20.0 + j * _COL for j, (_, rack) in enumerate(band)}
    x_of_access, x_of_agg = _switch_columns(topo, band, x_of_rack)
    for sw, x in x_of_access.items():
        uplink = topo["access"][sw]["uplink"]
        speed = topo["access"][sw]["uplink_gbps"]
        if uplink in x_of_agg:
            label = f"{speed:g}G" if speed else ""
            yield from _line(x_of_agg[uplink] + box_w / 2, y_agg + 34, x + box_w / 2, y_acc, label)
        for _, rack in (c for c in band if c[0] == sw):
            label = f"{topo['access'][sw]['link_gbps']:g}G/host"
            yield from _line(x + box_w / 2, y_acc + 34, x_of_rack[rack] + box_w / 2, y_rack, label)
    for agg, x in x_of_agg.items():
        sub = "aggregation" if agg not in placed else "aggregation (continued)"
        yield from _box(x, y_agg, box_w, 34, agg, "#d9e8f3", sub)
        placed.add(agg)
    for sw, x in x_of_access.items():
        yield from _box(x, y_acc, box_w, 34, sw, "#e3f3d9", "access")
    for _, rack in band:
        yield from _rack(layout, rack, x_of_rack[rack], y_rack)


def _rack(layout: _Layout, rack: str, x: float, y: float) -> Iterator[str]:
    box_w = _COL - 10
    hosts = layout.hosts_by_rack.get(rack, [])
    shown = hosts[: layout.max_shown] if len(hosts) > layout.max_shown + 1 else hosts
    rack_h = layout.rack_head + (len(shown) + (len(shown) < len(hosts))) * (_NODE_H + 2)
    yield from _box(x, y, box_w, rack_h, f"rack {rack}", "#f7f7f7", f"{len(hosts)} nodes")
    power = (layout.power or {}).get(rack)
    if layout.power is not None and power is not None:
        for k, key in enumerate(("power", "cooling")):
            yield from _bar(
                x + 4, y + 32 + k * _BAR_H, box_w - 8, power["peak_kw"], power[f"{key}_kw"], key
            )
    top = y + layout.rack_head
    for i, host in enumerate(shown):
        accel = host["accelerators"]
        fill = _COLORS.get(accel["kind"] if accel else None, "#8fa8c8")
        label = host["hostname"] + (f"  {accel['count']}x {accel['model']}" if accel else "")
        row = top + i * (_NODE_H + 2)
        yield (
            f'<rect x="{x + 4}" y="{row}" width="{box_w - 8}" height="{_NODE_H}" '
            f'fill="{fill}" rx="2"/>'
        )
        yield f'<text x="{x + 8}" y="{row + 12}" class="sub">{escape(label[:26])}</text>'
    if len(shown) < len(hosts):
        row = top + len(shown) * (_NODE_H + 2)
        yield (
            f'<text x="{x + 8}" y="{row + 12}" class="sub">... and '
            f"{len(hosts) - len(shown)} more</text>"
        )


def render_svg(expanded: ExpandedPlan, power: dict[str, Any] | None = None) -> str:
    """The picture; ``power`` (rack -> a row of cluster_plan.views.capacity's racks) adds each
    rack's draw against its budgets."""
    layout = _Layout(expanded, power)
    topo, box_w, width = layout.topo, _COL - 10, layout.width
    cores = list(topo["core"])
    x_of_core = {
        c: 20 + (i + 0.5) * (width - 40) / max(len(cores), 1) - _COL / 2 + 5
        for i, c in enumerate(cores)
    }
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{layout.height}" '
        f'viewBox="0 0 {width} {layout.height}" font-family="sans-serif" font-size="11">',
        GRAPH_MARK,
        "<style>.sub{font-size:9px;fill:#333}.speed{font-size:9px;fill:#a00}"
        ".bar{font-size:8px;fill:#111}</style>",
        f"<title>{escape(expanded['cluster']['name'])}: network topology</title>",
    ]
    placed: set[str] = set()
    for i in range(len(layout.bands)):
        parts += _core_links(layout, i, x_of_core)
        parts += _band_parts(layout, i, placed)
    for core, x in x_of_core.items():
        parts += _box(x, 20, box_w, 34, core, "#d9d9f3", "core")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _core_links(layout: _Layout, i: int, x_of_core: dict[str, float]) -> list[str]:
    """Lines from the cores to the aggregation switches of the first band; later bands'
    switches name their cores instead of crossing the bands above."""
    topo, box_w = layout.topo, _COL - 10
    band = layout.bands[i]
    x_of_rack: dict[str, float] = {rack: 20.0 + j * _COL for j, (_, rack) in enumerate(band)}
    _, x_of_agg = _switch_columns(topo, band, x_of_rack)
    y_agg = layout.band_y(i)[0]
    out: list[str] = []
    for agg, x in x_of_agg.items():
        spec = topo["aggregation"][agg]
        speed = f"{spec['uplink_gbps']:g}G" if spec["uplink_gbps"] else ""
        if i == 0:
            for core in spec["uplinks"]:
                if core in x_of_core:
                    out += _line(x_of_core[core] + box_w / 2, 54, x + box_w / 2, y_agg, speed)
        else:
            cores = ", ".join(spec["uplinks"])
            out.append(
                f'<text x="{x + box_w / 2:.0f}" y="{y_agg - 6:.0f}" text-anchor="middle" '
                f'class="speed">to {escape(cores)} {speed}</text>'
            )
    return out


def _switch_columns(
    topo: Topology, columns: list[Column], x_of_rack: dict[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """Each access switch of a band above the middle of its racks, each aggregation switch
    above the middle of its access switches."""
    x_of_access: dict[str, float] = {}
    for sw in dict.fromkeys(s for s, _ in columns):
        x_of_access[sw] = _mean([x_of_rack[r] for s, r in columns if s == sw])
    x_of_agg: dict[str, float] = {}
    uplinks = {topo["access"][sw]["uplink"] for sw in x_of_access}
    for agg in topo["aggregation"]:
        if agg in uplinks:
            xs = [x for sw, x in x_of_access.items() if topo["access"][sw]["uplink"] == agg]
            x_of_agg[agg] = _mean(xs)
    return x_of_access, x_of_agg
