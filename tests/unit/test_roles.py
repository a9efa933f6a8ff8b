"""The named role sets (cluster_plan.plan.roles): each a subset of the schema's roles, the
Slurm and Kubernetes hosts those the playbooks converge, one definition each in the package,
and the checks that ask them agree on what a node that runs jobs is."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import yaml
from plan_text import findings, replace_once

from cluster_plan.plan import roles
from cluster_plan.plan.checks.fitness import pool_gpus
from cluster_plan.plan.defaults import with_defaults
from cluster_plan.plan.nodes import iter_nodes

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_ROLES = json.loads((ROOT / "schemas" / "cluster-plan.schema.json").read_text())["$defs"][
    "role"
]["enum"]
BAD = ROOT / "tests" / "plans" / "bad"


def test_all_roles_are_the_schema_s_and_every_set_is_a_subset() -> None:
    assert list(roles.ALL_ROLES) == SCHEMA_ROLES
    for name, chosen in roles.NAMED_SETS.items():
        assert chosen, name
        assert chosen <= set(SCHEMA_ROLES), (name, chosen - set(SCHEMA_ROLES))


def _play_roles(playbook: str) -> set[str]:
    plays = yaml.safe_load((ROOT / "playbooks" / playbook).read_text())
    # the mirror's play runs on the plan's mirror host: a group the inventory makes from
    # scheduler.kubernetes.mirror, not a role
    patterns = {play["hosts"] for play in plays if play["hosts"] != "k8s_mirror"}
    (pattern,) = patterns
    return set(pattern.split(":"))


def test_the_slurm_and_kubernetes_hosts_are_those_their_stages_converge() -> None:
    assert _play_roles("slurm.yml") == roles.SLURM_HOST_ROLES
    assert _play_roles("kubernetes.yml") == roles.KUBERNETES_NODE_ROLES


def role_literals(path: Path) -> list[tuple[int, list[str]]]:
    """(line, names) of every set, tuple or list written out of two or more role names."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Set | ast.Tuple | ast.List) and len(node.elts) >= 2:
            names = [e.value for e in node.elts if isinstance(e, ast.Constant)]
            if len(names) == len(node.elts) and set(names) <= set(SCHEMA_ROLES):
                found.append((node.lineno, names))
    return found


def test_the_role_sets_are_spelt_out_in_one_module() -> None:
    spelt = {}
    for path in sorted((ROOT / "cluster_plan").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel != "cluster_plan/plan/roles.py" and role_literals(path):
            spelt[rel] = role_literals(path)
    assert spelt == {}, "import the set from cluster_plan.plan.roles (or name it there)"
    assert role_literals(ROOT / "cluster_plan" / "plan" / "roles.py")


def test_a_host_named_like_any_role_is_refused() -> None:
    """ceph_mds is a role, and so an Ansible group, like every other role."""
    text = replace_once(
        (ROOT / "tests" / "plans" / "base.yml").read_text(),
        ('stor: {count: 3, hostname: "stor{n:02d}"', 'stor: {count: 1, hostname: "ceph_mds"'),
    )
    assert ("error", "hostname-is-group", "$.node_groups.stor.hostname") in findings(text)


CONTROL_PLANE_POOL = replace_once(
    (BAD / "k8s-pool-without-worker.yml").read_text(),
    ("roles: [], pool: gpu}", "roles: [k8s_control_plane], pool: gpu}"),
)


def test_a_control_plane_node_alone_takes_no_work_of_its_pool() -> None:
    """It keeps the control plane's NoSchedule taint and gets no pool label."""
    assert ("error", "pool-not-schedulable", "$.node_groups.gpu.roles") in findings(
        CONTROL_PLANE_POOL
    )


def test_a_pool_s_gpus_are_those_of_the_nodes_that_run_its_jobs() -> None:
    plan = with_defaults(yaml.safe_load(CONTROL_PLANE_POOL))
    assert pool_gpus(plan, list(iter_nodes(plan))) == {}
    as_worker = CONTROL_PLANE_POOL.replace("[k8s_control_plane], pool", "[k8s_worker], pool")
    worker = with_defaults(yaml.safe_load(as_worker))
    assert pool_gpus(worker, list(iter_nodes(worker))) == {"gpu": 4}
