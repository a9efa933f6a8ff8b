"""Ten hand changes to the converged session lab, one of each kind the stage gate's records
hold, spread over the gated stages and the hosts; what site.yml makes of them is proven in
tests/roles/test_stage_gate_lab.py.

The session converge makes them between its idempotence run and its gated re-run, and runs
site.yml once between the two to put them right (support.lab_session.converge_runs): the
re-run that follows is then the run after a repair, and must skip every stage as it did
straight after the idempotence run. The converge's slack beside the tests that need no lab
holds that run; a cycle of its own among the tests that change the lab would add its wall
time to the session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from support.node_shell import lab_run
from support.playbooks import Run

NODE_TIMEOUT_S = 120
KEYS = "/var/lib/cluster-plan-borg/.ssh/authorized_keys"
# (host, change, check that reads the planned state back, the stage that must run)
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


@dataclass
class HandChanged:
    """What the converge did: each check's output before the changes (the planned state),
    the commands that failed (none, when all went as meant) and the site.yml run after."""

    planned: dict[tuple[str, str], str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    run: Run | None = None


def read(plan: Path, host: str, script: str, env: Mapping[str, str]) -> tuple[str, str | None]:
    """(standard output, None) or ("", what failed) for a script run in a lab node."""
    done = lab_run(plan, host, ["sh", "-c", script], env, NODE_TIMEOUT_S)
    if done.returncode != 0:
        return "", f"{host}: {script}: exit {done.returncode}: {done.stderr.strip()[-500:]}"
    return done.stdout, None


def make(plan: Path, env: Mapping[str, str]) -> HandChanged:
    """Read every check, then make every change. Nothing is changed unless every check read."""
    made = HandChanged()
    for host, _, check, _ in CHANGES:
        out, error = read(plan, host, check, env)
        made.planned[(host, check)] = out
        if error:
            made.errors.append(error)
    if made.errors:
        return made
    for host, change, _, _ in CHANGES:
        _, error = read(plan, host, change, env)
        if error:
            made.errors.append(error)
    return made
