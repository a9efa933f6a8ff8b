"""Replay NVML answers (recording format) through the nvml_facts boundary, then judge them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nvml_replay import ReplayNvml, load_nvml_facts

from cluster_plan.gpu.health import failures, judge_node

FIXTURES = sorted((Path(__file__).parent / "fixtures").glob("*.json"))
nvml_facts = load_nvml_facts()


def facts_for(fixture: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = nvml_facts.query_nvml(ReplayNvml(fixture["recording"]))
    facts["pci_devices"] = fixture["pci_devices"]
    facts["loaded_module"] = None
    facts["xid"] = {
        "source": "fixture",
        "since": "boot",
        "error": None,
        "events": nvml_facts.parse_xid_events(fixture["kernel_log"]),
    }
    return facts


def keyed(report: dict[str, Any], status: str) -> list[list[Any]]:
    return sorted(
        ([f["gpu"], f["check"]] for f in report["findings"] if f["status"] == status),
        key=lambda k: (k[0] is not None, k[0] or 0, k[1]),
    )


def test_there_are_fixtures_for_every_case() -> None:
    names = {p.stem for p in FIXTURES}
    assert {
        "healthy_8x_h100",
        "row_remap_pending",
        "pcie_x8",
        "nvlink_down",
        "over_temperature",
        "gpu_missing",
    } <= names


@pytest.mark.parametrize("path", FIXTURES, ids=[p.stem for p in FIXTURES])
def test_fixture_verdict(path: Path) -> None:
    fixture = json.loads(path.read_text())
    report = judge_node(
        fixture["node"], facts_for(fixture), fixture["accelerators"], fixture["acceptance_gpu"]
    )
    expected = fixture["expected"]
    assert report["verdict"] == expected["verdict"], failures(report)
    want_fail = sorted(expected["failures"], key=lambda k: (k[0] is not None, k[0] or 0, k[1]))
    want_warn = sorted(expected["warnings"], key=lambda k: (k[0] is not None, k[0] or 0, k[1]))
    assert keyed(report, "fail") == want_fail
    assert keyed(report, "warn") == want_warn
    json.dumps(report)  # the report is plain data: it joins the acceptance report


def test_healthy_node_reports_every_gpu_checked() -> None:
    fixture = json.loads((Path(__file__).parent / "fixtures/healthy_8x_h100.json").read_text())
    report = judge_node("gpu01", facts_for(fixture), fixture["accelerators"], None)
    checked = {(f["gpu"], f["check"]) for f in report["findings"]}
    for gpu in range(8):
        for check in (
            "model",
            "memory",
            "temperature",
            "ecc_uncorrected",
            "remapped_rows",
            "pcie_width",
            "nvlink",
        ):
            assert (gpu, check) in checked
    assert report["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert report["gpus"][0]["memory_total_mib"] == 81559
    assert report["gpus"][0]["pci_bus_id"] == "00000000:18:00.0"
    assert len(report["gpus"][0]["nvlinks"]) == 18


def test_wrong_plan_names_model_and_count() -> None:
    fixture = json.loads((Path(__file__).parent / "fixtures/healthy_8x_h100.json").read_text())
    report = judge_node("gpu01", facts_for(fixture), {"model": "H200-SXM-141GB", "count": 1}, None)
    assert report["verdict"] == "fail"
    messages = "\n".join(failures(report))
    assert "8 GPU(s) found, the plan says 1x H200-SXM-141GB" in messages
    assert "GPU 0 is 'NVIDIA H100 80GB HBM3', the plan says one of ['NVIDIA H200']" in messages
    assert "81559 MiB, the catalog says 143771 MiB" in messages


def test_plan_threshold_overrides_default() -> None:
    fixture = json.loads((Path(__file__).parent / "fixtures/healthy_8x_h100.json").read_text())
    facts = facts_for(fixture)
    report = judge_node("gpu01", facts, fixture["accelerators"], {"max_temp_c": 36})
    hot = [
        f["gpu"]
        for f in report["findings"]
        if f["check"] == "temperature" and f["status"] == "fail"
    ]
    assert hot == [4, 5, 6, 7]  # 33 + index C


def test_expected_driver_branch_is_checked() -> None:
    fixture = json.loads((Path(__file__).parent / "fixtures/healthy_8x_h100.json").read_text())
    facts = facts_for(fixture)
    assert judge_node("n", facts, fixture["accelerators"], None, 570)["verdict"] == "pass"
    report = judge_node("n", facts, fixture["accelerators"], None, 580)
    assert failures(report) == ["driver 570.172.08, expected branch 580"]


def test_plan_keys_relax_pcie_and_remap_checks() -> None:
    pcie = json.loads((Path(__file__).parent / "fixtures/pcie_x8.json").read_text())
    relaxed = judge_node(
        "gpu01", facts_for(pcie), pcie["accelerators"], {"min_pcie_width_ratio": 0.5}
    )
    assert relaxed["verdict"] == "pass"
    remap = json.loads((Path(__file__).parent / "fixtures/row_remap_pending.json").read_text())
    report = judge_node(
        "gpu01",
        facts_for(remap),
        remap["accelerators"],
        {"max_remapped_rows_pending": 1, "max_ecc_uncorrected": 1},
    )
    assert report["verdict"] == "pass", failures(report)


def test_nvlink_check_can_be_turned_off() -> None:
    fixture = json.loads((Path(__file__).parent / "fixtures/nvlink_down.json").read_text())
    report = judge_node(
        "gpu01", facts_for(fixture), fixture["accelerators"], {"require_nvlink": False}
    )
    assert keyed(report, "fail") == [[2, "xid"]]


def test_cli_judges_saved_facts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cluster_plan.gpu.health import main

    fixture = json.loads((Path(__file__).parent / "fixtures/pcie_x8.json").read_text())
    saved = tmp_path / "facts.json"
    saved.write_text(json.dumps({"nvml": facts_for(fixture)}))
    assert main([str(saved), "--model", "H100-SXM5-80GB", "--count", "8"]) == 1
    assert '"verdict": "fail"' in capsys.readouterr().out
    assert main([str(tmp_path / "missing.json")]) == 2
    relaxed = [
        str(saved),
        "--model",
        "H100-SXM5-80GB",
        "--count",
        "8",
        "--set",
        "min_pcie_width_ratio=0.5",
    ]
    assert main(relaxed) == 0
    assert main([str(saved), "--set", "no_such_key=1"]) == 2
    assert main([str(saved), "--set", "max_temp_c=hot"]) == 2


def test_every_report_matches_the_proposed_schema() -> None:
    import jsonschema

    schema = json.loads((Path(__file__).parent / "gpu_node_report.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    reports = []
    for path in FIXTURES:
        fixture = json.loads(path.read_text())
        reports.append(judge_node("gpu01", facts_for(fixture), fixture["accelerators"], None))
    reports.append(judge_node("head01", {"available": False, "gpus": []}, None, None))
    reports.append(
        judge_node(
            "gpu02",
            {"available": False, "error": "NVML not available: x", "gpus": []},
            {"model": "L40S", "count": 4},
            None,
        )
    )
    for report in reports:
        errors = [e.message for e in validator.iter_errors(report)]
        assert errors == [], (report["node"], errors)
    broken = {**reports[0], "verdict": "maybe"}
    assert list(validator.iter_errors(broken))


HEALTHY = json.loads((Path(__file__).parent / "fixtures/healthy_8x_h100.json").read_text())


@given(
    temps=st.lists(st.integers(min_value=20, max_value=100), min_size=8, max_size=8),
    max_temp=st.integers(min_value=60, max_value=95),
    widths=st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=8, max_size=8),
)
@settings(max_examples=40, deadline=None)
def test_failing_gpus_are_exactly_those_past_a_limit(
    temps: list[int], max_temp: int, widths: list[int]
) -> None:
    recording = copy.deepcopy(HEALTHY["recording"])
    for gpu, (temp, width) in enumerate(zip(temps, widths, strict=True)):
        recording["devices"][gpu]["nvmlDeviceGetTemperature"] = {"0": temp}
        recording["devices"][gpu]["nvmlDeviceGetCurrPcieLinkWidth"] = {"": width}
    fixture = {**HEALTHY, "recording": recording}
    report = judge_node(
        "gpu01", facts_for(fixture), HEALTHY["accelerators"], {"max_temp_c": max_temp}
    )
    limit = min(max_temp, 89 - 1)  # the recorded slowdown threshold is 89 C
    hot = [g for g, t in enumerate(temps) if t > limit]
    narrow = [g for g, w in enumerate(widths) if w < 16]
    assert [
        f["gpu"]
        for f in report["findings"]
        if f["check"] == "temperature" and f["status"] == "fail"
    ] == hot
    assert [
        f["gpu"] for f in report["findings"] if f["check"] == "pcie_width" and f["status"] == "fail"
    ] == narrow
    assert report["verdict"] == ("fail" if hot or narrow else "pass")


def test_the_recorded_h200_fails_a_plan_of_eight_h100s_on_count_model_and_memory() -> None:
    """What real NVML said on the lent machine (device_check.sh, 2026-12-04), judged against
    the wrong plan: the three checks that must catch a misdelivered node."""
    fixture = json.loads((Path(__file__).parent / "fixtures/recorded_1x_h200.json").read_text())
    wrong = {"count": 8, "gres_type": "h100", "kind": "gpu", "model": "H100-SXM5-80GB",
             "vendor": "nvidia"}  # fmt: skip
    report = judge_node("device", facts_for(fixture), wrong, fixture["acceptance_gpu"])
    assert report["verdict"] == "fail"
    assert {check for _, check in keyed(report, "fail")} == {"count", "model", "memory"}
