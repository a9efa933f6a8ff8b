"""An SVG picture of the plan's network tree: core, aggregation, access, racks and nodes."""

from __future__ import annotations

from xml.sax.saxutils import escape

from cluster_plan.contract import ExpandedPlan, Host, Topology

_COL = 150  # width of one rack column
_ROW = 90
_NODE_H = 16
_MAX_NODES_SHOWN = 12  # per rack; more are summarised so big plans stay readable
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


def _switch_columns(
    topo: Topology, columns: list[tuple[str, str]], x_of_rack: dict[str, float]
) -> tuple[dict[str, float], dict[str, float]]:
    """Each access switch above the middle of its racks, each aggregation switch above the
    middle of its access switches."""
    x_of_access: dict[str, float] = {}
    for sw in topo["access"]:
        xs: list[float] = [x_of_rack[r] for s, r in columns if s == sw]
        x_of_access[sw] = sum(xs) / len(xs) if xs else 20
    x_of_agg = {}
    for agg in topo["aggregation"]:
        xs = [x_of_access[sw] for sw, spec in topo["access"].items() if spec["uplink"] == agg]
        x_of_agg[agg] = sum(xs) / len(xs) if xs else 20
    return x_of_access, x_of_agg


def render_svg(expanded: ExpandedPlan) -> str:
    topo = expanded["topology"]
    hosts_by_rack: dict[str, list[Host]] = {}
    for host in expanded["hosts"].values():
        hosts_by_rack.setdefault(host["rack"] or "", []).append(host)
    # one column per rack, in access-switch order
    columns: list[tuple[str, str]] = [
        (sw, rack) for sw, spec in topo["access"].items() for rack in spec["racks"]
    ]
    width = max(len(columns), 1) * _COL + 40
    tallest = max((min(len(v), _MAX_NODES_SHOWN + 1) for v in hosts_by_rack.values()), default=1)
    height = 4 * _ROW + 40 + tallest * (_NODE_H + 2)
    x_of_rack: dict[str, float] = {rack: 20 + i * _COL for i, (_, rack) in enumerate(columns)}
    x_of_access, x_of_agg = _switch_columns(topo, columns, x_of_rack)
    cores = list(topo["core"])
    x_of_core = {
        c: 20 + (i + 0.5) * (width - 40) / max(len(cores), 1) - _COL / 2 + 5
        for i, c in enumerate(cores)
    }
    box_w = _COL - 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        "<style>.sub{font-size:9px;fill:#333}.speed{font-size:9px;fill:#a00}</style>",
        f"<title>{escape(expanded['cluster']['name'])}: network topology</title>",
    ]
    y_core, y_agg, y_acc, y_rack = 20, 20 + _ROW, 20 + 2 * _ROW, 20 + 3 * _ROW
    for agg, agg_spec in topo["aggregation"].items():
        speed = f"{agg_spec['uplink_gbps']:g}G" if agg_spec["uplink_gbps"] else ""
        for core in agg_spec["uplinks"]:
            if core in x_of_core:
                parts += _line(
                    x_of_core[core] + box_w / 2,
                    y_core + 34,
                    x_of_agg[agg] + box_w / 2,
                    y_agg,
                    speed,
                )
    for sw, spec in topo["access"].items():
        speed = f"{spec['uplink_gbps']:g}G" if spec["uplink_gbps"] else ""
        if spec["uplink"] in x_of_agg:
            parts += _line(
                x_of_agg[spec["uplink"]] + box_w / 2,
                y_agg + 34,
                x_of_access[sw] + box_w / 2,
                y_acc,
                speed,
            )
        for rack in spec["racks"]:
            parts += _line(
                x_of_access[sw] + box_w / 2,
                y_acc + 34,
                x_of_rack[rack] + box_w / 2,
                y_rack,
                f"{spec['link_gbps']:g}G/host",
            )
    for core, x in x_of_core.items():
        parts += _box(x, y_core, box_w, 34, core, "#d9d9f3", "core")
    for agg, x in x_of_agg.items():
        parts += _box(x, y_agg, box_w, 34, agg, "#d9e8f3", "aggregation")
    for sw, x in x_of_access.items():
        parts += _box(x, y_acc, box_w, 34, sw, "#e3f3d9", "access")
    for _, rack in columns:
        hosts = hosts_by_rack.get(rack, [])
        x = x_of_rack[rack]
        shown = hosts[:_MAX_NODES_SHOWN] if len(hosts) > _MAX_NODES_SHOWN + 1 else hosts
        rack_h = 34 + (len(shown) + (len(shown) < len(hosts))) * (_NODE_H + 2)
        parts += _box(x, y_rack, box_w, rack_h, f"rack {rack}", "#f7f7f7", f"{len(hosts)} nodes")
        for i, host in enumerate(shown):
            accel = host["accelerators"]
            fill = _COLORS.get(accel["kind"] if accel else None, "#8fa8c8")
            label = host["hostname"] + (f"  {accel['count']}x {accel['model']}" if accel else "")
            y = y_rack + 34 + i * (_NODE_H + 2)
            parts.append(
                f'<rect x="{x + 4}" y="{y}" width="{box_w - 8}" height="{_NODE_H}" '
                f'fill="{fill}" rx="2"/>'
            )
            parts.append(f'<text x="{x + 8}" y="{y + 12}" class="sub">{escape(label[:26])}</text>')
        if len(shown) < len(hosts):
            y = y_rack + 34 + len(shown) * (_NODE_H + 2)
            parts.append(
                f'<text x="{x + 8}" y="{y + 12}" class="sub">... and '
                f"{len(hosts) - len(shown)} more</text>"
            )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
