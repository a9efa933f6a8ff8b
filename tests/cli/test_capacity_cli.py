"""`cluster-plan capacity` (text, JSON, HTML) and the rack budget bars of `cluster-plan graph`:
the structure a person reads, checked on the example plans."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from support.cli_output import result

from cluster_plan.cli import main
from cluster_plan.views.graph import PER_BAND

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
LARGE = ROOT / "inventory" / "examples" / "large-training.yml"
K8S = ROOT / "inventory" / "examples" / "k8s-inference.yml"
BAD = ROOT / "tests" / "plans" / "bad"
SVG = "{http://www.w3.org/2000/svg}"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_json_report_of_the_lab(capsys):
    code, out, _ = run(capsys, "capacity", str(LAB), "--format", "json")
    assert code == 0
    model = result(out)
    assert [r["rack"] for r in model["racks"]] == ["r1", "r2"]
    assert model["totals"]["gpus"] == {"H100-PCIE-80GB": 4, "tpu": 4}
    assert model["totals"]["nodes"] == sum(p["nodes"] for p in model["pools"]) == 9
    peak = sum(r["peak_kw"] for r in model["racks"])
    assert abs(peak - model["totals"]["peak_kw"]) < 0.15  # each figure rounded to 0.1 kW
    assert {t["team"] for t in model["teams"]} == {"research", "vision", "nlp", "serving"}


def test_text_report_names_pools_racks_and_teams(capsys):
    code, out, _ = run(capsys, "capacity", str(LAB))
    assert code == 0
    assert "gpu (training): 2 nodes, 4 x H100-PCIE-80GB" in out
    assert re.search(r"r1: 4 nodes, [\d.]+ kW peak, .*power [\d.]+ of 8\.0 kW", out)
    assert "vision: pools cpu, gpu hold 4 GPUs; limit 1 (25 %)" in out


def test_the_large_example_reports_every_rack_and_says_why_it_has_no_budget(capsys):
    code, out, _ = run(capsys, "capacity", str(LARGE), "--format", "json")
    assert code == 0
    model = result(out)
    assert len(model["racks"]) == 64
    assert model["totals"]["gpus"] == {"H100-SXM5-80GB": 1995 * 8}
    # its racks hold about 32 HGX nodes each, over what any rack carries: the plan suppresses
    # rack-density with its reason, so the report lists no finding
    assert all(r["peak_kw"] > 142 and r["power_kw"] is None for r in model["racks"])
    assert model["findings"] == []
    (suppressed,) = model["suppressed"]
    assert (suppressed["code"], suppressed["count"]) == ("rack-density", 64)
    assert "row of cabinets" in suppressed["reason"]


def test_a_plan_over_budget_fails_without_a_traceback(capsys):
    code, _, err = run(capsys, "capacity", str(BAD / "rack-power-group-grown.yml"))
    assert code == 1
    assert "error[rack-power] $.racks.r1.power" in err
    code, _, err = run(capsys, "capacity", str(BAD / "missing.yml"))
    assert code == 2


class _Bars(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.bars: list[dict[str, str]] = []
        self.cells: list[str] = []
        self._in_td = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "div" and found.get("class") == "bar":
            self.bars.append(found)
        elif tag == "div" and found.get("class") == "fill":
            self.bars[-1]["fill"] = found["style"]
        self._in_td = tag == "td"

    def handle_data(self, data: str) -> None:
        if self._in_td:
            self.cells.append(data)
            self._in_td = False


def test_html_has_every_rack_with_bars_proportional_to_draw(capsys, tmp_path):
    page = tmp_path / "capacity.html"
    code, out, _ = run(capsys, "capacity", str(K8S), "--html", str(page), "--format", "json")
    assert code == 0
    model = result(out)
    parser = _Bars()
    parser.feed(page.read_text())
    assert {r["rack"] for r in model["racks"]} <= set(parser.cells)
    assert len(parser.bars) == 2 * len(model["racks"])  # power and cooling per rack
    racks = {r["rack"]: r for r in model["racks"]}
    for bar in parser.bars:
        rack = racks[bar["data-rack"]]
        pct = float(bar["data-pct"])
        assert pct == rack[f"{bar['data-kind']}_pct"]
        # the kW figures are rounded to 0.1 kW; the share is of the exact ones
        assert pct == pytest.approx(100 * rack["peak_kw"] / rack[f"{bar['data-kind']}_kw"], abs=1)
        width = float(re.search(r"width:([\d.]+)%", bar["fill"]).group(1))
        assert width == pytest.approx(min(pct, 100), abs=0.1)


def test_graph_bands_64_racks_by_pod_and_stays_bounded(capsys, tmp_path):
    out = tmp_path / "large.svg"
    assert run(capsys, "graph", str(LARGE), "-o", str(out))[0] == 0
    root = ET.fromstring(out.read_text())
    width, height = float(root.get("width")), float(root.get("height"))
    assert width <= PER_BAND * 150 + 40  # 16 racks across, not 64
    assert height < 3 * width  # four bands, not a tower either
    texts = [t.text or "" for t in root.iter(f"{SVG}text")]
    for n in range(1, 65):
        assert f"rack r{n:02d}" in texts
    # each spine heads its own band; the later ones name their cores instead of long lines
    assert sum(1 for t in texts if t.startswith("to core1, core2")) == 3
    rack_y = {
        t.text: float(t.get("y"))
        for t in root.iter(f"{SVG}text")
        if t.text in ("rack r01", "rack r17")
    }
    assert rack_y["rack r17"] > rack_y["rack r01"]  # spine2's racks sit below spine1's
    assert "power: 323.8 kW, no budget" in texts  # 32 HGX H100 nodes of 10.12 kW


def test_graph_bars_show_each_racks_draw_against_its_budget(capsys, tmp_path):
    out = tmp_path / "lab.svg"
    assert run(capsys, "graph", str(LAB), "-o", str(out))[0] == 0
    _, json_out, _ = run(capsys, "capacity", str(LAB), "--format", "json")
    racks = {r["rack"]: r for r in result(json_out)["racks"]}
    root = ET.fromstring(out.read_text())
    rects = list(root.iter(f"{SVG}rect"))
    budgets = [r for r in rects if r.get("class") == "budget"]
    assert len(budgets) == 4  # power and cooling of r1 and r2
    draws = [r for r in rects if r.get("class") == "draw"]
    for budget, draw in zip(budgets, draws, strict=True):
        share = float(draw.get("width")) / float(budget.get("width"))
        assert share * 100 == pytest.approx(min(float(budget.get("data-pct")), 100), abs=0.5)
    pcts = sorted(float(b.get("data-pct")) for b in budgets)
    expected = sorted(
        100 * r["peak_kw"] / r[f"{k}_kw"] for r in racks.values() for k in ("power", "cooling")
    )
    assert pcts == pytest.approx(expected, abs=1)
