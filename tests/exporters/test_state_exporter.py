"""The state textfile collector: the acceptance history, `cluster-plan backup status` and
`cluster-plan drift` documents in, exposition text out."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cluster_plan.acceptance.history import History
from cluster_plan.cli import main
from cluster_plan.exporters.state import collect_state, run_document
from cluster_plan.exporters.textfile import CollectorError, exposition

TAKEN = 1_796_000_000.0  # when the saved documents were written (their mtime)
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str) -> Samples:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def node(name: str) -> frozenset[tuple[str, str]]:
    return frozenset({"node": name}.items())


def report(generated_at: str, passed: bool) -> dict[str, Any]:
    """An acceptance report as the history stores it (no figures: only the verdict matters)."""
    criteria = {"min_gbps": 8, "max_latency_ms": 1.0, "max_loss_pct": 0.0}
    findings = [] if passed else [{"severity": "fault", "message": "gpu02: 3.1 Gb/s < 8"}]
    return {
        "cluster": "lab",
        "generated_at": generated_at,
        "passed": passed,
        "findings": findings,
        "criteria": criteria,
        "bandwidth": [],
        "probes": [],
        "mtu": [],
    }


def backup_row(host: str, repository: str, age_s: float | None, drill: bool | None) -> dict:
    return {
        "host": host,
        "repository": repository,
        "archive": None if age_s is None else f"{host}-2026-12-02T03:00:00",
        "age_s": age_s,
        "original_size": None if age_s is None else 52428800,
        "deduplicated_size": None if age_s is None else 1048576,
        "last_run_ok": age_s is not None,
        "drill_ok": drill,
        "drill_message": None if drill is None else "restored 214 files, checksums match",
    }


def enveloped(command: str, result: Any, exit: int = 1, error: Any = None) -> dict[str, Any]:
    """A command's result as `--format json` prints it (schemas/cli-output.schema.json)."""
    status = "error" if error else {0: "ok", 1: "failed"}[exit]
    findings = result.get("findings", []) if isinstance(result, dict) else []
    return {"schema_version": 1, "command": command, "status": status, "exit": exit,
            "findings": findings, "result": result, "error": error}  # fmt: skip


def saved(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    os.utime(path, (TAKEN, TAKEN))
    return path


@pytest.fixture
def sources(tmp_path: Path) -> dict[str, Path]:
    history = tmp_path / "history.sqlite"
    with History(history, create=True) as store:
        store.record(report("2026-11-30T03:00:00+00:00", True), "p1", None)
        store.record(report("2026-12-01T03:00:00+00:00", False), "p1", None)
    backup = {
        "plan": "cluster.yml",
        "ok": False,
        "hosts": [
            backup_row("head01", "local", 3600, True),
            backup_row("head01", "offsite", 90000, True),
            backup_row("gpu01", "local", 1800, False),
            backup_row("cpu01", "local", None, None),
        ],
        "findings": [],
    }
    finding = {
        "severity": "error",
        "host": "gpu02",
        "check": "mtu",
        "subject": "storage",
        "expected": "9000",
        "found": "1500",
        "message": "gpu02: mtu storage: expected 9000, found 1500",
    }
    drift = {"plan": "cluster.yml", "ok": False, "hosts": 5, "reachable": 5, "seconds": 4.2}
    return {
        "history": history,
        "backup": saved(tmp_path / "backup.json", enveloped("backup status", backup)),
        "drift": saved(
            tmp_path / "drift.json", enveloped("drift", {**drift, "findings": [finding, finding]})
        ),
    }


def test_every_state_metric_from_its_source(sources: dict[str, Path]) -> None:
    families = collect_state(
        sources["history"], "lab", sources["backup"], sources["drift"], plan=None
    )
    samples = parse(exposition(families))
    last = dt.datetime(2026, 12, 1, 3, tzinfo=dt.UTC).timestamp()
    assert samples[("cluster_plan_acceptance_last_run_timestamp_seconds", frozenset())] == last
    assert samples[("cluster_plan_acceptance_passed", frozenset())] == 0
    # a node's oldest repository counts; a node never backed up is at 0 (always overdue)
    backups = {
        dict(ids)["node"]: value
        for (name, ids), value in samples.items()
        if name == "cluster_plan_backup_last_success_timestamp_seconds"
    }
    assert backups == {"head01": TAKEN - 90000, "gpu01": TAKEN - 1800, "cpu01": 0}
    drills = {
        dict(ids)["node"]: value
        for (name, ids), value in samples.items()
        if name == "cluster_plan_backup_drill_passed"
    }
    assert drills == {"head01": 1, "gpu01": 0}  # cpu01 has had no drill: no sample
    assert samples[("cluster_plan_drift_findings", frozenset())] == 2


def test_sources_not_given_leave_their_metrics_out(tmp_path: Path) -> None:
    assert collect_state(tmp_path / "none.sqlite", "lab", None, None, None) == []
    assert collect_state(None, None, None, None, None) == []
    # saved files not delivered yet (the monitoring role copies what the controller has)
    absent = tmp_path / "absent.json"
    assert collect_state(tmp_path / "none.sqlite", "lab", absent, absent, None) == []


def test_a_delivered_document_alone_gives_its_metrics(sources: dict[str, Path], tmp_path: Path):
    families = collect_state(None, None, tmp_path / "absent.json", sources["drift"], None)
    assert {name for name, _ in parse(exposition(families))} == {"cluster_plan_drift_findings"}


def test_documents_made_by_running_the_commands(tmp_path: Path) -> None:
    calls: list[Sequence[str]] = []

    def run(argv: Sequence[str]) -> tuple[int, str, str]:
        calls.append(argv)
        # exit 1: the command found something, and still printed its document
        return 1, json.dumps(enveloped("drift", {"ok": False, "findings": [{"host": "gpu01"}]})), ""

    document = run_document(tmp_path / "cluster.yml", ["drift"], run)
    assert document.data["findings"] == [{"host": "gpu01"}]
    assert list(calls[0][-5:]) == [
        "cluster_plan",
        "drift",
        str(tmp_path / "cluster.yml"),
        "--format",
        "json",
    ]
    with pytest.raises(CollectorError, match=r"exit 2: cluster\.yml: no such file"):
        run_document(
            tmp_path / "cluster.yml", ["drift"], lambda argv: (2, "", "cluster.yml: no such file")
        )


def test_cli_writes_the_file_and_removes_it_when_a_source_breaks(
    sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "textfiles"
    out.mkdir()
    argv = ["exporter", "state", "--textfile-dir", str(out), "--history", str(sources["history"])]
    argv += ["--cluster", "lab", "--backup-status", str(sources["backup"])]
    argv += ["--drift", str(sources["drift"])]
    assert main(argv) == 0
    before = (out / "cluster_plan_state.prom").read_text()
    assert parse(before)[("cluster_plan_drift_findings", frozenset())] == 2
    sources["drift"].write_text("drift: not JSON")
    assert main(argv) == 1
    assert f"{sources['drift']}: not JSON" in capsys.readouterr().err
    assert not (out / "cluster_plan_state.prom").exists()  # no stale metric served as current
    status = parse((out / "cluster_plan_collector_state.prom").read_text())
    assert status == {("cluster_plan_collector_success", frozenset({("collector", "state")})): 0}


def test_cli_usage_errors(tmp_path: Path) -> None:
    assert main(["exporter", "state", "--textfile-dir", str(tmp_path / "absent")]) == 2
    assert main(["exporter", "state", "--textfile-dir", str(tmp_path), "--cluster", "lab"]) == 2


def test_a_backup_document_of_another_shape_is_refused(tmp_path: Path) -> None:
    bad = enveloped("backup status", {"hosts": [{"repository": "local"}]})
    document = saved(tmp_path / "backup.json", bad)
    with pytest.raises(CollectorError, match=r"backup\.json: \$\.hosts\[0\]\.host is not a host"):
        collect_state(None, None, document, None, None)


def test_a_document_saved_before_the_envelope_is_read_as_its_result(tmp_path: Path) -> None:
    """Saved by a version that printed the result bare: still read until the next save."""
    drift = {"ok": False, "findings": [{"host": "gpu01"}] * 3}
    families = collect_state(None, None, None, saved(tmp_path / "drift.json", drift), None)
    assert parse(exposition(families))[("cluster_plan_drift_findings", frozenset())] == 3


def test_a_command_that_stopped_gives_no_metric_but_its_error(tmp_path: Path) -> None:
    """An error envelope has no result to count: 0 drift findings would be a lie."""
    error = {"message": "the lab 'x' is not up", "file": None}
    stopped = enveloped("drift", None, exit=1, error=error)
    with pytest.raises(CollectorError, match=r"drift\.json: error: the lab 'x' is not up"):
        collect_state(None, None, None, saved(tmp_path / "drift.json", stopped), None)
    with pytest.raises(CollectorError, match="cluster-plan drift: error: the lab 'x' is not up"):
        run_document(tmp_path / "cluster.yml", ["drift"], lambda argv: (1, json.dumps(stopped), ""))
    other = enveloped("backup status", {"hosts": [], "findings": []}, exit=0)
    with pytest.raises(CollectorError, match="the output of `backup status`, not of `drift`"):
        collect_state(None, None, None, saved(tmp_path / "other.json", other), None)
    newer = {**enveloped("drift", {"findings": []}, exit=0), "schema_version": 2}
    with pytest.raises(CollectorError, match="output version 2, not 1"):
        collect_state(None, None, None, saved(tmp_path / "newer.json", newer), None)


def _drift(findings: Any) -> dict[str, Any]:
    return enveloped("drift", {"ok": False, "findings": findings})


def _backup(rows: Any) -> dict[str, Any]:
    return enveloped("backup status", {"hosts": rows, "findings": []})


def _row(**fields: Any) -> dict[str, Any]:
    return {**backup_row("head01", "local", 3600, True), **fields}


def _raw(text: str) -> Any:
    """A document given as text (JSON cannot say NaN: the file can)."""
    return text


# source -> (document, what the message says)
WRONG_SHAPE = {
    "drift-findings-a-number": ("drift", _drift(3), "$.findings is not a list"),
    "drift-a-list": ("drift", [1, 2], "not a JSON object"),
    "backup-age-text": ("backup", _backup([_row(age_s="x")]), "$.hosts[0].age_s is not a number"),
    "backup-host-a-list": ("backup", _backup([_row(host=["a"])]), "$.hosts[0].host is not"),
    "backup-drill-text": ("backup", _backup([_row(drill_ok="yes")]), "$.hosts[0].drill_ok"),
    "backup-hosts-an-object": ("backup", _backup({"head01": {}}), "$.hosts is not a list"),
    "backup-age-nan": (
        "backup",
        _raw(json.dumps(_backup([_row(age_s=1.5)])).replace("1.5", "NaN")),
        "$.result.hosts[0].age_s is NaN",
    ),
    "drift-infinity": (
        "drift",
        _raw(json.dumps(_drift([{"seconds": 1.5}])).replace("1.5", "-Infinity")),
        "is -Infinity",
    ),
}


def _state_argv(out: Path, sources: dict[str, Path]) -> list[str]:
    argv = ["exporter", "state", "--textfile-dir", str(out), "--history", str(sources["history"])]
    argv += ["--cluster", "lab", "--backup-status", str(sources["backup"])]
    return [*argv, "--drift", str(sources["drift"])]


@pytest.mark.parametrize("case", WRONG_SHAPE)
def test_a_document_of_the_wrong_shape_drops_the_stale_metrics(
    case: str, sources: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A source that breaks must not leave success 1 and the old metrics standing: the alert
    CollectorFailing is the only way anyone learns of it."""
    out = tmp_path / "textfiles"
    out.mkdir()
    argv = _state_argv(out, sources)
    assert main(argv) == 0
    assert (out / "cluster_plan_state.prom").is_file()
    source, document, message = WRONG_SHAPE[case]
    text = document if isinstance(document, str) else json.dumps(document)
    sources[source].write_text(text)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"{sources[source]}: " in err and message in err
    assert "Traceback" not in err
    assert not (out / "cluster_plan_state.prom").exists()
    status = parse((out / "cluster_plan_collector_state.prom").read_text())
    assert status == {("cluster_plan_collector_success", frozenset({("collector", "state")})): 0}


@pytest.mark.parametrize("kind", ["fifo", "symlink", "directory"])
def test_a_source_that_is_no_regular_file_is_refused_without_waiting(
    kind: str, sources: dict[str, Path], tmp_path: Path
) -> None:
    """Run as `cluster-plan` runs under its timer (a process of its own, killed if it hangs)."""
    out = tmp_path / "textfiles"
    out.mkdir()
    drift = tmp_path / "drift-source"
    if kind == "fifo":
        os.mkfifo(drift)
    elif kind == "symlink":
        drift.symlink_to(sources["drift"])
    else:
        drift.mkdir()
    argv = _state_argv(out, {**sources, "drift": drift})
    done = subprocess.run(
        [sys.executable, "-m", "cluster_plan", *argv],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert f"{drift}: this is a " in done.stderr and "Traceback" not in done.stderr
    status = parse((out / "cluster_plan_collector_state.prom").read_text())
    assert status == {("cluster_plan_collector_success", frozenset({("collector", "state")})): 0}


def test_a_history_row_of_the_wrong_type_is_a_collector_error(tmp_path: Path) -> None:
    history = tmp_path / "history.sqlite"
    with History(history, create=True) as store:
        store.record(report("2026-11-30T03:00:00+00:00", True), "p1", None)
        store.db.execute("UPDATE runs SET generated_at = 'yesterday'")
    with pytest.raises(CollectorError, match=r"history\.sqlite: run 1: generated_at 'yesterday'"):
        collect_state(history, "lab", None, None, None)
