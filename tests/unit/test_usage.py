"""Usage per team from sacct's output (cluster_plan/day2/usage), and `cluster-plan usage --from`."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from support.cli_output import result

from cluster_plan import cli
from cluster_plan.api import load_expanded
from cluster_plan.day2.usage.report import parse_sacct, period_start, sacct_argv, team_usage

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"

# sacct --allusers --allocations --parsable2 --noheader --format=JobID,Account,User,State,
# ElapsedRaw,AllocTRES, as Slurm 22.05 prints it for the lab plan's teams
SACCT = """\
11|vision|alice|COMPLETED|3600|billing=10,cpu=2,gres/gpu=1,mem=2G,node=1
12|vision|alice|COMPLETED|1800|billing=18,cpu=2,gres/gpu=2,mem=2G,node=1
13|nlp|bob|RUNNING|7200|billing=34,cpu=2,gres/gpu=4,mem=2G,node=2
14|serving|carol|CANCELLED by 2003|600|billing=10,cpu=2,gres/tpu=2,mem=2G,node=1
15|root|root|COMPLETED|60|billing=1,cpu=1,mem=1G,node=1
16|nlp|bob|FAILED|0|
"""


@pytest.fixture(scope="module")
def expanded():
    return load_expanded(LAB)


def test_parse_sacct_reads_every_allocation():
    jobs = parse_sacct(SACCT)
    assert [j.job_id for j in jobs] == ["11", "12", "13", "14", "15", "16"]
    assert jobs[3].state == "CANCELLED"
    assert jobs[2].tres["gres/gpu"] == 4
    assert jobs[5].tres == {}


def test_a_line_that_is_not_a_record_is_named():
    with pytest.raises(ValueError, match="line 2 is not a sacct record"):
        parse_sacct("11|vision|alice|COMPLETED|60|cpu=1\nJobID|Account\n")


def test_usage_per_team_with_children_and_budget(expanded):
    report = team_usage(expanded, parse_sacct(SACCT), "2027-01-01")
    vision, nlp = report["teams"]["vision"], report["teams"]["nlp"]
    assert vision["jobs"] == 2
    assert vision["gpu_hours"] == 2.0  # 1 GPU x 1 h + 2 GPUs x 0.5 h
    assert vision["cpu_hours"] == 3.0
    assert vision["users"]["alice"]["gpu_hours"] == 2.0
    assert nlp["gpu_hours"] == 8.0
    assert nlp["budget_used_pct"] == round(100 * 8 / 500, 1)
    research = report["teams"]["research"]
    assert research["jobs"] == 0 and research["gpu_hours"] == 0
    assert research["gpu_hours_with_children"] == 10.0
    assert research["budget_used_pct"] == 1.0  # 10 of 1000 GPU-hours
    assert report["teams"]["serving"]["accelerator_hours"] == {"tpu": round(2 * 600 / 3600, 3)}
    assert report["teams"]["serving"]["budget_used_pct"] is None  # no budget
    assert report["other"]["root"]["jobs"] == 1


@pytest.mark.parametrize(
    ("period", "day", "start"),
    [
        ("monthly", dt.date(2027, 3, 17), dt.date(2027, 3, 1)),
        ("weekly", dt.date(2027, 3, 17), dt.date(2027, 3, 15)),  # a Wednesday -> Monday
        ("quarterly", dt.date(2027, 8, 9), dt.date(2027, 7, 1)),
        ("yearly", dt.date(2027, 8, 9), dt.date(2027, 1, 1)),
        ("daily", dt.date(2027, 8, 9), dt.date(2027, 8, 9)),
        ("none", dt.date(2027, 8, 9), None),
    ],
)
def test_the_period_starts_where_slurm_resets_usage(period, day, start):
    assert period_start(period, day) == start


def test_the_command_reads_saved_sacct_output(capsys, tmp_path):
    saved = tmp_path / "sacct.txt"
    saved.write_text(SACCT)
    code = cli.main(["usage", str(LAB), "--from", str(saved), "--since", "2027-01-01",
                     "--format", "json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    report = result(out)
    assert report["since"] == "2027-01-01"
    assert report["teams"]["nlp"]["gpu_hours"] == 8.0
    code = cli.main(["usage", str(LAB), "--from", str(saved)])
    out, _ = capsys.readouterr()
    assert code == 0
    assert any(line.split()[:2] == ["nlp", "2"] for line in out.splitlines()), out


def test_bad_input_is_a_usage_error_not_a_traceback(capsys, tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("this is not sacct output\n")
    assert cli.main(["usage", str(LAB), "--from", str(junk)]) == 2
    assert cli.main(["usage", str(LAB), "--from", str(junk), "--since", "yesterday"]) == 2
    _, err = capsys.readouterr()
    assert "not a sacct record" in err and "not a date" in err
    assert "Traceback" not in err


def test_the_sacct_command_asks_for_what_the_parser_reads():
    argv = sacct_argv("2027-01-01")
    assert "--parsable2" in argv and "--noheader" in argv and "--allusers" in argv
    assert "--format=JobID,Account,User,State,ElapsedRaw,AllocTRES" in argv


def test_the_cluster_is_asked_over_ssh_with_the_users_options(capsys, tmp_path, monkeypatch):
    """The same SSH options as acceptance and change: a ProxyCommand from Ansible's
    ssh_common_args (--ssh-args) reaches a controller behind a bastion."""
    record = tmp_path / "ssh-argv.txt"
    fake = tmp_path / "bin" / "ssh"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {record}\ncat <<'END'\n{SACCT}END\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    code = cli.main(["usage", str(LAB), "--since", "2027-01-01", "--ssh-user", "admin",
                     "--ssh-key", "/keys/id", "--ssh-args", "-o 'ProxyCommand=nc %h %p'",
                     "--format", "json"])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert result(out)["teams"]["nlp"]["gpu_hours"] == 8.0
    argv = record.read_text().splitlines()
    controller = load_expanded(LAB)["groups"]["slurm_controller"][0]
    address = load_expanded(LAB)["hosts"][controller]["address"]
    assert "ProxyCommand=nc %h %p" in argv and argv[argv.index("-i") + 1] == "/keys/id"
    assert argv[-2] == f"admin@{address}" and argv[-1].startswith("sacct ")
