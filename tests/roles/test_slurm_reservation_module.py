"""The slurm_reservation module's parsing and comparison (the lab test runs it for real)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "modules"))

import slurm_reservation as module

SHOW = (
    "ReservationName=maintenance StartTime=2027-01-05T02:00:00 EndTime=2027-01-05T04:00:00 "
    "Duration=02:00:00 Nodes=gpu[01-02] NodeCnt=2 CoreCnt=4 Features=(null) "
    "PartitionName=(null) Flags=MAINT,SPEC_NODES TRES=cpu=4 Users=root Groups=(null) "
    "Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a "
    "MaxStartDelay=(null)"
)

PLAN = {
    "start": "2027-01-05T02:00:00",
    "duration_minutes": 120,
    "nodes": ["gpu01", "gpu02"],
    "flags": ["maint"],
    "users": ["root"],
    "accounts": [],
}


def test_parse_show_reads_key_values():
    fields = module.parse_show(SHOW)
    assert fields["Nodes"] == "gpu[01-02]"
    assert fields["Flags"] == "MAINT,SPEC_NODES"


def test_expand_hostlist():
    assert module.expand_hostlist("gpu[01-02],cpu01") == ["gpu01", "gpu02", "cpu01"]
    assert module.expand_hostlist("n[1,3-4]") == ["n1", "n3", "n4"]
    assert module.expand_hostlist("") == []


def test_matching_reservation_needs_no_update():
    assert module.differences(module.parse_show(SHOW), module.wanted_fields(PLAN)) == {}


def test_changed_plan_updates_only_what_differs():
    plan = {**PLAN, "duration_minutes": 180, "nodes": ["gpu01", "gpu02", "gpu03"]}
    diff = module.differences(module.parse_show(SHOW), module.wanted_fields(plan))
    assert diff == {"Duration": "180", "Nodes": "gpu01,gpu02,gpu03"}


def test_durations_with_days():
    assert module._minutes("1-02:30:00") == 1440 + 150
    assert module._minutes("02:00:00") == 120


def test_accounts_are_kept_too_and_null_is_none():
    current = module.parse_show(SHOW)
    assert module.differences(current, module.wanted_fields(PLAN)) == {}
    wanted = module.wanted_fields({**PLAN, "accounts": ["team-a"]})
    assert module.differences(current, wanted) == {"Accounts": "team-a"}
