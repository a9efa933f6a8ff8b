"""`cluster-plan change` refuses what would lose data: re-provisioning a host the cluster
cannot lose, and every setting `diff` calls destructive. `diff` and `change` agree on every
impact: each of diff's destructive rules is walked through change. A refusal's reasons reach
the JSON envelope (its `error` and one finding each)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.change_plans import LAB_PLAN, grow_cpu, write_plan

from cluster_plan.day2.change.operations import Operation, Options, plan_operations
from cluster_plan.day2.change.playbooks import stages_of
from cluster_plan.day2.change.triage import SERVICE_ROLES, ChangeRefused
from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.plan.findings import format_path
from cluster_plan.views.diff import deployed_pair, destructive_rules, diff_expanded

REPO = Path(__file__).resolve().parents[2]
STAGES = stages_of(REPO / "site.yml")
K8S_PLAN = REPO / "inventory" / "examples" / "k8s-inference.yml"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster_plan", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=REPO,
        stdin=subprocess.DEVNULL,
    )


def edited(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """The lab plan with `edit` applied and the lab's lock beside it."""
    plan = yaml.safe_load(LAB_PLAN.read_text())
    edit(plan)
    path = tmp_path / "cluster.yml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    (tmp_path / "cluster.lock.json").write_text(LAB_PLAN.with_suffix(".lock.json").read_text())
    return path


def operations(old: ExpandedPlan, new: ExpandedPlan, **options: Any) -> list[Operation]:
    changes = diff_expanded(old, new)
    return plan_operations(old, new, changes, Options(stages=STAGES, **options))


@pytest.fixture(scope="module")
def lab() -> ExpandedPlan:
    return deployed_pair(LAB_PLAN, LAB_PLAN)[0]


@pytest.fixture(scope="module")
def k8s() -> ExpandedPlan:
    return deployed_pair(K8S_PLAN, K8S_PLAN)[0]


# --- hosts the cluster cannot lose ----------------------------------------------------------


@pytest.mark.parametrize("host", ["head01", "stor01", "osd01"])
def test_replacing_a_host_the_cluster_cannot_lose_is_refused(lab: ExpandedPlan, host: str):
    with pytest.raises(ChangeRefused) as refused:
        operations(lab, lab, replace=(host,))
    (refusal,) = refused.value.refusals
    assert refusal.host == host and refusal.path == format_path(("hosts", host))
    assert f"{host} runs " in refusal.message and "move those roles to another host first" in (
        refusal.message
    )
    for role in set(lab["hosts"][host]["roles"]) & SERVICE_ROLES.keys():
        assert role in refusal.message and SERVICE_ROLES[role] in refusal.message


def test_what_head01_holds_is_named_when_its_replacement_is_refused(lab: ExpandedPlan):
    with pytest.raises(ChangeRefused) as refused:
        operations(lab, lab, replace=("head01",))
    message = refused.value.reasons[0]
    for held in ("the backup repositories", "the accounting database", "Prometheus' data",
                 "munge key", "the scheduler's state"):  # fmt: skip
        assert held in message, message


def test_replacing_a_compute_node_is_still_carried_out(lab: ExpandedPlan):
    (replace,) = operations(lab, lab, replace=("cpu01",))
    assert (replace.kind, replace.hosts) == ("replace", ("cpu01",))


def test_new_disks_on_the_monitors_profile_replace_no_monitor(tmp_path: Path):
    """A disk added to the profile the monitors and osd01 share would re-provision all four:
    each is refused, by the rule that refuses their removal."""

    def bigger_storage(plan: dict[str, Any]) -> None:
        disks = plan["hardware"]["storage"]["disks"]
        disks.append({**disks[-1], "name": "osd1"})

    old, new = deployed_pair(LAB_PLAN, edited(tmp_path, bigger_storage))
    with pytest.raises(ChangeRefused) as refused:
        operations(old, new)
    hosts = sorted(r.host for r in refused.value.refusals if r.host)
    assert hosts == ["osd01", "stor01", "stor02", "stor03"], refused.value.reasons
    assert all("re-provisioned (new hardware (disks" in r for r in refused.value.reasons)


def test_new_disks_on_the_head_s_profile_replace_neither_it_nor_cpu01(tmp_path: Path):
    def bigger_cpu(plan: dict[str, Any]) -> None:
        plan["hardware"]["cpu"]["disks"].append(
            {"name": "data", "size_gb": 100, "type": "nvme", "use": "scratch"}
        )

    old, new = deployed_pair(LAB_PLAN, edited(tmp_path, bigger_cpu))
    with pytest.raises(ChangeRefused) as refused:
        operations(old, new)
    assert [r.host for r in refused.value.refusals] == ["head01"], refused.value.reasons


def test_replacing_the_head_from_the_command_line_is_refused_and_says_why_in_json():
    done = cli("change", str(LAB_PLAN), str(LAB_PLAN), "--replace", "head01", "--dry-run",
               "--format", "json")  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["status"] == "error" and envelope["exit"] == 3
    assert envelope["error"] is not None and "head01 runs" in envelope["error"]["message"]
    (finding,) = envelope["findings"]
    assert finding["severity"] == "error" and finding["host"] == "head01"
    assert finding["path"] == "$.hosts.head01" and "backup repositories" in finding["message"]
    assert envelope["result"]["operations"] == [] and envelope["result"]["refused"]
    assert "Traceback" not in done.stderr and "head01 runs" in done.stderr  # for people


def test_a_refusal_in_text_lists_each_reason(tmp_path: Path):
    done = cli("change", str(LAB_PLAN), str(LAB_PLAN), "--replace", "head01", "--replace",
               "stor01", "--dry-run")  # fmt: skip
    assert done.returncode == 3
    refused = [line for line in done.stdout.splitlines() if line.startswith("refused: ")]
    assert [line.split()[1] for line in refused] == ["head01", "stor01"], done.stdout
    assert "2 reason(s)" in done.stderr


def test_an_unconfirmed_change_says_why_in_json(tmp_path: Path):
    grown = write_plan(tmp_path, grow_cpu)
    done = cli("change", str(LAB_PLAN), str(grown), "--journal-dir",
               str(tmp_path / "j"), "--format", "json")  # fmt: skip
    assert done.returncode == 3, done.stderr
    envelope = json.loads(done.stdout)
    assert envelope["error"] is not None and "pass --yes" in envelope["error"]["message"]


# --- settings that lose data: diff and change agree ------------------------------------------


def test_removing_a_pool_is_destructive_in_diff_and_refused_by_change(tmp_path: Path):
    def drop_volumes(plan: dict[str, Any]) -> None:
        pools = plan["storage"]["ceph"]["pools"]
        plan["storage"]["ceph"]["pools"] = [p for p in pools if p["name"] != "volumes"]
        plan["acceptance"]["storage"]["pool"] = "datasets"

    new = edited(tmp_path, drop_volumes)
    diff = cli("diff", str(LAB_PLAN), str(new), "--format", "json")
    assert diff.returncode == 3
    (pool,) = [c for c in json.loads(diff.stdout)["result"] if c["destructive"]]
    assert pool["path"] == "$.storage.ceph.pools.volumes" and pool["loss"]
    change = cli("change", str(LAB_PLAN), str(new), "--dry-run", "--format", "json")
    assert change.returncode == 3, change.stdout + change.stderr
    paths = [f["path"] for f in json.loads(change.stdout)["findings"]]
    assert "$.storage.ceph.pools.volumes" in paths


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (
            lambda p: p["scheduler"]["slurm"].update(state_save="/shared/slurm/state2"),
            "$.scheduler.slurm.state_save",
        ),
        (lambda p: p["storage"]["ceph"].update(release="quincy"), "$.storage.ceph.release"),
    ],
    ids=["slurm-state-moved", "new-ceph-release"],
)
def test_a_setting_that_needs_a_migration_is_refused_by_both(tmp_path: Path, edit, path):
    new = edited(tmp_path, edit)
    assert cli("diff", str(LAB_PLAN), str(new)).returncode == 3
    change = cli("change", str(LAB_PLAN), str(new), "--dry-run", "--format", "json")
    assert change.returncode == 3, change.stdout + change.stderr
    findings = json.loads(change.stdout)["findings"]
    assert [f["path"] for f in findings] == [path], findings
    assert "by hand" in findings[0]["message"]


def _at(plan: Any, *path: str) -> Any:
    for key in path:
        plan = plan[key]
    return plan


def _set(*path: str, value: Any) -> Callable[[ExpandedPlan], None]:
    def edit(plan: ExpandedPlan) -> None:
        _at(plan, *path[:-1])[path[-1]] = value

    return edit


def _drop(*path: str) -> Callable[[ExpandedPlan], None]:
    def edit(plan: ExpandedPlan) -> None:
        del _at(plan, *path[:-1])[path[-1]]

    return edit


def _drop_pool(plan: ExpandedPlan) -> None:
    pools = plan["storage"]["ceph"]["pools"]
    plan["storage"]["ceph"]["pools"] = [p for p in pools if p["name"] != "volumes"]


def _more_disks(host: str) -> Callable[[ExpandedPlan], None]:
    def edit(plan: ExpandedPlan) -> None:
        disks = plan["hosts"][host]["disks"]
        disks.append({**disks[-1], "name": "extra"})

    return edit


# Each destructive rule of diff's (views/diff.destructive_rules), as edits of a deployed plan:
# (which plan, edit of OLD or None, edit of NEW). A host's rule is walked on a host the
# cluster can lose (its data is moved off by the operation) and on one it cannot.
Edit = Callable[[ExpandedPlan], None]
WALK: dict[str, list[tuple[str, Edit | None, Edit]]] = {
    "$.cluster.name": [("lab", None, _set("cluster", "name", value="lab2"))],
    "$.cluster.os": [("lab", None, _set("cluster", "os", value="rocky-9"))],
    "$.scheduler.type": [("lab", None, _set("scheduler", "type", value="kubernetes"))],
    "$.hosts.*.interfaces.*.address": [
        ("lab", None, _set("hosts", "cpu01", "interfaces", "mgmt", "address", value="10.40.0.99"))
    ],
    "$.hosts.*.address": [("lab", None, _set("hosts", "cpu01", "address", value="10.40.0.99"))],
    "$.hosts.*.accelerators": [
        ("lab", None, _set("hosts", "gpu01", "accelerators", "count", value=4)),
    ],
    "$.hosts.*.disks": [
        ("lab", None, _more_disks("cpu01")),
        ("lab", None, _more_disks("stor01")),
        ("lab", None, _more_disks("head01")),
    ],
    "$.hosts.*.rack": [("lab", None, _set("hosts", "cpu01", "rack", value="r1"))],
    "$.storage.ceph.pools.* removed": [("lab", None, _drop_pool)],
    "$.storage.ceph.release added/changed": [
        ("lab", None, _set("storage", "ceph", "release", value="quincy")),
        ("lab", _drop("storage", "ceph", "release"), lambda p: None),
    ],
    "$.storage.ceph.cephfs.name changed": [
        ("lab", None, _set("storage", "ceph", "cephfs", "name", value="shared2"))
    ],
    "$.storage.ceph.cephfs.data_pool changed": [
        ("lab", None, _set("storage", "ceph", "cephfs", "data_pool", value="datasets"))
    ],
    "$.storage.ceph.cephfs.metadata_pool changed": [
        ("lab", None, _set("storage", "ceph", "cephfs", "metadata_pool", value="datasets"))
    ],
    "$.scheduler.slurm.state_save added/changed/removed": [
        ("lab", None, _set("scheduler", "slurm", "state_save", value="/var/spool/slurmctld")),
        ("lab", _drop("scheduler", "slurm", "state_save"), lambda p: None),
        ("lab", None, _drop("scheduler", "slurm", "state_save")),
    ],
    "$.scheduler.kubernetes.version changed": [
        ("k8s", None, _set("scheduler", "kubernetes", "version", value="1.37"))
    ],
    "$.scheduler.kubernetes.pod_cidr changed": [
        ("k8s", None, _set("scheduler", "kubernetes", "pod_cidr", value="10.250.0.0/16"))
    ],
    "$.scheduler.kubernetes.service_cidr changed": [
        ("k8s", None, _set("scheduler", "kubernetes", "service_cidr", value="10.97.0.0/16"))
    ],
    "$.backups.target.host changed": [
        ("lab", None, _set("backups", "target", "host", value="osd01"))
    ],
    "$.backups.target.path changed": [
        ("lab", None, _set("backups", "target", "path", value="/srv/backup2"))
    ],
    "$.hosts.* removed": [("lab", None, _drop("hosts", "cpu01"))],
}


def test_every_destructive_rule_of_diff_is_walked():
    assert sorted(WALK) == sorted(destructive_rules())


def disagreements(old: ExpandedPlan, new: ExpandedPlan) -> list[str]:
    """diff's destructive changes that change neither refuses (naming the setting or the
    host) nor carries out by taking the host's jobs and data off first (replace, remove)."""
    changes = [c for c in diff_expanded(old, new) if c.destructive]
    assert changes, "diff finds nothing destructive in this edit"
    try:
        ops = operations(old, new)
    except ChangeRefused as refused:
        named = {r.path for r in refused.refusals}
        return [
            c.path
            for c in changes
            if c.path not in named and format_path(("hosts", c.host or "")) not in named
        ]
    moved = {h for op in ops if op.kind in ("replace", "remove") for h in op.hosts}
    return [c.path for c in changes if c.host is None or c.host not in moved]


@pytest.mark.parametrize("rule", sorted(WALK))
def test_change_refuses_or_moves_the_data_of_every_destructive_change(
    rule: str, lab: ExpandedPlan, k8s: ExpandedPlan
):
    for which, edit_old, edit_new in WALK[rule]:
        old = copy.deepcopy({"lab": lab, "k8s": k8s}[which])
        if edit_old is not None:
            edit_old(old)
        new = copy.deepcopy(old)
        edit_new(new)
        if edit_old is not None:  # the setting appears: OLD lacked it, NEW is the deployed plan
            new = copy.deepcopy({"lab": lab, "k8s": k8s}[which])
        assert disagreements(old, new) == [], rule
