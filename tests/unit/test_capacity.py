"""The power model, the rack budgets and fitness findings, and the capacity model's sums
(cluster_plan.plan.power, checks.power, checks.fitness, cluster_plan.views.capacity)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from plan_text import findings, replace_once

from cluster_plan.plan.power import feed_watts, node_power, power_budget_w
from cluster_plan.plan.validate import validate_text
from cluster_plan.views.capacity import capacity_model

BASE = (Path(__file__).resolve().parents[1] / "plans" / "base.yml").read_text()
BUDGETS = (
    "  r1: {row: A}\n  r2: {row: A}\n",
    "  r1: {row: A, power: {kw: 6}, cooling: {kw: 10, kind: liquid}}\n"
    "  r2: {row: A, power: {kw: 6}, cooling: {kw: 10, kind: liquid}}\n",
)


def test_an_hgx_h100_node_draws_what_a_dgx_h100_is_rated_for():
    draw = node_power({"accelerators": {"model": "H100-SXM5-80GB", "count": 8}})
    assert draw.accelerator_w == 8 * 700
    assert draw.peak_w == 8 * 700 + 600 + 0.7 * 8 * 700  # 10.12 kW; DGX H100: 10.2 kW max
    b200 = node_power({"accelerators": {"model": "B200", "count": 8}})
    assert abs(b200.peak_w - 14_300) < 200  # DGX B200: 14.3 kW max


def test_pcie_cards_cpu_servers_and_measured_figures():
    pcie = node_power({"accelerators": {"model": "L4", "count": 2}})
    assert pcie.peak_w == 2 * 72 + 600 + 0.25 * 2 * 72
    assert node_power({}).peak_w == 600
    measured = node_power({"power_w": 4321, "accelerators": {"model": "L4", "count": 2}})
    assert (measured.peak_w, measured.measured) == (4321, True)
    overhead = node_power({"overhead_w": 100, "accelerators": {"model": "T4", "count": 1}})
    assert overhead.peak_w == 170
    unknown = node_power({"accelerators": {"model": "tpu", "count": 4}})
    assert unknown.known is False


def test_feeds_follow_netbox():
    # available_power = volts x amps x max_utilization (x sqrt(3) for three-phase)
    assert feed_watts({"volts": 230, "amps": 16}) == pytest.approx(230 * 16 * 0.8)
    three = feed_watts({"volts": 415, "amps": 32, "phases": 3, "max_utilization_pct": 90})
    assert three == pytest.approx(415 * 32 * math.sqrt(3) * 0.9)
    assert feed_watts({"volts": 230, "amps": 16, "count": 3}) == pytest.approx(3 * 230 * 16 * 0.8)
    two = {"power": {"feeds": [{"volts": 230, "amps": 16}, {"volts": 230, "amps": 32}]}}
    assert power_budget_w(two) == pytest.approx(230 * 48 * 0.8)
    assert power_budget_w({"power": {"kw": 7.5}}) == 7500
    assert power_budget_w({}) is None


def _model(text: str) -> dict:
    result = validate_text(text, "plan.yml")
    return capacity_model(result.plan, result.nodes, result.findings)


def test_rack_sums_add_up_every_node():
    model = _model(replace_once(BASE, BUDGETS))
    racks = {r["rack"]: r for r in model["racks"]}
    gpu, cpu = 2 * 350 + 600 + 0.25 * 700, 600  # base.yml: 2 x H100 PCIe per gpu node
    # r1: head, gpu01, stor01, stor03; r2: gpu02, cpu01, stor02
    assert racks["r1"]["peak_kw"] == round((gpu + 3 * cpu) / 1000, 1)
    assert racks["r2"]["peak_kw"] == round((gpu + 2 * cpu) / 1000, 1)
    assert racks["r1"]["typical_kw"] == round(0.75 * (gpu + 3 * cpu) / 1000, 1)
    assert racks["r1"]["power_pct"] == round(100 * (gpu + 3 * cpu) / 6000, 1)
    assert racks["r1"]["largest"][0] == {"group": "gpu", "hardware": "gpu-h100", "nodes": 1,
                                         "kw": round(gpu / 1000, 1)}  # fmt: skip
    assert sum(r["nodes"] for r in model["racks"]) == model["totals"]["nodes"] == 7
    pools = {p["pool"]: p for p in model["pools"]}
    assert pools["gpu"]["gpus"] == {"H100-PCIE-80GB": 4}
    assert pools["gpu"]["gpu_memory_gb"] == 320
    assert pools["gpu"]["bf16_pflops"] == round(4 * 756 / 1000, 1)
    assert pools["gpu"]["classes"] == ["training"]
    assert model["totals"]["power_budget_kw"] == 12


@pytest.mark.parametrize(("count", "refused"), [(2, False), (4, False), (8, True)])
def test_a_group_grown_past_its_racks_budget_is_refused(count, refused):
    text = replace_once(BASE, BUDGETS, ("gpu: {count: 2,", f"gpu: {{count: {count},"))
    errors = [f for f in findings(text) if f[0] == "error"]
    expected = [
        ("error", "rack-power", "$.racks.r1.power"),
        ("error", "rack-power", "$.racks.r2.power"),
    ]
    assert errors == (expected if refused else [])


def test_utilization_threshold_is_a_plan_setting():
    text = replace_once(BASE, BUDGETS, ("gpu: {count: 2,", "gpu: {count: 4,"))
    # 4 gpu nodes: r1 draws 4.75 kW of 6 (79 %), r2 4.15 kW: under the default 80 %
    assert not [f for f in findings(text) if f[1] == "rack-utilization"]
    strict = text + "power: {warn_utilization_pct: 70}\n"
    assert ("warning", "rack-utilization", "$.racks.r1.power") in findings(strict)


def test_air_cooled_racks_past_what_air_carries_warn():
    text = replace_once(
        BASE,
        BUDGETS,
        ("cooling: {kw: 10, kind: liquid}}\n  r2", "cooling: {kw: 10, kind: air}}\n  r2"),
        ("accelerators: {model: H100-PCIE-80GB, count: 2}", "power_w: 12000"),
    )
    got = findings(text)
    # r1 holds one 12 kW gpu node and 3 x 0.6 kW: 13.8 kW, over 6 kW of power and 10 kW cooling
    assert ("error", "rack-power", "$.racks.r1.power") in got
    assert ("error", "rack-cooling", "$.racks.r1.cooling") in got
    assert ("warning", "air-cooling-limit", "$.racks.r1.cooling.kind") not in got  # 13.8 < 30
    lower = text + "power: {air_cooling_max_kw: 12}\n"
    assert ("warning", "air-cooling-limit", "$.racks.r1.cooling.kind") in findings(lower)
    # liquid-cooled r2 draws as much, and gets no air warning
    assert ("warning", "air-cooling-limit", "$.racks.r2.cooling.kind") not in findings(lower)


def test_the_message_names_rack_total_budget_and_largest_consumers():
    text = replace_once(BASE, BUDGETS, ("gpu: {count: 2,", "gpu: {count: 8,"))
    result = validate_text(text, "plan.yml")
    (r1,) = [f for f in result.findings if f.json_path == "$.racks.r1.power"]
    assert "rack r1 draws 7.7 kW at full load" in r1.message
    assert "6.0 kW power budget" in r1.message
    assert "largest: 4 x gpu (1.5 kW each)" in r1.message
    assert (r1.file, r1.line) == ("plan.yml", 9)


def _class(requires: str, accel: str) -> list[tuple[str, str, str]]:
    text = replace_once(
        BASE,
        ("training: {pool: gpu, needs: gpu}", f"training: {{pool: gpu, needs: gpu{requires}}}"),
        ("accelerators: {model: H100-PCIE-80GB, count: 2}", f"accelerators: {accel}"),
    )
    return [f for f in findings(text) if f[1].startswith(("class-", "training-", "inference-"))]


def test_class_requirements():
    nvlink = ", requires: {nvlink: true}"
    path = "$.scheduler.workload_classes.training.requires.nvlink"
    assert _class(nvlink, "{model: H100-PCIE-80GB, count: 4}") == [
        ("error", "class-requirement", path)
    ]
    assert _class(nvlink, "{model: H100-PCIE-80GB, count: 2}") == []  # a bridged pair
    assert _class(nvlink, "{model: H100-SXM5-80GB, count: 8}") == []
    assert _class(nvlink, "{model: H100-SXM5-80GB, count: 1}") == [
        ("error", "class-requirement", path)
    ]
    # a class that states what it needs gets no default training warning
    assert _class(", requires: {gpu_memory_gb: 16}", "{model: T4, count: 4}") == []


def test_default_training_and_inference_fitness():
    pool = "$.scheduler.workload_classes.training.pool"
    assert _class("", "{model: T4, count: 1}") == [("warning", "training-gpu-memory", pool)]
    assert _class("", "{model: L40S, count: 4}") == [("warning", "training-without-nvlink", pool)]
    assert _class("", "{model: A100-SXM4-80GB, count: 8}") == []
    serving = ", kind: inference"
    assert _class(serving, "{model: H200-SXM-141GB, count: 8}") == [
        ("warning", "inference-power", pool)
    ]
    assert _class(serving, "{model: L40S, count: 4}") == []


def test_fitness_warnings_can_be_suppressed_with_a_reason():
    text = replace_once(
        BASE, ("accelerators: {model: H100-PCIE-80GB, count: 2}", "accelerators: {model: T4}")
    ).replace("{model: T4}", "{model: T4, count: 1}")
    suppressed = text + "suppress:\n  - {code: training-gpu-memory, reason: small models only}\n"
    result = validate_text(suppressed, "plan.yml")
    (finding,) = [f for f in result.findings if f.code == "training-gpu-memory"]
    assert finding.suppressed_by == "small models only"


def test_team_shares_against_their_pools():
    teams = (Path(__file__).resolve().parents[1] / "plans" / "base-teams.yml").read_text()
    model = _model(teams)
    shares = {t["team"]: t for t in model["teams"]}
    assert shares["vision"]["pools"] == ["cpu", "gpu"]
    assert shares["vision"]["pool_gpus"] == 4
    assert shares["vision"]["share_pct"] == 25
    assert shares["nlp"]["limit_gpus"] is None
