"""The plan's teams and workload classes as the records Slurm's accounting and the nodes'
accounts are made from.

Pure functions over plain dicts (the `cluster_plan` group variable, and the `plan_host` of
each compute node for the accelerators they hold). A team is a Slurm account, each of its users
an association under it, each workload class a QOS; docs/scheduling.md has the whole mapping.
"""

from __future__ import annotations

import re
from typing import Any

from cluster_plan.slurm.policy import slurm_name

Plan = dict[str, Any]
Host = dict[str, Any]

_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
# QOS and accounts this project made carry this mark, so that pruning never touches others.
MARK = "cluster-plan"


def slurm_minutes(text: str | None) -> int | None:
    """A Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in whole minutes;
    None for UNLIMITED, INFINITE or nothing."""
    if text is None or str(text).strip().upper() in ("", "UNLIMITED", "INFINITE", "-1"):
        return None
    match = _TIME.match(str(text).strip())
    if not match:
        raise ValueError(f"not a Slurm time: {text!r}")
    days, first, second, third = match.groups()
    if days is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
        return int(days) * 1440 + hours * 60 + minutes + (1 if seconds else 0)
    if third is not None:  # HH:MM:SS
        return int(first) * 60 + int(second) + (1 if int(third) else 0)
    if second is not None:  # MM:SS
        return int(first) + (1 if int(second) else 0)
    return int(first)


def team_order(teams: dict[str, Any]) -> list[str]:
    """Team names with every parent before its children, otherwise in plan order."""
    ordered: list[str] = []

    def visit(name: str, seen: tuple[str, ...]) -> None:
        if name in ordered or name in seen or name not in teams:
            return
        parent = teams[name].get("parent")
        if parent:
            visit(parent, (*seen, name))
        ordered.append(name)

    for name in teams:
        visit(name, ())
    return ordered


def team_users(teams: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every user of every team: {name, uid, ssh_keys, team}, in plan order."""
    return [
        {
            "name": user["name"],
            "uid": int(user["uid"]),
            "ssh_keys": list(user.get("ssh_keys") or []),
            "team": team,
        }
        for team, spec in (teams or {}).items()
        for user in spec.get("users") or []
    ]


def _gres_names(hosts: list[Host]) -> tuple[bool, list[str]]:
    """(whether any compute node has NVIDIA GPUs, the gres names of the other accelerators)."""
    gpus = False
    others: set[str] = set()
    for host in hosts:
        accelerators = host.get("accelerators")
        if not accelerators or not accelerators.get("count"):
            continue
        if accelerators.get("kind") == "gpu" or accelerators.get("vendor") == "nvidia":
            gpus = True
        else:
            others.add(slurm_name(accelerators["gres_type"]))
    return gpus, sorted(others)


def slurm_accounting_tres(hosts: list[Host]) -> str:
    """AccountingStorageTRES: the gres Slurm must count for limits and billing."""
    gpus, others = _gres_names(hosts)
    return ",".join([*(["gres/gpu"] if gpus else []), *(f"gres/{g}" for g in others)])


def slurm_billing_weights(hosts: list[Host], weights: dict[str, Any]) -> str:
    """TRESBillingWeights of the partitions: what one unit of each resource costs in fair
    share, from the role's weights for a CPU, an NVIDIA GPU and another accelerator."""
    gpus, others = _gres_names(hosts)
    parts = [f"CPU={float(weights['cpu'])}"]
    if gpus:
        parts.append(f"GRES/gpu={float(weights['gpu'])}")
    parts += [f"GRES/{g}={float(weights['accelerator'])}" for g in others]
    return ",".join(parts)


def slurm_decay_half_life(days: float) -> str:
    """PriorityDecayHalfLife from days: "7-0", "0-12:00" for half a day, "0" for no decay."""
    minutes = round(float(days) * 1440)
    if minutes == 0:
        return "0"
    return f"{minutes // 1440}-{(minutes % 1440) // 60:02d}:{minutes % 60:02d}"


def slurm_qos_records(plan: Plan) -> list[dict[str, Any]]:
    """One QOS per workload class: its priority and its longest job."""
    classes = (plan.get("scheduler") or {}).get("workload_classes") or {}
    return [
        {
            "name": slurm_name(name),
            "priority": int(spec.get("priority") or 0),
            "max_wall": slurm_minutes(spec.get("max_time")),
            "description": f"{MARK}: workload class {name}",
        }
        for name, spec in classes.items()
    ]


def _default_class(plan: Plan, allowed: list[str]) -> str | None:
    """The team's default class: the first allowed class the plan marks default, else the
    first allowed class (None when the team has none)."""
    classes = (plan.get("scheduler") or {}).get("workload_classes") or {}
    for name in allowed:
        if (classes.get(name) or {}).get("default"):
            return name
    return allowed[0] if allowed else None


def _tres_limits(
    limits: dict[str, Any], gpus: bool, others: list[str]
) -> tuple[dict[str, int], dict[str, int]]:
    """A team's GrpTRES (GPUs, other accelerators) and GrpTRESMins (GPU-hours), for the GRES
    the compute nodes have."""
    grp_tres: dict[str, int] = {}
    if limits.get("gpus") is not None and gpus:
        grp_tres["gres/gpu"] = int(limits["gpus"])
    if limits.get("accelerators") is not None:
        grp_tres.update({f"gres/{g}": int(limits["accelerators"]) for g in others})
    grp_tres_mins: dict[str, int] = {}
    if limits.get("gpu_hours") is not None and gpus:
        grp_tres_mins["gres/gpu"] = round(float(limits["gpu_hours"]) * 60)
    return grp_tres, grp_tres_mins


def slurm_account_records(plan: Plan, hosts: list[Host]) -> list[dict[str, Any]]:
    """One account per team, parents first: share, limits and the QOS of its classes."""
    teams = plan.get("teams") or {}
    gpus, others = _gres_names(hosts)
    records = []
    for name in team_order(teams):
        team = teams[name]
        limits = team.get("limits") or {}
        grp_tres, grp_tres_mins = _tres_limits(limits, gpus, others)
        allowed = list(team.get("classes") or [])
        default = _default_class(plan, allowed)
        records.append(
            {
                "name": name,
                "parent": team.get("parent") or "root",
                "fairshare": int(team.get("fairshare") or 1),
                "description": team.get("description") or f"team {name}",
                "qos": sorted(slurm_name(c) for c in allowed),
                "default_qos": slurm_name(default) if default else None,
                "grp_tres": grp_tres,
                "grp_tres_mins": grp_tres_mins,
                "max_wall": slurm_minutes(limits.get("max_time")),
            }
        )
    return records


def slurm_user_records(plan: Plan) -> list[dict[str, Any]]:
    """One association per user, under the account of the user's team."""
    return [{"name": u["name"], "account": u["team"]} for u in team_users(plan.get("teams"))]


def slurm_team_policy(plan: Plan) -> dict[str, Any]:
    """What job_submit.lua checks before Slurm's own association checks: the plan's users by
    UID (anyone else is refused with a message naming the rule) and each team's classes."""
    teams = plan.get("teams") or {}
    return {
        "teams": {name: sorted(spec.get("classes") or []) for name, spec in teams.items()},
        "users": {u["uid"]: {"name": u["name"], "team": u["team"]} for u in team_users(teams)},
    }
