"""The GPU alert rules fed by the GPU collector itself: each recorded NVML fixture goes through
`collect_gpu` (the code the timer runs on a GPU node), its exposition becomes the node's
series as Prometheus would scrape them (the textfile's labels and the node's target labels
from the rendered file_sd), and `promtool test rules` evaluates the rendered rules on them.
The test names the alerts each fixture must raise; `ALERTS` must hold exactly those, so a
fixture that raises one more, or one fewer, fails. What NVML really answers on an H100 is in
docs/gpu.md; these recordings stand in for it on machines without GPUs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from monitoring_tools import need
from prometheus_client.parser import text_string_to_metric_families

from cluster_plan.api import load_expanded
from cluster_plan.exporters.gpu import collect_gpu
from cluster_plan.exporters.textfile import exposition
from cluster_plan.monitoring.render import render, write

ROOT = Path(__file__).resolve().parents[2]
GPU_TESTS = ROOT / "tests" / "gpu"
sys.path.insert(0, str(GPU_TESTS))  # the NVML replay lives with the GPU tests
from nvml_replay import ReplayNvml  # noqa: E402

PLAN = ROOT / "inventory" / "examples" / "slurm-h100.yml"  # 8 H100 SXM per GPU node
NODE = "gpu03"
PROMTOOL = shutil.which("promtool")

# fixture -> the alerts it must raise: (alert, the firing series' distinguishing labels)
EXPECTED: dict[str, list[tuple[str, dict[str, str]]]] = {
    "healthy_8x_h100": [],
    "pcie_x8": [],  # a narrow link is acceptance's to catch (gpu_health), not an alert
    "gpu_missing": [("GpuMissing", {})],  # 7 of the plan's 8 answer NVML
    "over_temperature": [  # GPU 6 at 91 C (the plan's limit is 83), SW and HW thermal
        ("GpuTooHot", {"gpu": "6"}),
        ("GpuThrottled", {"gpu": "6", "reason": "sw_thermal"}),
        ("GpuThrottled", {"gpu": "6", "reason": "hw_thermal"}),
    ],
    "row_remap_pending": [  # GPU 3: an uncorrected volatile ECC error, one row to remap
        ("GpuEccUncorrectable", {"gpu": "3", "scope": "volatile", "kind": "uncorrected"}),
        ("GpuRowRemapPending", {"gpu": "3", "kind": "pending"}),
    ],
    "nvlink_down": [("GpuCriticalXid", {"gpu": "2", "xid": "74"})],  # the XID that took it
    "no_nvml": [("GpuNvmlDown", {})],  # the node's driver does not answer
}
# the metric each alert reads, to find the series that raises it
READS = {
    "GpuMissing": "cluster_plan_gpu_present",
    "GpuNvmlDown": "cluster_plan_gpu_nvml_up",
    "GpuTooHot": "cluster_plan_gpu_temperature_celsius",
    "GpuThrottled": "cluster_plan_gpu_throttle",
    "GpuEccUncorrectable": "cluster_plan_gpu_ecc_errors_total",
    "GpuRowRemapPending": "cluster_plan_gpu_remapped_rows",
    "GpuCriticalXid": "cluster_plan_gpu_xid_events_total",
}


def scraped(fixture: str, state: Path) -> list[tuple[str, dict[str, str], float]]:
    """The collector's samples for one fixture, as (name, labels, value)."""
    if fixture == "no_nvml":
        nvml = None
    else:
        recording = json.loads((GPU_TESTS / "fixtures" / f"{fixture}.json").read_text())
        nvml = ReplayNvml(recording["recording"])
    families = collect_gpu(NODE, 8, state, nvml, xid_wait_ms=50)
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(exposition(families))
        for sample in family.samples
    ]


def selector(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> tuple[Path, dict[str, str], dict[str, dict[str, Any]]]:
    directory = tmp_path_factory.mktemp("h100")
    write(render(load_expanded(PLAN)), directory)
    targets = json.loads((directory / "file_sd" / "node.json").read_text())
    (target,) = [t for t in targets if t["labels"]["node"] == NODE]
    labels = {"job": "node", "instance": target["targets"][0], **target["labels"]}
    rules = yaml.safe_load((directory / "rules" / "cluster-plan.rules.yml").read_text())
    by_alert = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    return directory, labels, by_alert


def expected_alert(
    alert: str,
    labels: dict[str, str],
    samples: list[tuple[str, dict[str, str], float]],
    target: dict[str, str],
    rule: dict[str, Any],
) -> str:
    """ALERTS{...} of the one series of the alert's metric that carries these labels."""
    (series,) = [
        s_labels
        for name, s_labels, _ in samples
        if name == READS[alert] and labels.items() <= s_labels.items()
    ]
    full = {
        **target,
        **series,
        **rule["labels"],
        "alertname": alert,
        "alertstate": "firing",
    }
    return "ALERTS{" + selector(full) + "}"


def test_each_nvml_fixture_raises_exactly_its_gpu_alerts(rendered, tmp_path):
    promtool = need(PROMTOOL, "prometheus")
    directory, target, rules = rendered
    tests = []
    for fixture, alerts in EXPECTED.items():
        samples = scraped(fixture, tmp_path / f"{fixture}-xid.json")
        assert samples, fixture
        series = [
            # ten minutes of the same scrape: past every GPU rule's `for` (5 min at most)
            {"series": f"{name}{{{selector({**target, **labels})}}}", "values": f"{value:g}x10"}
            for name, labels, value in samples
        ]
        want = [
            {"labels": expected_alert(alert, labels, samples, target, rules[alert]), "value": 1}
            for alert, labels in alerts
        ]
        tests.append(
            {
                "name": fixture,
                "interval": "1m",
                "input_series": series,
                "promql_expr_test": [
                    {"expr": 'ALERTS{alertstate="firing"}', "eval_time": "10m", "exp_samples": want}
                ],
            }
        )
    test_file = directory / "gpu-fixtures.test.yml"
    test_file.write_text(
        yaml.safe_dump(
            {
                "rule_files": ["rules/cluster-plan.rules.yml"],
                "evaluation_interval": "1m",
                "tests": tests,
            },
            sort_keys=False,
        )
    )
    done = subprocess.run(
        [promtool, "test", "rules", test_file.name],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout + done.stderr
