"""The report: schema-valid JSON, self-contained HTML, `report` exit codes 0/1/2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from acceptance_sim import SimNode, SimulatedNetwork
from support.cli_output import result

from cluster_plan.acceptance.html import render_html
from cluster_plan.acceptance.report import SCHEMA_ID, SCHEMA_PATH, validate_report, write_report
from cluster_plan.acceptance.runner import NETWORK_PHASES, AcceptanceRunner, RunOptions
from cluster_plan.acceptance.spec import spec_from_expanded
from cluster_plan.cli import main


def make_report(expanded: dict[str, Any], **faults: dict[str, Any]) -> dict[str, Any]:
    spec = spec_from_expanded(expanded, duration_s=2)
    nodes = {n.name: SimNode(n.address) for n in spec.networks[0].nodes}
    for name, changes in faults.items():
        for key, value in changes.items():
            setattr(nodes[name], key, value)
    options = RunOptions(probes=300, phases=NETWORK_PHASES)  # the simulation has no Ceph
    runner = AcceptanceRunner(spec, SimulatedNetwork(nodes), options, lambda m: None)
    return runner.run()


def test_schema_has_id_and_draft() -> None:
    schema = json.loads(SCHEMA_PATH.read_text())
    assert schema["$id"] == SCHEMA_ID
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_schema_rejects_a_broken_report(expanded_lab: dict[str, Any]) -> None:
    report = make_report(expanded_lab)
    assert validate_report(report) == []
    report["passed"] = "yes"
    del report["bandwidth"][0]["gbps"]
    errors = validate_report(report)
    assert any("$.passed" in e for e in errors)
    assert any("gbps" in e for e in errors)


def test_html_is_self_contained_with_heatmaps(expanded_lab: dict[str, Any]) -> None:
    report = make_report(
        expanded_lab, gpu02={"rate_bps": 10e6}, cpu01={"broken_iperf": "iperf3_nan"}
    )
    page = render_html(report)
    assert page.count("<svg") == 2  # bandwidth and latency heatmaps
    assert "FAILED" in page and "gpu02" in page
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in page and "<link" not in page
    assert "not JSON" in page  # the raw output of the broken measurement is on the page
    assert "<pre>" in page and "&quot;bits_per_second&quot;" in page


def test_report_command_exit_codes(tmp_path: Path, expanded_lab: dict[str, Any],
                                   capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    good, _ = write_report(make_report(expanded_lab), tmp_path / "good")
    bad, _ = write_report(make_report(expanded_lab, stor02={"loss": 0.05}), tmp_path / "bad")
    assert main(["report", str(good), "--output", str(tmp_path / "g.html")]) == 0
    assert (tmp_path / "g.html").read_text().startswith("<!DOCTYPE html>")
    assert main(["report", str(bad)]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "stor02" in out and "loss" in out
    assert main(["report", str(bad), "--format", "json"]) == 1
    summary = result(capsys.readouterr().out)
    assert summary["nodes_at_fault"][0]["node"] == "stor02"


@pytest.mark.parametrize("content", [None, "", "{not json", "[]", '{"report": "other"}'])
def test_report_command_unreadable_input(tmp_path: Path, content: str | None,
                                         capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    path = tmp_path / "results.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", str(path)]) == 2
    assert "error:" in capsys.readouterr().err


def test_acceptance_command_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         expanded_lab: dict[str, Any]) -> None:  # fmt: skip
    path = tmp_path / "e.json"
    path.write_text(json.dumps(expanded_lab))
    assert main(["acceptance", "p.yml", "--expanded", str(tmp_path / "missing.json")]) == 2
    assert main(["acceptance", "p.yml", "--expanded", str(path), "--nodes", "nope01"]) == 2
    assert "no such host" in capsys.readouterr().err
    assert main(["acceptance", "p.yml", "--expanded", str(path), "--phases", "dns"]) == 2
    assert main(["acceptance", "p.yml", "--expanded", str(path), "--transport", "exec"]) == 2
    not_expanded = {**expanded_lab, "acceptance": {}}  # not the contract's shape: unreadable
    path.write_text(json.dumps(not_expanded))
    assert main(["acceptance", "p.yml", "--expanded", str(path)]) == 2
    assert "not an expanded plan" in capsys.readouterr().err
    # a plan without network thresholds fails the check acceptance needs: exit 1, as for
    # every plan that fails a check
    no_thresholds = {**expanded_lab, "acceptance": {**expanded_lab["acceptance"], "network": None}}
    path.write_text(json.dumps(no_thresholds))
    assert main(["acceptance", "p.yml", "--expanded", str(path)]) == 1
    assert "no acceptance.network section" in capsys.readouterr().err


def test_acceptance_in_a_lab_that_is_not_up(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            expanded_lab: dict[str, Any],
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setenv("CLUSTER_PLAN_LAB_ID", "no-such-lab-here")
    path = tmp_path / "e.json"
    path.write_text(json.dumps(expanded_lab))
    for transport in ("lab", "lab-netns"):
        assert main(["acceptance", "p.yml", "--expanded", str(path), "--transport", transport]) == 1
        assert "is not up" in capsys.readouterr().err
