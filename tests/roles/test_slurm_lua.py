"""job_submit.lua rendered from the lab plan, run under busted with a stubbed `slurm` table."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from role_render import render

SPEC = Path(__file__).resolve().parent / "lua" / "job_submit_spec.lua"
BUSTED = shutil.which("busted")


@pytest.fixture
def job_submit(lab_expanded, tmp_path) -> Path:
    path = tmp_path / "job_submit.lua"
    path.write_text(render("slurm", "job_submit.lua.j2", lab_expanded, "head01"))
    return path


def run_busted(script: Path) -> subprocess.CompletedProcess[str]:
    assert BUSTED
    return subprocess.run(
        [BUSTED, "--output=TAP", str(SPEC)],
        env={"JOB_SUBMIT_LUA": str(script), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(BUSTED is None, reason="busted not installed (apt-get install lua-busted)")
def test_job_submit_policy_passes_busted(job_submit):
    result = run_busted(job_submit)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "not ok" not in result.stdout
    assert result.stdout.count("\nok ") + result.stdout.startswith("ok ") >= 14


@pytest.mark.skipif(BUSTED is None, reason="busted not installed (apt-get install lua-busted)")
def test_busted_catches_a_wrong_route(job_submit):
    """The spec can fail: a script routing inference jobs to the wrong partition is caught."""
    broken = job_submit.read_text().replace(
        '["inference"] = {partition = "inference"}', '["inference"] = {partition = "general"}'
    )
    assert broken != job_submit.read_text()
    job_submit.write_text(broken)
    result = run_busted(job_submit)
    assert result.returncode != 0
    assert "not ok" in result.stdout
