"""`cluster-plan backup status` judged offline from nodes' status documents."""

from __future__ import annotations

from typing import Any

from cluster_plan.backup.status import duration, judge, render, size
from cluster_plan.day2.remote.session import HostFacts

NOW = 1_800_000_000.0
DAY = 86400.0


def status(age_s: float | None = 3600, drill_ok: bool | None = True, **extra: Any) -> HostFacts:
    repos = {}
    if age_s is not None:
        repos["target"] = {
            "archive": "gpu01-2027-01-15T02:00:00",
            "time": NOW - age_s,
            "original_size": 12 * 1024 * 1024,
            "deduplicated_size": 40 * 1024,
            "ok": True,
            "error": None,
        }
    drills = {} if drill_ok is None else {"target": {"ok": drill_ok, "message": "m"}}
    document = {
        "host": "gpu01",
        "now": NOW,
        "max_age_s": DAY + 1800 + 3600,
        "restore_test": True,
        "expected": ["target"],
        "repositories": repos,
        "drills": drills,
        **extra,
    }
    return HostFacts(True, {"backup": document})


def test_a_fresh_snapshot_with_a_passing_drill_is_fine() -> None:
    rows, findings = judge({"gpu01": status()})
    assert findings == []
    assert rows[0].archive == "gpu01-2027-01-15T02:00:00" and rows[0].drill_ok is True
    text = render(rows, findings)
    assert "gpu01      target        1h 0m   12.0 MiB   40.0 KiB  ok" in text.splitlines()
    assert text.endswith("all backups current on 1 host(s)")


def test_a_snapshot_older_than_the_schedule_allows_is_overdue() -> None:
    _, findings = judge({"gpu01": status(age_s=2 * DAY)})
    assert [f.render() for f in findings] == [
        "gpu01: snapshot target: expected a snapshot at most 1d 1h old, found 2d 0h old"
    ]


def test_a_failed_drill_or_run_is_reported() -> None:
    failed = status(drill_ok=False)
    failed.facts["backup"]["repositories"]["target"].update(ok=False, error="borg create: x")
    _, findings = judge({"gpu01": failed})
    assert [(f.check, f.found) for f in findings] == [
        ("drill", "failed: m"),
        ("backup-run", "borg create: x"),
    ]


def test_nothing_yet_unreachable_or_not_set_up() -> None:
    results = {
        "gpu01": status(age_s=None, drill_ok=None),
        "gpu02": HostFacts(False, reason="the lab 'day2' is not up"),
        "cpu01": HostFacts(True, {"backup": {}}),
        "stor01": HostFacts(True, {}, {"backup": "cluster-plan-backup status: not JSON"}),
    }
    _, findings = judge(results)
    assert sorted(f.render() for f in findings) == [
        "cpu01: backup: expected backups set up, found no cluster-plan-backup "
        "(run playbooks/backup.yml)",
        "gpu01: snapshot target: expected a snapshot, found none yet",
        "gpu02: unreachable: expected an SSH session, found the lab 'day2' is not up",
        "stor01: backup: expected its backup status, found cluster-plan-backup status: not JSON",
    ]


def test_an_unknown_schedule_cannot_be_judged_current() -> None:
    _, findings = judge({"gpu01": status(max_age_s=None)})
    assert [f.found for f in findings] == ["a schedule systemd-analyze cannot read"]


def test_durations_and_sizes_read_well() -> None:
    assert [duration(s) for s in (None, 5, 125, 7200 + 60, 3 * DAY + 7200)] == [
        "-", "5s", "2m 5s", "2h 1m", "3d 2h",
    ]  # fmt: skip
    assert [size(v) for v in (None, 512, 2048, 5 * 1024**3)] == ["-", "512 B", "2.0 KiB", "5.0 GiB"]
