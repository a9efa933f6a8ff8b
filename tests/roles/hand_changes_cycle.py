"""One perturb -> site.yml -> re-run cycle on the converged session lab, shared by the proofs
of tests/roles/test_hand_changes_cycle_lab.py (issue 25: each site.yml run on the lab costs
minutes, so the proofs that hand-change the lab read the same two runs).

The cycle: one hand change of each kind the stage gate's records hold, on the stages' hosts
(never on the node that will be lost); then site.yml, in which the last compute node's links
go down when the storage stage starts, for the rest of the run; then, once the node is back,
site.yml again. The first run must put every hand change right on the hosts still in the play
and name the lost node; the second must converge the lost node and change nothing on any
other host; the run after the lost node is converged (the second, or a third when the second
had to change it) must skip every gated stage and change nothing anywhere."""

from __future__ import annotations

import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass

from lab_helpers import BIN, PLAN, ROOT, cli, on_node

from cluster_plan.lab.converge import Run, ansible_env, playbook, recap
from cluster_plan.lab.pytest_plugin import sigint_default

GATED = ("common", "ceph", "nfs", "slurm", "backup")
SKIPPED = re.compile(r'"msg": "(\w+): the last converge still holds on all (\d+) hosts; skipped')
TRIGGER = "PLAY [Ceph from the cluster plan]"  # the storage stage: part-way through site.yml
RUN_TIMEOUT_S = 1800
# Down until the run ends: a node that came back by itself part-way would be met again by a
# later play (Mitogen reconnects to it), and nothing would have been lost. The bound only
# keeps the fault from outliving a test that died.
DOWN_S = RUN_TIMEOUT_S + 60
DOWN = ["--down", "--duration", str(DOWN_S)]

# One hand change per kind of record, each on its stage's hosts: (host, change, check that
# reads the planned state back, the stage that must run). None on the node the cycle loses
# (the last compute node, infer01): its stages end when it is lost, so nothing would put it
# right there, nor on the backup host a line only its own run writes.
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
    # on the backup host, a line a node's run wrote there (cpu01's: a node still in the play)
    ("head01", f"sed -i /cluster-plan-backup:cpu01/d {KEYS}",
     f"grep -c cluster-plan-backup:cpu01 {KEYS}", "backup"),
]  # fmt: skip


def skipped_stages(output: str) -> dict[str, int]:
    """{stage's roles: hosts} for every stage the gate skipped in a run."""
    return {role: int(hosts) for role, hosts in SKIPPED.findall(output)}


def no_change(output: str) -> dict[str, int]:
    return {h: r["changed"] for h, r in recap(output).items() if r["changed"]}


def why(output: str) -> dict[str, str]:
    """Each host's reasons printed by the gate ("Say why the stage runs here"), joined."""
    found: dict[str, list[str]] = {}
    for host, body in re.findall(r'ok: \[([\w.-]+)\] => \{\s+"msg": \[(.*?)\]\s+\}', output, re.S):
        found.setdefault(host, []).append(body)
    return {host: "\n".join(bodies) for host, bodies in found.items()}


def sh(host: str, script: str) -> str:
    result = on_node(host, script)
    assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@dataclass
class LostRun:
    """site.yml with a node lost part-way: exit status, output and wall time."""

    rc: int
    output: str
    seconds: float


@dataclass
class Cycle:
    """The runs of the cycle and what the checks read before and between them."""

    victim: str
    others: list[str]
    planned: dict[tuple[str, str], str]  # each check before the hand changes
    after_lost: dict[tuple[str, str], str]  # the same checks right after the first run
    lost: LostRun
    again: Run  # the run after the node came back
    settled: Run  # the run after the node was converged again: `again` or one more


def settle(again: Run, victim: str) -> Run:
    """The first run with every host converged before it: `again` when it changed nothing
    on the lost node, else one more site.yml. A node away longer than the CephFS MDS's
    session timeout (300 s) comes back with its client evicted, and `again` mounts it
    again (docs/reliability.md): then only the run after it may skip every stage."""
    if not again.ok or recap(again.result.stdout).get(victim, {}).get("changed", 0) == 0:
        return again
    return playbook(PLAN, ["site.yml"], timeout=RUN_TIMEOUT_S)


def site_losing(victim: str) -> LostRun:
    """site.yml, taking `victim` down when TRIGGER is printed."""
    started = time.monotonic()
    run = subprocess.Popen(
        [str(BIN / "ansible-playbook"), "-i", str(PLAN), "site.yml"],
        cwd=ROOT,
        env=ansible_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    watchdog = threading.Timer(RUN_TIMEOUT_S, run.kill)  # a hung run must end the test too
    watchdog.start()
    fault: subprocess.Popen[str] | None = None
    lines: list[str] = []
    try:
        assert run.stdout is not None
        for line in run.stdout:
            lines.append(line)
            if fault is None and line.startswith(TRIGGER):
                fault = subprocess.Popen(
                    [str(BIN / "cluster-plan"), "lab", "fault", str(PLAN), victim, *DOWN],
                    cwd=ROOT,
                    env=ansible_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    text=True,
                    preexec_fn=sigint_default,  # stopped with SIGINT when the run ends
                )
        rc = run.wait()
    finally:
        watchdog.cancel()
        if run.poll() is None:
            run.kill()
            run.wait()
        if run.stdout is not None:
            run.stdout.close()
        if fault is not None:
            try:
                fault.send_signal(signal.SIGINT)  # it clears the fault and exits
                fault.wait(timeout=60)
            finally:
                cli("lab", "fault", str(PLAN), victim, "--clear")
    assert fault is not None, f"site.yml never printed {TRIGGER!r}:\n" + "".join(lines[-60:])
    return LostRun(rc, "".join(lines), time.monotonic() - started)


def read_back(host: str, check: str) -> str:
    """A check's output, or how it failed: the tests compare it with the planned value."""
    result = on_node(host, check)
    if result.returncode != 0:
        return f"exit {result.returncode}: {result.stdout}{result.stderr}"
    return result.stdout


def run_cycle(hosts: list[str], victim: str) -> Cycle:
    """The hand changes, site.yml losing `victim`, then site.yml again (always: the lab is
    left converged for the tests after, whatever the first run did)."""
    assert not any(victim in f"{host} {change}" for host, change, _, _ in CHANGES), victim
    planned = {(host, check): sh(host, check) for host, _, check, _ in CHANGES}
    for host, change, _, _ in CHANGES:
        sh(host, change)
    try:
        lost = site_losing(victim)
        after_lost = {(host, check): read_back(host, check) for host, _, check, _ in CHANGES}
    finally:
        again = playbook(PLAN, ["site.yml"], timeout=RUN_TIMEOUT_S)
    others = [h for h in hosts if h != victim]
    return Cycle(victim, others, planned, after_lost, lost, again, settle(again, victim))
