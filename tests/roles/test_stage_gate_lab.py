"""The stage gate of site.yml on the converged session lab (playbooks/tasks/stage_gate.yml).

A re-run where nothing changed skips every gated stage (common, ceph, nfs, slurm, software,
backup, monitoring) and changes nothing; the idempotence run before it ran every stage in full
(`-e site_converge_when=always`). Then one hand change of each kind the records hold, spread
over the stages and hosts: the next site.yml runs exactly the stages they touch, says why,
puts every one of them right, and the run after it skips every stage again.
"""

from __future__ import annotations

import re

import pytest
from lab_helpers import PLAN, on_node

# The shared session fixtures (`lab`, `converged_lab`), requested below.
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.playbooks import changed_lines, playbook, recap

pytestmark = pytest.mark.lab
GATED = ("common", "ceph", "nfs", "slurm", "software", "backup", "monitoring")
SKIPPED = re.compile(r'"msg": "(\w+): the last converge still holds on all (\d+) hosts; skipped')


def skipped_stages(output: str) -> dict[str, int]:
    """{stage's roles: hosts} for every stage the gate skipped in a run."""
    return {role: int(hosts) for role, hosts in SKIPPED.findall(output)}


def sh(host: str, script: str) -> str:
    result = on_node(host, script)
    assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
    return result.stdout


def no_change(output: str) -> dict[str, int]:
    return {h: r["changed"] for h, r in recap(output).items() if r["changed"]}


def test_a_rerun_where_nothing_changed_skips_every_gated_stage(converged_lab: Converged) -> None:  # noqa: F811
    converged_lab.require_converged()
    second, gated = converged_lab.second, converged_lab.gated
    if second is None or gated is None:
        pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1: no converge ran in this session")
    assert skipped_stages(second.output) == {}  # the idempotence run ran every stage
    assert gated.ok, gated.result.stdout[-4000:]
    assert no_change(gated.output) == {}, "\n".join(changed_lines(gated.output))
    hosts = converged_lab.expanded["hosts"]
    slurm_hosts = {
        h
        for h, host in hosts.items()
        if {"slurm_controller", "slurm_compute", "slurmdbd"} & set(host["roles"])
    }
    assert skipped_stages(gated.output) == {
        "common": len(hosts),
        "ceph": len(hosts),
        "nfs": len(hosts),
        "slurm": len(slurm_hosts),
        "software": len(hosts),
        "backup": len(hosts),
        "monitoring": len(hosts),
    }
    assert "TASK [common : " not in gated.output and "TASK [ceph : " not in gated.output
    print(f"re-run: {gated.seconds:.0f} s through the gate, {second.seconds:.0f} s in full")


# One hand change per kind of record, each on its stage's hosts: (host, change, check that
# reads the planned state back, the stage that must run).
KEYS = "/var/lib/cluster-plan-borg/.ssh/authorized_keys"
CHANGES: list[tuple[str, str, str, str]] = [
    ("cpu01", "chmod 0600 /etc/hosts", "stat -c %a /etc/hosts", "common"),  # a file's mode
    ("cpu01", "hostname changed-by-hand", "hostname", "common"),  # a probe
    ("gpu02", "systemctl disable chrony", "systemctl is-enabled chrony", "common"),  # boot
    ("gpu02", "usermod -s /bin/sh alice", "getent passwd alice", "common"),  # an account
    ("stor01", "ceph osd pool set datasets min_size 2",
     "ceph osd pool get datasets min_size", "ceph"),  # cluster state, on the first monitor
    ("head01", "systemctl disable ceph-mgr@head01",
     "systemctl is-enabled ceph-mgr@head01", "ceph"),
    ("head01", "systemctl disable nfs-ganesha", "systemctl is-enabled nfs-ganesha", "nfs"),
    ("head01", "sacctmgr -i modify qos inference set priority=1",
     "sacctmgr -nP show qos inference format=Priority", "slurm"),  # the accounting database
    ("gpu01", "rm /etc/slurm/cgroup.conf",
     "test -f /etc/slurm/cgroup.conf && echo present", "slurm"),  # a file gone
    # on the backup host, a line a node's run wrote there
    ("head01", f"sed -i /cluster-plan-backup:infer01/d {KEYS}",
     f"grep -c cluster-plan-backup:infer01 {KEYS}", "backup"),
]  # fmt: skip


@pytest.mark.lab_changes
@pytest.mark.lab_extended  # make test-extended (docs/lab.md: CI's time limit)
def test_hand_changes_run_their_stages_and_are_put_right(converged_lab: Converged) -> None:  # noqa: F811
    converged_lab.require_converged()
    changes = CHANGES
    planned = {(host, check): sh(host, check) for host, _, check, _ in changes}
    for host, change, _, _ in changes:
        sh(host, change)
    run = playbook(PLAN, ["site.yml"])
    assert run.ok, run.result.stdout[-4000:]
    skipped = skipped_stages(run.output)
    touched = {stage for *_, stage in changes}
    assert not touched & set(skipped), skipped
    assert set(GATED) - touched <= set(skipped), skipped
    reasons = why(run.output)
    assert "/etc/hosts is file root:root 0600, was file root:root 0644" in reasons["cpu01"]
    assert "the host name changed" in reasons["cpu01"]
    assert "the plan's users changed" in reasons["gpu02"]
    assert "the pools changed" in reasons["stor01"]
    assert "the accounting database's QOS, accounts and users changed" in reasons["head01"]
    assert "file /etc/slurm/cgroup.conf is gone" in reasons["gpu01"]
    for (host, check), value in planned.items():
        assert sh(host, check) == value, f"{host}: {check} not put right"
    again = playbook(PLAN, ["site.yml"])
    assert again.ok, again.result.stdout[-4000:]
    assert set(skipped_stages(again.output)) == set(GATED), again.output[-4000:]
    assert no_change(again.output) == {}, "\n".join(changed_lines(again.output))


def why(output: str) -> dict[str, str]:
    """Each host's reasons printed by the gate ("Say why the stage runs here"), joined."""
    found: dict[str, list[str]] = {}
    for host, body in re.findall(r'ok: \[([\w.-]+)\] => \{\s+"msg": \[(.*?)\]\s+\}', output, re.S):
        found.setdefault(host, []).append(body)
    return {host: "\n".join(bodies) for host, bodies in found.items()}
