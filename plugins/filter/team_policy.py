"""Ansible filters for the slurm and common roles: the team records of
cluster_plan.teams.policy (pure functions over the expanded plan, unit-tested there). This
only adapts."""

from __future__ import annotations

from typing import Any

from cluster_plan.teams import policy


class FilterModule:
    """Ansible filters; see each function's docstring in cluster_plan.teams.policy."""

    def filters(self) -> dict[str, Any]:
        return {
            "team_users": policy.team_users,
            "slurm_minutes": policy.slurm_minutes,
            "slurm_accounting_tres": policy.slurm_accounting_tres,
            "slurm_billing_weights": policy.slurm_billing_weights,
            "slurm_decay_half_life": policy.slurm_decay_half_life,
            "slurm_qos_records": policy.slurm_qos_records,
            "slurm_account_records": policy.slurm_account_records,
            "slurm_user_records": policy.slurm_user_records,
            "slurm_team_policy": policy.slurm_team_policy,
        }
