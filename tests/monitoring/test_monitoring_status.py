"""The dashboards' shape and plan thresholds, and the status page and dashboard view from
Prometheus API answers written here (no server: test_monitoring_dashboards.py runs the real
one): hostile label values stay text, and answers of the wrong shape are a clear exit 2."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.api import load_expanded
from cluster_plan.cli.app import main
from cluster_plan.monitoring.board_view import board_html
from cluster_plan.monitoring.dashboards import dashboards
from cluster_plan.monitoring.grafana import panel_exprs
from cluster_plan.monitoring.status import STATUS_QUERIES, AnswerError, status_html

ROOT = Path(__file__).resolve().parents[2]
H100 = ROOT / "inventory" / "examples" / "slurm-h100.yml"
EVIL = '"><img src=x onerror=alert(1)><script>x</script>&'


@pytest.fixture(scope="module")
def h100() -> dict[str, dict[str, Any]]:
    return dashboards(load_expanded(H100))


def test_every_dashboard_is_importable_grafana_json(h100):
    assert sorted(h100) == [
        "group-gpu.json",
        "group-head.json",
        "node.json",
        "overview.json",
        "pool-gpu.json",
        "rack-a01.json",
    ]
    uids = [b["uid"] for b in h100.values()]
    assert len(set(uids)) == len(uids) and all(len(u) <= 40 for u in uids)
    for board in h100.values():
        ids = [p["id"] for p in board["panels"]]
        assert len(set(ids)) == len(ids)
        for panel in board["panels"]:
            if panel["type"] != "row":
                assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
                assert panel["targets"] and all(t["expr"] for t in panel["targets"])
        names = [v["name"] for v in board["templating"]["list"]]
        assert names == (["datasource", "node"] if board is h100["node.json"] else ["datasource"])


def test_panels_carry_the_plan_s_thresholds(h100):
    """slurm-h100, read by hand: 8 H100 per GPU node, 100 Gb/s ports, MTU 9000 on storage,
    83 °C, backups every 24 h + 2."""
    panels = {p["title"]: p for p in h100["overview.json"]["panels"]}

    def steps(title: str) -> list[tuple[str, float | None]]:
        found = panels[title]["fieldConfig"]["defaults"]["thresholds"]["steps"]
        return [(s["color"], s["value"]) for s in found]

    assert steps("storage link speed (plan 100 Gb/s)") == [("red", None), ("green", 100.0)]
    assert steps("storage MTU (plan 9000)") == [("red", None), ("green", 9000), ("red", 9001)]
    assert steps("GPU temperature (plan limit 83 °C)") == [("green", None), ("red", 83.0)]
    assert steps("Age of each node's last backup (plan: 26 h)")[1] == ("orange", 26 * 3600)
    node = dict(panel_exprs(h100["node.json"]))
    assert 'node="$node"' in node["GPU temperature (plan limit 83 °C)"]
    rack = dict(panel_exprs(h100["rack-a01.json"]))
    assert rack["GPU power per node"] == 'sum by (node) (cluster_plan_gpu_power_watts{rack="a01"})'
    pool = dict(panel_exprs(h100["pool-gpu.json"]))
    assert '{job="node",pool="gpu"}' in pool["Slurm node states"]  # joined on the nodes' up


def vector(*series: tuple[dict[str, str], float]) -> dict[str, Any]:
    result = [{"metric": m, "value": [1.0, str(v)]} for m, v in series]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


def hostile_answers() -> dict[str, Any]:
    alert = {
        "labels": {"alertname": EVIL, "severity": "critical", "node": EVIL},
        "annotations": {"summary": EVIL, "runbook": EVIL},
        "state": "firing",
        "activeAt": "2026-12-02T18:00:00Z",
    }
    target = {"labels": {"job": "node", "node": EVIL, "node_group": EVIL, "rack": EVIL}}
    queries = {name: vector() for name in STATUS_QUERIES}
    queries["gpu_expected"] = vector(({"node": EVIL}, 8))
    queries["ceph_health"] = vector(({}, 0))
    queries["ceph_pool_used_pct"] = vector(({"name": EVIL}, 12.5))
    return {
        "source": EVIL,
        "time": 0,
        "alerts": {"status": "success", "data": {"alerts": [alert]}},
        "targets": {
            "status": "success",
            "data": {"activeTargets": [{**target, "health": "down"}]},
        },
        "queries": queries,
    }


def test_hostile_label_values_are_text_on_the_status_page():
    html = status_html(hostile_answers())
    escaped = "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;x&lt;/script&gt;&amp;"
    assert html.count(escaped) >= 8  # source, alert, node, summary, runbook, targets, GPU, pool
    assert "<img" not in html and "<script" not in html
    assert "1 critical and 0 warning alert(s) firing; 0 of 1 node_exporter targets up" in html


def test_hostile_label_values_are_text_in_a_dashboard_view(h100):
    board = h100["node.json"]
    results = {
        expr.replace("$node", EVIL): vector(({"node": EVIL, "gpu": EVIL, "device": EVIL}, 1))
        for _, expr in panel_exprs(board)
    }
    html = board_html(board, results, EVIL, "now")
    assert "<img" not in html and "<script" not in html
    assert "no data" not in html


@pytest.mark.parametrize(
    "document",
    [
        "not json",
        json.dumps({"alerts": {"status": "error", "error": "boom"}}),
        json.dumps([1, 2]),
    ],
)
def test_answers_that_are_not_prometheus_s_exit_2_with_the_file(tmp_path, capsys, document):
    path = tmp_path / "answers.json"
    path.write_text(document)
    assert main(["monitoring", "status", "--from-json", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "Traceback" not in err


def test_a_missing_file_or_a_non_http_url_exits_2(tmp_path, capsys):
    assert main(["monitoring", "status", "--from-json", str(tmp_path / "none.json")]) == 2
    assert "none.json" in capsys.readouterr().err
    assert main(["monitoring", "status", "--url", "file:///etc/passwd"]) == 2
    assert "not an http(s) URL" in capsys.readouterr().err


def test_a_failed_query_answer_is_refused():
    answers = hostile_answers()
    answers["queries"]["ceph_health"] = {"status": "error", "error": "bad query"}
    with pytest.raises(AnswerError, match="ceph_health"):
        status_html(answers)


def test_a_directory_or_a_fifo_is_refused_as_answers(tmp_path, capsys):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (tmp_path, fifo):
        assert main(["monitoring", "status", "--from-json", str(path)]) == 2
        assert str(path) in capsys.readouterr().err


def test_the_per_node_dashboard_needs_a_node(tmp_path, capsys, h100):
    board = tmp_path / "node.json"
    board.write_text(json.dumps(h100["node.json"]))
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"time": 0, "panels": {}}))
    argv = ["monitoring", "status", "--from-json", str(answers), "--dashboard", str(board)]
    assert main(argv) == 2
    assert "name the node with --node" in capsys.readouterr().err


def test_a_dashboard_view_lists_series_in_natural_order(h100):
    board = h100["overview.json"]
    results = {
        expr: vector(({"node": "gpu10"}, 1), ({"node": "gpu2"}, 1), ({"node": "cpu1"}, 1))
        for _, expr in panel_exprs(board)
    }
    html = board_html(board, results, None, "now")
    section = html[html.index("<h3>GPU power per node</h3>") :]
    assert section.index("<td>cpu1</td>") < section.index("<td>gpu2</td>")
    assert section.index("<td>gpu2</td>") < section.index("<td>gpu10</td>")


def test_the_page_and_saved_answers_replace_only_their_own_files(tmp_path, capsys):
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(hostile_answers()))
    page, saved = tmp_path / "status.html", tmp_path / "saved.json"
    argv = ["monitoring", "status", "--from-json", str(answers), "-o", str(page)]
    assert main(argv) == 0
    assert main(argv) == 0  # its own page again
    mine = tmp_path / "notes.txt"
    mine.write_text("mine\n")
    assert main(["monitoring", "status", "--from-json", str(answers), "-o", str(mine)]) == 2
    assert "did not write; left as it is" in capsys.readouterr().err
    assert mine.read_text() == "mine\n"
    saved.write_text("mine\n")
    argv = ["monitoring", "status", "--url", "http://127.0.0.1:9", "--save-json", str(saved)]
    assert main(argv) == 2  # refused before Prometheus is asked
    assert f"{saved}: a file that `cluster-plan monitoring status` did not write" in (
        capsys.readouterr().err
    )
    assert saved.read_text() == "mine\n"


def test_answers_with_a_number_json_cannot_hold_are_refused(tmp_path, capsys):
    answers = hostile_answers()
    answers["time"] = "TIME"
    path = tmp_path / "answers.json"
    path.write_text(json.dumps(answers).replace('"TIME"', "NaN"))
    assert main(["monitoring", "status", "--from-json", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: not Prometheus API answers: $.time is NaN" in err
