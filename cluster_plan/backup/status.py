"""Judge each node's backups from what `cluster-plan-backup status` prints on it: the last
snapshot per repository (age, size, what it added) and the last restore drill.

Pure: the node's status document (and its own clock, `now`) in, rows and findings out. A
snapshot is overdue when it is older than the node's `max_age_s` (the schedule's longest
gap, its random delay and a grace, computed on the node by systemd-analyze).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster_plan.day2.remote.findings import HostFinding
from cluster_plan.day2.remote.session import HostFacts


@dataclass(frozen=True)
class BackupRow:
    host: str
    repository: str
    archive: str | None
    age_s: float | None
    original_size: int | None
    deduplicated_size: int | None
    last_run_ok: bool | None
    drill_ok: bool | None
    drill_message: str | None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h"
    if hours:
        return f"{hours}h {minutes}m"
    return f"{minutes}m {secs}s" if minutes else f"{secs}s"


def size(value: int | None) -> str:
    if value is None:
        return "-"
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if amount < 1024 or unit == "TiB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{amount:.1f} TiB"


def judge_host(name: str, result: HostFacts) -> tuple[list[BackupRow], list[HostFinding]]:
    if not result.reachable:
        return [], [HostFinding(name, "unreachable", "", "an SSH session", result.reason or "?")]
    if "backup" in result.errors:
        return [], [HostFinding(name, "backup", "", "its backup status", result.errors["backup"])]
    status = result.facts.get("backup") or {}
    if not status:
        found = "no cluster-plan-backup (run playbooks/backup.yml)"
        return [], [HostFinding(name, "backup", "", "backups set up", found)]
    rows, findings = [], []
    for repo in status.get("expected") or []:
        entry = (status.get("repositories") or {}).get(repo) or {}
        row = _backup_row(name, repo, status, entry)
        rows.append(row)
        restore_test = bool(status.get("restore_test"))
        findings += _judge_repository(name, repo, row, status.get("max_age_s"), restore_test)
        if entry and entry.get("ok") is False:
            findings.append(
                HostFinding(name, "backup-run", repo, "the last backup to succeed", entry["error"])
            )
    return rows, findings


def _backup_row(name: str, repo: str, status: dict[str, Any], entry: dict[str, Any]) -> BackupRow:
    """One repository's last snapshot and restore drill, as the host reported them."""
    drill = (status.get("drills") or {}).get(repo) or {}
    taken = entry.get("time")
    return BackupRow(
        host=name,
        repository=repo,
        archive=entry.get("archive"),
        age_s=float(status.get("now") or 0) - float(taken) if taken is not None else None,
        original_size=entry.get("original_size"),
        deduplicated_size=entry.get("deduplicated_size"),
        last_run_ok=entry.get("ok") if entry else None,
        drill_ok=drill.get("ok") if drill else None,
        drill_message=drill.get("message") if drill else None,
    )


def _judge_repository(
    name: str, repo: str, row: BackupRow, max_age: float | None, restore_test: bool
) -> list[HostFinding]:
    findings = []
    if row.age_s is None:
        findings.append(HostFinding(name, "snapshot", repo, "a snapshot", "none yet"))
    elif max_age is None:
        found = "a schedule systemd-analyze cannot read"
        findings.append(HostFinding(name, "snapshot", repo, "a known schedule", found))
    elif row.age_s > max_age:
        expected = f"a snapshot at most {duration(max_age)} old"
        findings.append(HostFinding(name, "snapshot", repo, expected, f"{duration(row.age_s)} old"))
    if restore_test and row.age_s is not None:
        if row.drill_ok is None:
            findings.append(HostFinding(name, "drill", repo, "a restore drill", "none yet"))
        elif not row.drill_ok:
            found = f"failed: {row.drill_message}"
            findings.append(HostFinding(name, "drill", repo, "a passing restore drill", found))
    return findings


def judge(results: dict[str, HostFacts]) -> tuple[list[BackupRow], list[HostFinding]]:
    rows: list[BackupRow] = []
    findings: list[HostFinding] = []
    for name, result in results.items():
        host_rows, host_findings = judge_host(name, result)
        rows += host_rows
        findings += host_findings
    return rows, findings


def render(rows: list[BackupRow], findings: list[HostFinding]) -> str:
    header = f"{'host':10} {'repository':10} {'age':>8} {'size':>10} {'added':>10}  drill"
    lines = [header]
    for r in rows:
        drill = {None: "-", True: "ok", False: "FAILED"}[r.drill_ok]
        lines.append(
            f"{r.host:10} {r.repository:10} {duration(r.age_s):>8} {size(r.original_size):>10} "
            f"{size(r.deduplicated_size):>10}  {drill}"
        )
    lines += [f.render() for f in findings]
    hosts = len({r.host for r in rows} | {f.host for f in findings})
    verdict = f"{len(findings)} problem(s)" if findings else "all backups current"
    lines.append(f"{verdict} on {hosts} host(s)")
    return "\n".join(lines)
