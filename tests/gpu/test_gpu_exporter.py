"""The GPU textfile collector: recorded NVML answers in, exposition text out, parsed back with
prometheus_client's own parser and checked by name and labels."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import pynvml
import pytest
from nvml_replay import ReplayNvml, record
from prometheus_client.parser import text_string_to_metric_families

from cluster_plan.cli import main
from cluster_plan.exporters.gpu import THROTTLE_BITS, collect_gpu, read_nvml
from cluster_plan.exporters.textfile import exposition, run_collector
from cluster_plan.monitoring import metrics

FIXTURES = Path(__file__).parent / "fixtures"
# docs/METRICS.md's GPU list, as the exposition names them (counters with their _total)
PINNED = {
    "cluster_plan_gpu_nvml_up",
    "cluster_plan_gpu_expected",
    "cluster_plan_gpu_present",
    "cluster_plan_gpu_temperature_celsius",
    "cluster_plan_gpu_power_watts",
    "cluster_plan_gpu_power_limit_watts",
    "cluster_plan_gpu_sm_clock_hertz",
    "cluster_plan_gpu_throttle",
    "cluster_plan_gpu_ecc_errors_total",
    "cluster_plan_gpu_remapped_rows",
    "cluster_plan_gpu_xid_last",
    "cluster_plan_gpu_xid_events_total",
    "cluster_plan_gpu_nvlink_errors_total",
}
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def fixture(name: str) -> dict[str, Any]:
    recording: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())["recording"]
    return recording


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def export(recording: dict[str, Any], state: Path, expected: int | None = 8) -> Samples:
    families = collect_gpu("gpu01", expected, state, ReplayNvml(recording), xid_wait_ms=50)
    return parse(exposition(families))


def gpu(index: int, board: int | None = None, **labels: str) -> frozenset[tuple[str, str]]:
    """A GPU's labels: its NVML index, and its UUID from its place on the board."""
    uuid = f"GPU-5c1e8a2b-0f4d-4c1a-9e3b-{index if board is None else board:012x}"
    return frozenset({"node": "gpu01", "gpu": str(index), "uuid": uuid, **labels}.items())


def node() -> frozenset[tuple[str, str]]:
    return frozenset({"node": "gpu01"}.items())


def names(samples: Samples) -> set[str]:
    return {name for name, _ in samples}


def test_healthy_node_every_pinned_metric(tmp_path: Path) -> None:
    recording = copy.deepcopy(fixture("healthy_8x_h100"))
    recording["events"] = [{"device": 1, "xid": 31}]  # an application's MMU fault
    samples = export(recording, tmp_path / "xid.json")
    assert names(samples) == PINNED == {m.name for m in metrics.of_source("gpu")}
    assert samples[("cluster_plan_gpu_nvml_up", node())] == 1
    assert samples[("cluster_plan_gpu_expected", node())] == 8
    assert samples[("cluster_plan_gpu_present", node())] == 8
    for i in range(8):
        assert samples[("cluster_plan_gpu_temperature_celsius", gpu(i))] == 33 + i
        assert samples[("cluster_plan_gpu_power_watts", gpu(i))] == pytest.approx(71.234 + 0.1 * i)
        assert samples[("cluster_plan_gpu_power_limit_watts", gpu(i))] == 700
        assert samples[("cluster_plan_gpu_sm_clock_hertz", gpu(i))] == 345e6
        for reason in THROTTLE_BITS:
            assert samples[("cluster_plan_gpu_throttle", gpu(i, reason=reason))] == 0
        for kind in ("correctable", "uncorrectable", "pending", "failure"):
            assert samples[("cluster_plan_gpu_remapped_rows", gpu(i, kind=kind))] == 0
        ecc = {
            (dict(labels)["scope"], dict(labels)["kind"]): value
            for (name, labels), value in samples.items()
            if name == "cluster_plan_gpu_ecc_errors_total" and dict(labels)["gpu"] == str(i)
        }
        assert ecc == {
            ("volatile", "corrected"): 0,
            ("volatile", "uncorrected"): 0,
            ("aggregate", "corrected"): 2,
            ("aggregate", "uncorrected"): 0,
        }
        links = [
            labels for name, labels in samples if name == "cluster_plan_gpu_nvlink_errors_total"
        ]
        assert len(links) == 8 * 18 * 4
    assert samples[("cluster_plan_gpu_xid_last", gpu(1))] == 31
    assert samples[("cluster_plan_gpu_xid_last", gpu(0))] == 0
    assert samples[("cluster_plan_gpu_xid_events_total", gpu(1, xid="31"))] == 1


def test_thermal_throttling_gpu(tmp_path: Path) -> None:
    samples = export(fixture("over_temperature"), tmp_path / "xid.json")
    assert samples[("cluster_plan_gpu_temperature_celsius", gpu(6))] == 91
    assert samples[("cluster_plan_gpu_sm_clock_hertz", gpu(6))] == 1275e6
    active = {
        (dict(labels)["gpu"], dict(labels)["reason"])
        for (name, labels), value in samples.items()
        if name == "cluster_plan_gpu_throttle" and value == 1
    }
    assert active == {("6", "sw_thermal"), ("6", "hw_thermal")}


@pytest.mark.parametrize(("reason", "bit"), sorted(THROTTLE_BITS.items()))
def test_each_throttle_bit_is_its_own_reason(tmp_path: Path, reason: str, bit: int) -> None:
    recording = copy.deepcopy(fixture("healthy_8x_h100"))
    recording["devices"] = recording["devices"][:1]
    # a driver that only answers the newer name: the collector falls back to it
    recording["devices"][0]["nvmlDeviceGetCurrentClocksThrottleReasons"] = {
        "": {"nvml_error": "FUNCTION_NOT_FOUND"}
    }
    recording["devices"][0]["nvmlDeviceGetCurrentClocksEventReasons"] = {"": bit | 0x1}
    samples = export(recording, tmp_path / "xid.json", expected=1)
    active = {
        dict(labels)["reason"]
        for (name, labels), value in samples.items()
        if name == "cluster_plan_gpu_throttle" and value == 1
    }
    assert active == {reason}


def test_ecc_error_remap_and_xids_kept_between_runs(tmp_path: Path) -> None:
    state = tmp_path / "xid.json"
    samples = export(fixture("row_remap_pending"), state)
    ids = gpu(3, scope="volatile", kind="uncorrected")
    assert samples[("cluster_plan_gpu_ecc_errors_total", ids)] == 1
    assert (
        samples[
            ("cluster_plan_gpu_ecc_errors_total", gpu(3, scope="aggregate", kind="uncorrected"))
        ]
        == 1
    )
    assert (
        samples[("cluster_plan_gpu_ecc_errors_total", gpu(2, scope="volatile", kind="uncorrected"))]
        == 0
    )
    assert samples[("cluster_plan_gpu_remapped_rows", gpu(3, kind="uncorrectable"))] == 1
    assert samples[("cluster_plan_gpu_remapped_rows", gpu(3, kind="pending"))] == 1
    assert samples[("cluster_plan_gpu_remapped_rows", gpu(3, kind="failure"))] == 0
    assert samples[("cluster_plan_gpu_xid_last", gpu(3))] == 63
    assert samples[("cluster_plan_gpu_xid_events_total", gpu(3, xid="63"))] == 1
    # The next run sees no event of its own: the count and the last code come from the state.
    quiet = copy.deepcopy(fixture("row_remap_pending"))
    quiet["events"] = []
    again = export(quiet, state)
    assert again[("cluster_plan_gpu_xid_last", gpu(3))] == 63
    assert again[("cluster_plan_gpu_xid_events_total", gpu(3, xid="63"))] == 1
    # and a third run with the event again counts it twice
    third = export(fixture("row_remap_pending"), state)
    assert third[("cluster_plan_gpu_xid_events_total", gpu(3, xid="63"))] == 2


def test_nvlink_errors_and_their_xid(tmp_path: Path) -> None:
    samples = export(fixture("nvlink_down"), tmp_path / "xid.json")
    counters = {"replay": 41, "recovery": 3, "crc_flit": 17, "crc_data": 2}
    for kind, count in counters.items():
        assert (
            samples[("cluster_plan_gpu_nvlink_errors_total", gpu(2, link="7", kind=kind))] == count
        )
        assert samples[("cluster_plan_gpu_nvlink_errors_total", gpu(2, link="6", kind=kind))] == 0
    assert samples[("cluster_plan_gpu_xid_last", gpu(2))] == 74
    assert samples[("cluster_plan_gpu_xid_events_total", gpu(2, xid="74"))] == 1


def test_gpu_missing_against_the_plan(tmp_path: Path) -> None:
    samples = export(fixture("gpu_missing"), tmp_path / "xid.json")
    assert samples[("cluster_plan_gpu_present", node())] == 7
    assert samples[("cluster_plan_gpu_expected", node())] == 8
    assert ("cluster_plan_gpu_temperature_celsius", gpu(4)) not in samples
    # NVML renumbers what is left: the last GPU on the board answers as index 6 now
    assert samples[("cluster_plan_gpu_temperature_celsius", gpu(6, board=7))] == 33 + 7


def test_a_lost_gpu_keeps_its_xid_series(tmp_path: Path) -> None:
    state = tmp_path / "xid.json"
    recording = copy.deepcopy(fixture("healthy_8x_h100"))
    recording["events"] = [{"device": 4, "xid": 79}]
    export(recording, state)
    samples = export(fixture("gpu_missing"), state)
    assert samples[("cluster_plan_gpu_xid_last", gpu(4))] == 79
    assert samples[("cluster_plan_gpu_xid_events_total", gpu(4, xid="79"))] == 1


@pytest.mark.parametrize(
    "nvml",
    [None, pynvml, ReplayNvml({}, init_error="DRIVER_NOT_LOADED")],
    ids=["no-binding", "no-library", "no-driver"],
)
def test_without_nvml_it_says_so(tmp_path: Path, nvml: Any) -> None:
    reading = read_nvml(nvml, xid_wait_ms=10)
    assert reading.up is False and reading.error
    samples = parse(exposition(collect_gpu("gpu01", 8, tmp_path / "xid.json", nvml, 10)))
    assert samples == {
        ("cluster_plan_gpu_nvml_up", node()): 0,
        ("cluster_plan_gpu_expected", node()): 8,
    }


def test_cli_on_this_host_writes_nvml_down_and_success(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # This machine has nvidia-ml-py but no libnvidia-ml: the real binding, no traceback.
    argv = ["exporter", "gpu", "--textfile-dir", str(tmp_path), "--node", "gpu01"]
    assert main([*argv, "--expected", "4"]) == 0
    samples = parse((tmp_path / "cluster_plan_gpu.prom").read_text())
    assert samples[("cluster_plan_gpu_nvml_up", node())] == 0
    assert samples[("cluster_plan_gpu_expected", node())] == 4
    status = parse((tmp_path / "cluster_plan_collector_gpu.prom").read_text())
    assert status == {("cluster_plan_collector_success", frozenset({("collector", "gpu")})): 1}
    assert "NVML not available" in capsys.readouterr().err


def test_unreadable_xid_state_fails_and_removes_the_previous_file(tmp_path: Path) -> None:
    state = tmp_path / "xid.json"
    nvml = ReplayNvml(fixture("healthy_8x_h100"))
    assert run_collector(tmp_path, "gpu", lambda: collect_gpu("gpu01", 8, state, nvml, 0)) is None
    assert (tmp_path / "cluster_plan_gpu.prom").is_file()
    state.write_text("{not json")
    failure = run_collector(tmp_path, "gpu", lambda: collect_gpu("gpu01", 8, state, nvml, 0))
    assert failure is not None and str(state) in failure
    assert not (tmp_path / "cluster_plan_gpu.prom").exists()
    status = parse((tmp_path / "cluster_plan_collector_gpu.prom").read_text())
    assert status == {("cluster_plan_collector_success", frozenset({("collector", "gpu")})): 0}


def test_a_recording_replays_through_the_exporter(tmp_path: Path) -> None:
    # `nvml_replay.py record` records the exporter's calls too: the recording answers them.
    source = fixture("nvlink_down")
    record(tmp_path / "node.json", ReplayNvml(source))
    recorded = json.loads((tmp_path / "node.json").read_text())
    assert read_nvml(ReplayNvml(recorded)) == read_nvml(ReplayNvml(source))
    assert read_nvml(ReplayNvml(recorded)).gpus[2].nvlink_errors[(7, "replay")] == 41


def test_a_gpu_nvml_counts_but_lost_is_not_present(tmp_path: Path) -> None:
    # NVML may still count a GPU that fell off the bus and answer GPU_IS_LOST for it.
    recording = copy.deepcopy(fixture("healthy_8x_h100"))
    recording["devices"][4]["nvmlDeviceGetUUID"] = {"": {"nvml_error": "GPU_IS_LOST"}}
    samples = export(recording, tmp_path / "xid.json")
    assert samples[("cluster_plan_gpu_nvml_up", node())] == 1
    assert samples[("cluster_plan_gpu_present", node())] == 7
    assert ("cluster_plan_gpu_temperature_celsius", gpu(4)) not in samples
    assert samples[("cluster_plan_gpu_temperature_celsius", gpu(5))] == 33 + 5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"gpus": {"GPU-1": {"gpu": 0, "last": 79, "counts": [79]}}}', "counts is not"),
        ('{"gpus": {"GPU-1": {"gpu": "0", "last": 79, "counts": {}}}}', "whole-number"),
        ('{"gpus": {"GPU-1": {"gpu": 0, "last": NaN, "counts": {}}}}', "last is NaN"),
        ('{"gpus": {"GPU-1": 7}}', "$.gpus.GPU-1 is not an object"),
    ],
)
def test_an_xid_state_of_the_wrong_shape_is_a_collector_error(tmp_path, content, message):
    state = tmp_path / "xid.json"
    state.write_text(content)
    nvml = ReplayNvml(fixture("healthy_8x_h100"))
    failure = run_collector(tmp_path, "gpu", lambda: collect_gpu("gpu01", 8, state, nvml, 0))
    assert failure is not None and str(state) in failure and message in failure


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_an_xid_state_that_is_no_regular_file_is_refused(tmp_path, kind):
    state = tmp_path / "xid.json"
    real = tmp_path / "real.json"
    real.write_text('{"gpus": {}}')
    if kind == "fifo":
        os.mkfifo(state)  # read as before, it would block the timer's run for ever
    else:
        state.symlink_to(real)
    nvml = ReplayNvml(fixture("healthy_8x_h100"))
    failure = run_collector(tmp_path, "gpu", lambda: collect_gpu("gpu01", 8, state, nvml, 0))
    assert failure is not None and f"{state}: this is a" in failure
    assert real.read_text() == '{"gpus": {}}'
