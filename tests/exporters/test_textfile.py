"""The textfile writer: whole files replaced by one rename, never a half-written `*.prom`."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from cluster_plan.exporters import textfile
from cluster_plan.exporters.textfile import CollectorError, run_collector, write_atomic


def gauge(value: float) -> list[GaugeMetricFamily]:
    family = GaugeMetricFamily("cluster_plan_drift_findings", "Drift findings")
    family.add_metric([], value)
    return [family]


def test_write_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "cluster_plan_state.prom"
    target.write_text("old\n")
    inode = target.stat().st_ino
    write_atomic(target, "new\n")
    assert target.read_text() == "new\n"
    assert target.stat().st_ino != inode  # a new file renamed over the old one
    assert stat.S_IMODE(target.stat().st_mode) == 0o644  # node_exporter's user reads it
    assert os.listdir(tmp_path) == ["cluster_plan_state.prom"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "cluster_plan_state.prom"
    target.write_text("old\n")

    def full_disk(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(textfile.os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomic(target, "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["cluster_plan_state.prom"]


def test_success_and_failure_status(tmp_path: Path) -> None:
    assert run_collector(tmp_path, "state", lambda: gauge(3)) is None
    families = list(
        text_string_to_metric_families((tmp_path / "cluster_plan_state.prom").read_text())
    )
    assert [(f.name, f.samples[0].value) for f in families] == [("cluster_plan_drift_findings", 3)]

    def broken() -> list[GaugeMetricFamily]:
        raise CollectorError("drift.json: not JSON")

    assert run_collector(tmp_path, "state", broken) == "drift.json: not JSON"
    status = (tmp_path / "cluster_plan_collector_state.prom").read_text()
    assert 'cluster_plan_collector_success{collector="state"} 0' in status
    # the metrics of the run before are no longer true: removed, not served as current
    assert sorted(os.listdir(tmp_path)) == ["cluster_plan_collector_state.prom"]


def test_bugs_are_not_hidden_as_collector_failures(tmp_path: Path) -> None:
    def bug() -> list[GaugeMetricFamily]:
        raise KeyError("hosts")

    assert run_collector(tmp_path, "state", lambda: gauge(3)) is None
    with pytest.raises(KeyError):
        run_collector(tmp_path, "state", bug)
    # raised for its traceback, and written as a failure all the same: the alert fires
    status = (tmp_path / "cluster_plan_collector_state.prom").read_text()
    assert 'cluster_plan_collector_success{collector="state"} 0' in status
    assert not (tmp_path / "cluster_plan_state.prom").exists()
