"""Every panel of every dashboard rendered from the lab plan, asked of a real Prometheus 2.42:
its TSDB built with `promtool tsdb create-blocks-from openmetrics` from the fixture series of
lab_series.py, the server started with the rendered prometheus.yml and rules on 127.0.0.1
inside a private network namespace. Each query must answer at least one series at the
series' time; a query with a typo answers none, and the check says so. The same server's
answers make the status page, which a headless Chromium then draws.

prometheus, promtool, unshare and ip are required: a missing one fails the test with the
package to install (Makefile APT_PACKAGES), never a silent skip."""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import lab_series
import pytest
import yaml

from cluster_plan.cli.app import main
from cluster_plan.monitoring.grafana import NODE_VARIABLE, panel_exprs

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
NODE = "gpu02"  # the per-node dashboard's variable, as a user would pick it


def required(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.fail(f"{tool} is not installed: apt-get install {package} (make deps)")
    return path


def boards(rendered: Path) -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text()) for p in sorted((rendered / "dashboards").iterdir())}


def queries_of(board: dict[str, Any]) -> list[tuple[str, str]]:
    return [(t, e.replace(NODE_VARIABLE, NODE)) for t, e in panel_exprs(board)]


def typo(expr: str) -> str:
    """The expression with its first metric name misspelt (not a grouping label: a typo there
    still answers series, which only a look at the panel shows)."""
    name = r"(?<!by \()(?<!on \()(?<!left \()\b((?:cluster_plan|node|ceph)_[a-z_]+)\b"
    return re.sub(name, r"\1s", expr, count=1)


def without_data(results: dict[str, Any], queries: list[tuple[str, str]]) -> list[str]:
    """The queries that failed or answered no series."""
    bad = []
    for title, expr in queries:
        answer = results[expr]
        if answer.get("status") != "success" or not answer["data"]["result"]:
            bad.append(f"{title}: {expr}: {answer.get('error') or 'no series'}")
    return bad


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> dict[str, Any]:
    prometheus = required("prometheus", "prometheus")
    promtool = required("promtool", "prometheus")
    required("unshare", "util-linux")
    required("ip", "iproute2")
    if os.geteuid() != 0:
        pytest.fail("unshare -n needs root: run the monitoring tests as root, as CI does")
    work = tmp_path_factory.mktemp("prometheus")
    rendered = work / "rendered"
    assert main(["monitoring", "render", str(LAB), "-o", str(rendered)]) == 0
    # evaluate and scrape each second, so the test need not wait a rendered interval
    config = yaml.safe_load((rendered / "prometheus.yml").read_text())
    config["global"].update(scrape_interval="1s", evaluation_interval="1s")
    (rendered / "prometheus.yml").write_text(yaml.safe_dump(config))
    end = int(time.time()) - 5
    (work / "series.om").write_text(lab_series.openmetrics(rendered, end))
    data = work / "data"
    built = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(work / "series.om"), str(data)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    all_boards = boards(rendered)
    exprs = sorted({e for b in all_boards.values() for _, e in queries_of(b)})
    (work / "queries.json").write_text(json.dumps(exprs + [typo(e) for e in exprs]))
    out = work / "answers.json"
    script = 'ip link set lo up && exec "$0" "$@"'
    done = subprocess.run(
        [
            *("unshare", "-n", "--", "sh", "-c", script),
            *(sys.executable, str(HERE / "prometheus_in_netns.py")),
            *(str(rendered), str(data), str(work / "queries.json"), str(end), str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "PATH": f"{Path(prometheus).parent}:{os.environ.get('PATH', '')}"},
    )
    log = Path(str(out) + ".log")
    assert done.returncode == 0, done.stderr + (log.read_text()[-3000:] if log.exists() else "")
    answers = json.loads(out.read_text())
    answers["cli_page"] = Path(str(out) + ".html").read_text()
    answers["cli_answers"] = json.loads(Path(str(out) + ".cli.json").read_text())
    return {"work": work, "rendered": rendered, "boards": all_boards, "end": end, **answers}


def test_the_plan_gives_every_dashboard(live):
    names = set(live["boards"])
    assert {"overview.json", "node.json", "rack-r1.json", "rack-r2.json"} <= names
    assert {"pool-gpu.json", "pool-cpu.json", "pool-accel.json"} <= names
    assert {f"group-{g}.json" for g in ("head", "gpu", "infer", "cpu", "stor", "osd")} <= names


def test_every_panel_query_returns_data_from_a_real_prometheus(live):
    failures = []
    for name, board in live["boards"].items():
        failures += [f"{name}: {line}" for line in without_data(live["queries"], queries_of(board))]
    assert failures == []
    assert sum(len(queries_of(b)) for b in live["boards"].values()) > 100


def test_a_panel_with_a_typo_fails_the_check(live):
    board = live["boards"]["overview.json"]
    misspelt = [(t, typo(e)) for t, e in queries_of(board) if typo(e) != e]
    assert len(misspelt) > 20
    assert len(without_data(live["queries"], misspelt)) == len(misspelt)


def test_the_panels_show_the_fixture_s_faults(live):
    """Values, not only presence: the plan's thresholds meet the fixture's faults."""

    def values(expr: str) -> dict[str, float]:
        result = live["queries"][expr]["data"]["result"]
        return {r["metric"].get("node", ""): float(r["value"][1]) for r in result}

    overview = dict(queries_of(live["boards"]["overview.json"]))
    exprs = {title: expr for title, expr in overview.items()}
    speed = exprs["compute link speed (plan 10 Gb/s)"]
    assert values(speed)["gpu01"] == pytest.approx(1.0)  # 1 of the plan's 10 Gb/s
    assert values(exprs["GPU temperature (plan limit 85 °C)"])["gpu02"] == 91.0
    node_board = queries_of(live["boards"]["node.json"])
    present = [e for t, e in node_board if e.startswith("cluster_plan_gpu_present")]
    assert values(present[0]) == {NODE: 1.0}
    missing = dict(node_board)["GPUs missing against the plan"]
    assert values(missing) == {NODE: 1.0}
    states = dict(queries_of(live["boards"]["overview.json"]))["Slurm node states"]
    result = live["queries"][states]["data"]["result"]
    counts = {r["metric"]["state"]: float(r["value"][1]) for r in result}
    assert counts == {"mixed": 2.0, "idle": 1.0, "drained": 1.0}
    # rack r2's Slurm nodes are gpu02, cpu01 and infer01, though the controller (head01, in
    # r1) writes their series: the join on `up` gives each node its own rack
    states = dict(queries_of(live["boards"]["rack-r2.json"]))["Slurm node states"]
    result = live["queries"][states]["data"]["result"]
    counts = {r["metric"]["state"]: float(r["value"][1]) for r in result}
    assert counts == {"mixed": 1.0, "idle": 1.0, "drained": 1.0}


# ---- the status page, from the same server's answers -----------------------------------------


@pytest.fixture(scope="module")
def status_page(live) -> Path:
    answers = live["work"] / "status.json"
    answers.write_text(json.dumps(live["status"]))
    page = live["work"] / "status.html"
    assert main(["monitoring", "status", "--from-json", str(answers), "-o", str(page)]) == 0
    return page


def test_the_status_page_shows_alerts_targets_gpus_and_ceph(status_page):
    html = status_page.read_text()
    for alert in ("AcceptanceFailed", "BackupDrillFailed", "GpuCriticalXid"):
        assert alert in html
    # the hostile node label of a drill is text, never markup
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&lt;b&gt;&amp;amp;" in html
    assert "<script" not in html and "<b>" not in html
    assert "HEALTH_WARN" in html and "3 of 4 up" in html
    assert re.search(r"<td>gpu02</td><td>1 / 2</td><td>yes</td><td>91</td>", html)
    # the empty namespace reaches no lab address: every node_exporter target is down
    assert re.search(r"<td>gpu</td><td>0</td><td>2</td><td>gpu01, gpu02</td>", html)
    assert "http" not in html.replace("http://127.0.0.1:9090", "")  # no external asset


def test_the_status_command_asks_a_live_prometheus(live):
    """`monitoring status --url` against the server: its own answers, saved and shown."""
    html, saved = live["cli_page"], live["cli_answers"]
    assert saved["source"] == "http://127.0.0.1:9090"
    assert {t["labels"].get("node") for t in saved["targets"]["data"]["activeTargets"]} >= {"gpu01"}
    assert "AcceptanceFailed" in html and "0 of 9 node_exporter targets up" in html
    assert "<script" not in html


def png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the raw (filtered) scanlines of a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


def screenshot(page: Path, png: Path) -> None:
    chromium = required("chromium", "chromium")
    done = subprocess.run(
        [
            *(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"),
            *(f"--screenshot={png}", "--window-size=1280,1600", page.as_uri()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0 and png.exists(), done.stderr[-2000:]


def test_a_person_can_read_the_status_page_in_a_browser(status_page):
    png = status_page.with_suffix(".png")
    screenshot(status_page, png)
    width, height, raw = png_pixels(png)
    assert (width, height) == (1280, 1600)
    # not blank: many distinct byte values (text, coloured bars), not one background colour
    assert len(set(raw[: len(raw) // 2])) > 50
    if os.environ.get("MONITORING_SCREENSHOT_DIR"):  # keep it to look at
        shutil.copy(png, Path(os.environ["MONITORING_SCREENSHOT_DIR"]) / "status.png")


# ---- a dashboard read without Grafana, from the same answers ----------------------------------


def test_a_dashboard_reads_without_grafana_and_in_a_browser(live):
    """The per-node dashboard for gpu02, through `monitoring status --dashboard`, from the
    answers the real Prometheus gave to its queries."""
    board_file = live["rendered"] / "dashboards" / "node.json"
    panels = {e: live["queries"][e] for _, e in queries_of(live["boards"]["node.json"])}
    answers = live["work"] / "node-answers.json"
    answers.write_text(json.dumps({"source": "test", "time": live["end"], "panels": panels}))
    page = live["work"] / "node.html"
    argv = ["monitoring", "status", "--from-json", str(answers), "--dashboard", str(board_file)]
    assert main([*argv, "--node", NODE, "-o", str(page)]) == 0
    html = page.read_text()
    assert "<h1>lab: node gpu02</h1>" in html
    assert "no data" not in html
    # gpu02's hot GPU is over the plan's 85 °C: red; its missing GPU: 1 against 2 planned
    assert 'border-left:6px solid #d9534f">91 °C</td>' in html
    assert "<td>gpu02 present</td>" in html and "<td>gpu02 planned</td>" in html
    missing = html.index("<h3>GPUs missing against the plan</h3>")
    assert '#d9534f">1</td>' in html[missing : html.index("</table>", missing)]
    png = page.with_suffix(".png")
    screenshot(page, png)
    width, height, raw = png_pixels(png)
    assert (width, height) == (1280, 1600) and len(set(raw[: len(raw) // 2])) > 50
    if os.environ.get("MONITORING_SCREENSHOT_DIR"):
        shutil.copy(png, Path(os.environ["MONITORING_SCREENSHOT_DIR"]) / "node.png")
