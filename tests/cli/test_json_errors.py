"""Under --format json a command that fails with an error, not findings, still prints one JSON
document on stdout, the envelope with {"status": "error", "error": {...}}; a command that had
its result before failing keeps it in the same document."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.cli_output import envelope

from cluster_plan import cli

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"


@pytest.fixture
def stale(tmp_path: Path) -> Path:
    """The lab plan with one more GPU node than its lock has."""
    plan = tmp_path / "cluster.yml"
    plan.write_text(LAB.read_text().replace("  gpu:\n    count: 2", "  gpu:\n    count: 3"))
    shutil.copy(LAB.with_name("cluster.lock.json"), tmp_path / "cluster.lock.json")
    return plan


def test_lock_check_out_of_date(capsys: pytest.CaptureFixture[str], stale: Path) -> None:
    assert cli.main(["lock", "--check", "--format", "json", str(stale)]) == 1
    out, err = capsys.readouterr()
    document = envelope(out)
    assert document["status"] == "error" and document["command"] == "lock"
    assert "out of date" in document["error"]["message"]
    assert document["exit"] == 1 and document["findings"] == []
    assert document["result"] is None  # --check stops before it has one
    assert "out of date" in err  # people read it too


def test_unknown_host_for_expand(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["expand", str(LAB), "--host", "nope01", "--format", "json"]) == 2
    document = envelope(capsys.readouterr().out)
    assert document["status"] == "error" and "nope01" in document["error"]["message"]
    assert document["exit"] == 2


def test_a_plan_error_is_an_envelope_with_its_findings(
    capsys: pytest.CaptureFixture[str], stale: Path
) -> None:
    assert cli.main(["audit", "--format", "json", str(stale)]) == 1
    document = envelope(capsys.readouterr().out)
    assert document["status"] == "error" and document["exit"] == 1
    assert [f["code"] for f in document["findings"]] == ["lock-stale"]
    assert document["error"]["message"].startswith(f"{stale.with_name('cluster.lock.json')}: ")


def test_a_result_made_before_the_failure_is_in_the_document(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """diff prints its changes, then refuses the destructive ones (exit 3): one document."""
    new = tmp_path / "cluster.yml"
    new.write_text(LAB.read_text().replace("  gpu:\n    count: 2", "  gpu:\n    count: 1"))
    shutil.copy(LAB.with_name("cluster.lock.json"), tmp_path / "cluster.lock.json")
    assert cli.main(["diff", str(LAB), str(new), "--format", "json"]) == 3
    document = envelope(capsys.readouterr().out)  # one document: json.loads takes no more
    assert document["status"] == "error" and document["exit"] == 3
    assert "--allow-destructive" in document["error"]["message"]
    assert isinstance(document["result"], list) and document["result"]
