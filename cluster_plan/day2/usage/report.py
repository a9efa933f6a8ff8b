"""Jobs as `sacct` records them -> usage per team of the plan, against the team's budget.

Pure: the command (cluster_plan.day2.usage.command) fetches the `sacct` output; this module reads
it. GPU-hours here are raw (allocated GPUs x elapsed time); Slurm's own budget check counts
usage decayed by `scheduler.slurm.fairshare_half_life_days`, so it allows a little more when a
half-life is set.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from cluster_plan.plan.contract import ExpandedPlan

SACCT_FIELDS = ("JobID", "Account", "User", "State", "ElapsedRaw", "AllocTRES")


@dataclass(frozen=True)
class Job:
    job_id: str
    account: str
    user: str
    state: str
    seconds: int
    tres: dict[str, float]


def sacct_argv(since: str) -> list[str]:
    """The sacct command whose output `parse_sacct` reads: one line per job allocation."""
    return [
        "sacct",
        "--allusers",
        "--allocations",
        "--parsable2",
        "--noheader",
        f"--starttime={since}",
        "--endtime=now",
        "--format=" + ",".join(SACCT_FIELDS),
    ]


def _tres(text: str) -> dict[str, float]:
    """`billing=9,cpu=1,gres/gpu=1,mem=1G,node=1` -> counts (memory and other units left out)."""
    out: dict[str, float] = {}
    for part in filter(None, text.split(",")):
        key, _, value = part.partition("=")
        try:
            out[key] = float(value)
        except ValueError:
            continue
    return out


def _is_record(fields: list[str]) -> bool:
    """Six fields, a job id and a state, and the elapsed seconds as ASCII digits (a day of
    seconds has 5; 18 digits is more than any job ran)."""
    if len(fields) != len(SACCT_FIELDS):
        return False
    elapsed = fields[4]
    return (
        bool(fields[0].strip() and fields[3].split())
        and elapsed.isascii()
        and elapsed.isdigit()
        and len(elapsed) <= 18
    )


def parse_sacct(text: str) -> list[Job]:
    """sacct's parsable output (SACCT_FIELDS, no header) -> jobs; malformed lines are an error
    naming the line."""
    jobs = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        if not _is_record(fields):
            raise ValueError(f"line {number} is not a sacct record ({'|'.join(SACCT_FIELDS)}): "
                             f"{line[:120]!r}")  # fmt: skip
        job_id, account, user, state, elapsed, tres = fields
        jobs.append(Job(job_id, account, user, state.split()[0], int(elapsed), _tres(tres)))
    return jobs


def period_start(period: str, today: dt.date) -> dt.date | None:
    """The first day of the usage period `today` is in (Slurm resets usage then); None for
    `none`, which never resets."""
    if period == "daily":
        return today
    if period == "weekly":  # Slurm's weeks start on Monday
        return today - dt.timedelta(days=today.weekday())
    if period == "monthly":
        return today.replace(day=1)
    if period == "quarterly":
        return today.replace(month=(today.month - 1) // 3 * 3 + 1, day=1)
    if period == "yearly":
        return today.replace(month=1, day=1)
    return None


def _hours(jobs: list[Job], key: str) -> float:
    return sum(job.tres.get(key, 0.0) * job.seconds for job in jobs) / 3600


def _accelerator_types(expanded: ExpandedPlan) -> list[str]:
    types = {
        host["accelerators"]["gres_type"]
        for host in expanded["hosts"].values()
        if host["accelerators"] and host["accelerators"]["kind"] == "accelerator"
    }
    return sorted(types)


def _subtree(teams: dict[str, Any], name: str) -> set[str]:
    members = {name}
    while True:
        more = {t for t, spec in teams.items() if spec["parent"] in members} - members
        if not more:
            return members
        members |= more


def team_usage(expanded: ExpandedPlan, jobs: list[Job], since: str) -> dict[str, Any]:
    """Per team: jobs, CPU-, GPU- and accelerator-hours of its own users, GPU-hours with its
    child teams, and how much of its gpu_hours budget that is; accounts outside the plan's
    teams (root, hand-made ones) under `other`."""
    teams = expanded["teams"]
    accelerators = _accelerator_types(expanded)
    by_account: dict[str, list[Job]] = {}
    for job in jobs:
        by_account.setdefault(job.account, []).append(job)

    def usage(selected: list[Job]) -> dict[str, Any]:
        return {
            "jobs": len(selected),
            "cpu_hours": round(_hours(selected, "cpu"), 3),
            "gpu_hours": round(_hours(selected, "gres/gpu"), 3),
            "accelerator_hours": {
                kind: round(_hours(selected, f"gres/{kind}"), 3) for kind in accelerators
            },
        }

    report: dict[str, Any] = {}
    for name, team in teams.items():
        own = by_account.get(name, [])
        tree = [job for member in _subtree(teams, name) for job in by_account.get(member, [])]
        entry = usage(own)
        entry["gpu_hours_with_children"] = round(_hours(tree, "gres/gpu"), 3)
        budget = team["limits"]["gpu_hours"]
        entry["gpu_hours_budget"] = budget
        entry["budget_used_pct"] = (
            round(100 * entry["gpu_hours_with_children"] / budget, 1) if budget else None
        )
        entry["users"] = {
            user: usage([j for j in own if j.user == user])
            for user in sorted({j.user for j in own if j.user})
        }
        report[name] = entry
    other = {a: usage(j) for a, j in sorted(by_account.items()) if a not in teams}
    scheduler = expanded["scheduler"]
    slurm = scheduler.get("slurm") if scheduler else None
    return {
        "cluster": expanded["cluster"]["name"],
        "since": since,
        "usage_period": slurm["usage_period"] if slurm else None,
        "teams": report,
        "other": other,
    }


def render_text(report: dict[str, Any]) -> str:
    lines = [
        f"usage of {report['cluster']} since {report['since']} (usage period: "
        f"{report['usage_period']})",
        f"{'team':<16} {'jobs':>6} {'CPU-h':>10} {'GPU-h':>10} {'with children':>14} "
        f"{'budget':>10} {'used':>7}",
    ]
    for name, entry in report["teams"].items():
        budget = "-" if entry["gpu_hours_budget"] is None else f"{entry['gpu_hours_budget']:g}"
        used = "-" if entry["budget_used_pct"] is None else f"{entry['budget_used_pct']:g}%"
        lines.append(
            f"{name:<16} {entry['jobs']:>6} {entry['cpu_hours']:>10.2f} "
            f"{entry['gpu_hours']:>10.2f} {entry['gpu_hours_with_children']:>14.2f} "
            f"{budget:>10} {used:>7}"
        )
    for name, entry in report["other"].items():
        lines.append(
            f"{name + ' (no team)':<16} {entry['jobs']:>6} {entry['cpu_hours']:>10.2f} "
            f"{entry['gpu_hours']:>10.2f}"
        )
    return "\n".join(lines)
