"""Dashboards as Grafana's JSON model (Grafana is not in Debian 12: a user who runs one
imports these files): a row per section, its panels two to a line, every query through the
`datasource` variable, and the per-node dashboard's `node` variable."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from cluster_plan.monitoring import metrics as m
from cluster_plan.monitoring.panels import Panel, Section
from cluster_plan.plan.contract import ExpandedPlan

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
NODE_VARIABLE = "$node"
SCHEMA_VERSION = 36  # Grafana 9.x; later versions migrate it on import
NODES_QUERY = f'label_values({m.UP.name}{{job="node"}}, node)'  # the `node` variable's


def _uid(cluster: str, kind: str, name: str) -> str:
    """Grafana's uid: at most 40 characters, stable for a plan."""
    uid = f"cp-{cluster}-{kind}-{name}"
    if len(uid) <= 40 and re.fullmatch(r"[A-Za-z0-9_-]+", uid):
        return uid
    return "cp-" + hashlib.sha256(uid.encode()).hexdigest()[:32]


def _panel_json(panel: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    return {
        "id": pid,
        "type": panel.kind,
        "title": panel.title,
        "description": panel.description,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": e, "legendFormat": lg}
            for i, (e, lg) in enumerate(panel.exprs)
        ],
        "fieldConfig": {
            "defaults": {
                "unit": panel.unit,
                "thresholds": {
                    "mode": "absolute",
                    "steps": [{"color": c, "value": v} for c, v in panel.steps],
                },
                "color": {"mode": "thresholds" if panel.kind == "stat" else "palette-classic"},
                "custom": {} if panel.kind == "stat" else {"thresholdsStyle": {"mode": "line"}},
            },
            "overrides": [],
        },
        "options": {"legend": {"displayMode": "table", "placement": "right"}}
        if panel.kind == "timeseries"
        else {"reduceOptions": {"calcs": ["lastNotNull"]}, "colorMode": "background"},
    }


def _variables(with_node: bool) -> list[dict[str, Any]]:
    variables: list[dict[str, Any]] = [
        {"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"}
    ]
    if with_node:
        variables.append(
            {
                "name": "node",
                "label": "Node",
                "type": "query",
                "datasource": DATASOURCE,
                "query": {"query": NODES_QUERY, "refId": "node"},
                "definition": NODES_QUERY,
                "refresh": 2,
                "sort": 1,
            }
        )
    return variables


def dashboard(
    plan: ExpandedPlan, kind: str, name: str, title: str, sections: list[Section]
) -> dict[str, Any]:
    """Grafana's dashboard JSON: a row per section, its panels two to a line."""
    cluster = plan["cluster"]["name"]
    panels: list[dict[str, Any]] = []
    y = 0
    pid = 1
    for section in sections:
        panels.append(
            {
                "id": pid,
                "type": "row",
                "title": section.title,
                "collapsed": False,
                "panels": [],
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
            }
        )
        pid, y = pid + 1, y + 1
        for i, panel in enumerate(section.panels):
            panels.append(_panel_json(panel, pid, 12 * (i % 2), y + 8 * (i // 2)))
            pid += 1
        y += 8 * ((len(section.panels) + 1) // 2)
    return {
        "uid": _uid(cluster, kind, name),
        "title": f"{cluster}: {title}",
        "tags": ["cluster-plan", cluster, kind],
        "timezone": "browser",
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "refresh": "1m",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": _variables(kind == "node")},
        "panels": panels,
    }


def panel_exprs(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every query of a dashboard."""
    return [
        (panel["title"], target["expr"])
        for panel in board["panels"]
        for target in panel.get("targets", [])
    ]
