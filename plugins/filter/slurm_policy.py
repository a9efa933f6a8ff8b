"""Filters for the slurm role's templates: the scheduling policy of cluster_plan.slurm.policy
(pure functions over the expanded plan, unit-tested there)."""

from __future__ import annotations

from typing import Any

from cluster_plan.slurm import policy as _policy

pool_feature = _policy.pool_feature
rack_feature = _policy.rack_feature
dataset_feature = _policy.dataset_feature
gres_name = _policy.gres_name
node_features = _policy.node_features
node_weight = _policy.node_weight
slurm_node_records = _policy.slurm_node_records
slurm_gres_types = _policy.slurm_gres_types
slurm_gres_records = _policy.slurm_gres_records
_class_hosts = _policy._class_hosts
slurm_partition_records = _policy.slurm_partition_records
slurm_empty_classes = _policy.slurm_empty_classes
_default_class = _policy._default_class
slurm_switch_records = _policy.slurm_switch_records
slurm_submit_policy = _policy.slurm_submit_policy
lua_string = _policy.lua_string


class FilterModule:
    """Ansible filters; see each function's docstring in cluster_plan.slurm.policy."""

    def filters(self) -> dict[str, Any]:
        return {
            "slurm_node_records": slurm_node_records,
            "slurm_gres_types": slurm_gres_types,
            "slurm_gres_records": slurm_gres_records,
            "slurm_partition_records": slurm_partition_records,
            "slurm_empty_classes": slurm_empty_classes,
            "slurm_switch_records": slurm_switch_records,
            "slurm_submit_policy": slurm_submit_policy,
            "lua_string": lua_string,
        }
