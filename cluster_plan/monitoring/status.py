"""A status page without Grafana: one self-contained HTML page (no script, no external file)
from Prometheus' HTTP API answers — the alerts firing, the scrape targets up and down per node
group and rack, and a GPU and Ceph summary.

`answers` is what `fetch_answers` collects (and `cluster-plan monitoring status --save-json`
keeps): {"source", "time", "alerts", "targets", "queries": {name: answer}}, each answer the
API's own JSON. Every label value and annotation is data and is escaped."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from datetime import UTC, datetime
from html import escape
from typing import Any

from cluster_plan.monitoring import metrics as m
from cluster_plan.monitoring.rules import CEPH_POOL_USED_PCT, THROTTLE_REASONS
from cluster_plan.output_files import html_mark
from cluster_plan.page.shell import page
from cluster_plan.page.table import Row, table

STATUS_MARK = html_mark("monitoring status")  # `monitoring status -o` replaces only such a page

STATUS_QUERIES = {
    "gpu_present": m.GPU_PRESENT.name,
    "gpu_expected": m.GPU_EXPECTED.name,
    "gpu_nvml_up": f"min by (node) ({m.GPU_NVML_UP.name})",
    "gpu_temp_max": f"max by (node) ({m.GPU_TEMPERATURE.name})",
    "gpu_power": f"sum by (node) ({m.GPU_POWER.name})",
    # GPUs with any of the alerting throttle reasons set (not reasons: a GPU has several)
    "gpu_throttled": f"count by (node) (max by (node, gpu) ({m.GPU_THROTTLE.name}{{reason=~"
    + '"'
    + "|".join(THROTTLE_REASONS)
    + '"}) == 1)',
    "ceph_health": f"max({m.CEPH_HEALTH_STATUS.name})",
    "ceph_osds_up": f"sum({m.CEPH_OSD_UP.name})",
    "ceph_osds": f"count({m.CEPH_OSD_UP.name})",
    "ceph_pool_used_pct": CEPH_POOL_USED_PCT,
}
TIMEOUT_S = 30


class AnswerError(ValueError):
    """Answers that are not Prometheus API answers."""


# ---- the shell: asking Prometheus ------------------------------------------------------------


def _get(base: str, path: str, params: dict[str, str] | None = None) -> Any:
    url = base.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:  # http(s): checked
        return json.load(reply)


def _http_url(base: str) -> str:
    if urllib.parse.urlsplit(base).scheme not in ("http", "https"):
        raise AnswerError(f"{base}: not an http(s) URL")
    return base


def fetch_queries(base: str, exprs: list[str], at: float) -> dict[str, Any]:
    """Each expression's /api/v1/query answer at `at`, keyed by the expression."""
    return {
        expr: _get(_http_url(base), "/api/v1/query", {"query": expr, "time": f"{at:.3f}"})
        for expr in exprs
    }


def fetch_answers(
    base: str, at: float | None = None, queries: dict[str, str] | None = None
) -> dict[str, Any]:
    """Ask a Prometheus at `base` (http(s)://host:port) for what the page shows."""
    when = time.time() if at is None else at
    asked = STATUS_QUERIES if queries is None else queries
    answers = fetch_queries(base, list(asked.values()), when)
    return {
        "source": base,
        "time": when,
        "alerts": _get(base, "/api/v1/alerts"),
        "targets": _get(base, "/api/v1/targets", {"state": "active"}),
        "queries": {name: answers[expr] for name, expr in asked.items()},
    }


# ---- the core: answers -> page --------------------------------------------------------------


def _data(answer: Any, what: str) -> Any:
    if not isinstance(answer, dict) or answer.get("status") != "success" or "data" not in answer:
        raise AnswerError(f"{what}: not a successful Prometheus API answer")
    return answer["data"]


def _vector(answers: dict[str, Any], name: str) -> list[tuple[dict[str, str], float]]:
    """A query's instant vector as (labels, value); empty when the query was not asked."""
    answer = answers.get("queries", {}).get(name)
    if answer is None:
        return []
    data = _data(answer, f"query {name}")
    if data.get("resultType") != "vector":
        raise AnswerError(f"query {name}: not an instant vector")
    return [(item["metric"], float(item["value"][1])) for item in data["result"]]


def _by_node(answers: dict[str, Any], name: str) -> dict[str, float]:
    return {labels.get("node", ""): value for labels, value in _vector(answers, name)}


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _first_step(notes: dict[str, str]) -> str:
    """What to do first: the rules' `description` (`runbook` in rule files written before
    the annotation took the mixins' names)."""
    return notes.get("description") or notes.get("runbook", "")


def alerts_html(answers: dict[str, Any]) -> str:
    alerts = _data(answers.get("alerts"), "alerts").get("alerts", [])
    firing = [a for a in alerts if a.get("state") == "firing"]
    if not firing:
        return '<p class="ok">No alert is firing.</p>'
    order = {"critical": 0, "warning": 1}
    firing.sort(
        key=lambda a: (
            order.get(a["labels"].get("severity", ""), 2),
            a["labels"].get("alertname", ""),
            a["labels"].get("node", ""),
        )
    )
    rows = []
    for alert in firing:
        labels, notes = alert.get("labels", {}), alert.get("annotations", {})
        severity = labels.get("severity", "")
        rows.append(
            Row(
                [
                    escape(severity),
                    escape(labels.get("alertname", "")),
                    escape(labels.get("node", "")),
                    escape(notes.get("summary", "")),
                    escape(_first_step(notes)),
                    escape(str(alert.get("activeAt", ""))[:19].replace("T", " ")),
                ],
                "bad" if severity == "critical" else "warn",
            )
        )
    head = ["severity", "alert", "node", "summary", "runbook", "since (UTC)"]
    return table(head, rows)


def _target_counts(answers: dict[str, Any], key: str) -> dict[str, tuple[list[str], list[str]]]:
    """Value of the target label `key` -> (nodes up, nodes not up), node job only."""
    counts: dict[str, tuple[list[str], list[str]]] = defaultdict(lambda: ([], []))
    for target in _data(answers.get("targets"), "targets").get("activeTargets", []):
        labels = target.get("labels", {})
        if labels.get("job") != "node":
            continue
        up, down = counts[labels.get(key, "(none)")]
        (up if target.get("health") == "up" else down).append(labels.get("node", "?"))
    return counts


def targets_html(answers: dict[str, Any]) -> str:
    parts = []
    for key, word in (("node_group", "node group"), ("rack", "rack")):
        rows = []
        for value, (up, down) in sorted(_target_counts(answers, key).items()):
            nodes_down = escape(", ".join(sorted(down))) or "-"
            cells = [escape(value), str(len(up)), str(len(down)), nodes_down]
            rows.append(Row(cells, "bad" if down else "ok"))
        parts.append(f"<h3>per {word}</h3>" + table([word, "up", "down", "nodes down"], rows))
    return "".join(parts)


def _gpu_row(node: str, answers: dict[str, Any], cols: dict[str, dict[str, float]]) -> Any:
    present, expected = cols["gpu_present"].get(node), cols["gpu_expected"].get(node)
    nvml = cols["gpu_nvml_up"].get(node)
    throttled = cols["gpu_throttled"].get(node, 0.0)
    bad = nvml == 0 or (present is not None and expected is not None and present < expected)
    return Row(
        [
            escape(node),
            f"{_num(present)} / {_num(expected)}",
            "yes" if nvml == 1 else ("no" if nvml == 0 else "-"),
            _num(cols["gpu_temp_max"].get(node)),
            _num(cols["gpu_power"].get(node)),
            _num(throttled),
        ],
        "bad" if bad else ("warn" if throttled else "ok"),
    )


def gpu_html(answers: dict[str, Any]) -> str:
    names = ("gpu_present", "gpu_expected", "gpu_nvml_up", "gpu_temp_max", "gpu_power")
    cols = {name: _by_node(answers, name) for name in (*names, "gpu_throttled")}
    nodes = sorted(set(cols["gpu_expected"]) | set(cols["gpu_present"]))
    if not nodes:
        return "<p>No GPU node reports.</p>"
    head = ["node", "GPUs present / planned", "NVML", "max °C", "power W", "GPUs throttled"]
    return table(head, [_gpu_row(node, answers, cols) for node in nodes])


def ceph_html(answers: dict[str, Any]) -> str:
    health = _vector(answers, "ceph_health")
    if not health:
        return "<p>No Ceph manager reports.</p>"
    level = int(health[0][1])
    word = {0: "HEALTH_OK", 1: "HEALTH_WARN", 2: "HEALTH_ERR"}.get(level, f"unknown ({level})")
    up = _vector(answers, "ceph_osds_up")
    total = _vector(answers, "ceph_osds")
    osds = f"{_num(up[0][1] if up else None)} of {_num(total[0][1] if total else None)} up"
    cls = "ok" if level == 0 else ("warn" if level == 1 else "bad")
    rows = [
        Row(
            [escape(labels.get("name", labels.get("pool_id", "?"))), f"{used:.1f} %"],
            "warn" if used >= 85 else "ok",
        )
        for labels, used in sorted(_vector(answers, "ceph_pool_used_pct"), key=lambda x: -x[1])
    ]
    return f'<p class="{cls}">Ceph: {escape(word)}; OSDs {osds}.</p>' + table(
        ["pool", "used"], rows
    )


_CSS = """
body{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:2px solid #ccc}
h3{font-size:14px;margin:12px 0 4px}
table{border-collapse:collapse;margin-bottom:12px}
th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:left;font-size:13px;
vertical-align:top}
th{background:#f0f0f0}
tr.bad td:first-child,p.bad{border-left:6px solid #d9534f;padding-left:8px}
tr.warn td:first-child,p.warn{border-left:6px solid #f0ad4e;padding-left:8px}
tr.ok td:first-child,p.ok{border-left:6px solid #5cb85c;padding-left:8px}
.meta{color:#666;font-size:12px}.big{font-size:16px;font-weight:bold}
"""


def summary_html(answers: dict[str, Any]) -> str:
    """One line first: how many alerts of each severity fire and how many targets are up."""
    alerts = _data(answers.get("alerts"), "alerts").get("alerts", [])
    firing = [a.get("labels", {}).get("severity") for a in alerts if a.get("state") == "firing"]
    targets = [
        t
        for t in _data(answers.get("targets"), "targets").get("activeTargets", [])
        if t.get("labels", {}).get("job") == "node"
    ]
    up = sum(1 for t in targets if t.get("health") == "up")
    critical, warning = firing.count("critical"), firing.count("warning")
    cls = "bad" if critical or up < len(targets) else ("warn" if warning else "ok")
    return (
        f'<p class="{cls} big">{critical} critical and {warning} warning alert(s) firing; '
        f"{up} of {len(targets)} node_exporter targets up.</p>"
    )


def status_html(answers: dict[str, Any]) -> str:
    """The page. AnswerError when a part is not a Prometheus API answer."""
    when = datetime.fromtimestamp(float(answers.get("time", 0)), UTC)
    source = escape(str(answers.get("source", "")))
    parts = [
        ("Alerts firing", alerts_html(answers)),
        ("Scrape targets (node_exporter)", targets_html(answers)),
        ("GPUs", gpu_html(answers)),
        ("Ceph", ceph_html(answers)),
    ]
    sections = "".join(f"<h2>{escape(title)}</h2>{html}" for title, html in parts)
    body = (
        "<h1>Cluster status</h1>"
        f'<p class="meta">From Prometheus at {source}; GPU and Ceph values at '
        f"{when:%Y-%m-%d %H:%M:%S} UTC, alerts and targets as it answered.</p>"
        f"{summary_html(answers)}{sections}"
    )
    return page("Cluster status", body, _CSS, STATUS_MARK)
