"""Faults the Slurm cluster survives, proven on the lab after `site.yml` (docs/reliability.md).

- The primary controller's slurmctld dies (SIGKILL): the backup takes over, a job running
  before goes on to finish, a job submitted during the outage is accepted and runs; the
  primary started again takes its role back and nothing is lost.
- A compute node is lost (every link of it down, `cluster-plan lab fault --down`): Slurm sets
  it DOWN, its requeueable job restarts on another node of the partition, its
  non-requeueable job ends NODE_FAIL, and the node is back in service when its links return,
  with no `scontrol update` from anyone (ReturnToService=2).

Both change the shared lab, so they are `lab_changes` (run after the tests that read it) and
put everything back. Timings are benchmarks/bench_failover.py's business, not asserted here.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import lab_helpers
import pytest
from lab_helpers import BIN, PLAN, ROOT, cli, on_node

# The shared session fixtures (`lab`, `converged_lab`), requested by `ha` below.
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.playbooks import ansible_env, sigint_default

pytestmark = pytest.mark.lab

T = TypeVar("T")
# Where a held job looks for the file that ends it (on its node; not /tmp, which a job may
# get private).
RELEASE_DIR = "/var/tmp"


@dataclass
class SlurmHA:
    expanded: dict[str, Any]

    def sh(self, host: str, script: str, timeout: float = 180) -> str:
        result = on_node(host, script, timeout=timeout)
        assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
        return result.stdout

    @property
    def controllers(self) -> list[str]:
        """The controllers in the plan's order: the primary first (as slurm.conf lists them)."""
        group = set(self.expanded["groups"].get("slurm_controller", []))
        return [host for host in self.expanded["hosts"] if host in group]

    @property
    def client(self) -> str:
        """Where jobs are submitted from: a compute node, as a user's shell would be."""
        return str(self.expanded["groups"]["slurm_compute"][0])

    @property
    def slurm(self) -> dict[str, Any]:
        return dict(self.expanded["scheduler"]["slurm"])

    def job(self, job: str) -> dict[str, str]:
        """`scontrol show job` as a dict (JobState, NodeList, Restarts, ...)."""
        out = self.sh(self.client, f"scontrol -o show job {job}")
        return dict(re.findall(r"(\w+)=(\S*)", out))


def wait_for(probe: Callable[[], T], done: Callable[[T], bool], timeout: float, step=2.0) -> T:
    """Probe until done(value) or the timeout; returns the last value either way."""
    deadline = time.monotonic() + timeout
    value = probe()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(step)
        value = probe()
    return value


def ping(cluster: SlurmHA) -> dict[str, str]:
    """`scontrol ping` from the client: controller -> UP or DOWN."""
    out = on_node(cluster.client, "scontrol ping", timeout=60).stdout
    return dict(re.findall(r"Slurmctld\(\w+\) at (\S+) is (\w+)", out))


def sbatch(cluster: SlurmHA, options: str, timeout: float = 180) -> str:
    return lab_helpers.sbatch(cluster.client, options, cluster.controllers[0], timeout)


SLURMCTLD_LOG = "/var/log/slurm/slurmctld.log"


def log_lines(cluster: SlurmHA, host: str) -> int:
    """How many lines the host's slurmctld log has: what a step wrote comes after them."""
    return int(cluster.sh(host, f"wc -l < {SLURMCTLD_LOG}").strip())


def log_after(cluster: SlurmHA, host: str, lines: int) -> str:
    """What the host's slurmctld logged after its first `lines` lines."""
    return cluster.sh(host, f"tail -n +{lines + 1} {SLURMCTLD_LOG}")


def submit_through_outage(cluster: SlurmHA, tries: int, timeout: float) -> str:
    """A job submitted while no controller may be in control: the client retries every 5 s
    until a controller accepts it; its id."""
    submit = "cd /tmp && sbatch --parsable -p general -t 2 --wrap 'sleep 5'"
    out = cluster.sh(
        cluster.client,
        f"for i in $(seq {tries}); do {submit} && exit 0; sleep 5; done; exit 1",
        timeout=timeout,
    )
    return out.strip().splitlines()[-1].split(";")[0]


def held_by_saved_state(cluster: SlurmHA, running: dict[str, str]) -> None:
    """Wait until the state the backup would read holds the job just seen `running` (its
    `scontrol show job`) as it runs. slurmctld writes its state in a thread of its own, at
    most every 5 s (SAVE_MAX_WAIT in state_save.c) and later on a loaded machine, and the
    primary's ceph-fuse client buffers the writes: a job accepted in the seconds before the
    primary is lost may be in neither, as with a local disk (docs/reliability.md). So the
    running job gets a comment, which only a save made after it started can hold, and the
    test waits for that comment in the job file as the backup reads it (the read makes the
    MDS recall the primary's capabilities, which flushes them). Waiting a fixed 6 s after the
    start was not enough in a fresh-clone run: the backup took over from a state
    that still had the job pending."""
    backup = cluster.controllers[-1]
    job, name = running["JobId"], running["JobName"]
    job_file = f"{cluster.slurm['state_save']}/job_state"
    marker = f"running-{name}"
    cluster.sh(cluster.client, f"scontrol update jobid={job} comment={marker}")

    def saved() -> bool:
        found = on_node(backup, f"grep -c -a -F -- {marker} {job_file}", timeout=60).stdout
        return found.strip() not in ("", "0")

    assert wait_for(saved, bool, timeout=60, step=1), f"job {job} ({marker}) not in {job_file}"


def held_job(cluster: SlurmHA, name: str, jobs: list[str]) -> dict[str, str]:
    """A training job named `name` that runs until release() (5 min at most) and then removes
    the file that released it: it must run across the takeover, and the test need not wait
    any longer than that. Submitted (its id added to `jobs`, for the test to cancel), seen
    RUNNING and held by the saved state; its `scontrol show job`."""
    file = f"{RELEASE_DIR}/{name}"
    wrap = f"until [ -e {file} ]; do sleep 1; done; rm -f {file}"
    job = sbatch(cluster, f"-p training -t 5 -J {name} --wrap '{wrap}'")
    jobs.append(job)
    running = wait_for(lambda: cluster.job(job), lambda j: j["JobState"] == "RUNNING", 120)
    assert running["JobState"] == "RUNNING", running
    held_by_saved_state(cluster, running)
    return running


def release(cluster: SlurmHA, running: dict[str, str]) -> None:
    """Let the job of held_job() end: its node gets the file it waits for."""
    host, name = running["BatchHost"], running["JobName"]
    cluster.sh(host, f"touch {RELEASE_DIR}/{name}")


def end_fault(outage: subprocess.Popen[str] | None, node: str) -> None:
    """A test's `lab fault` still running when it ends: cleared, stopped, reaped, its pipe
    closed."""
    if outage is None:
        return
    if outage.poll() is None:
        cli("lab", "fault", str(PLAN), node, "--clear")
        outage.send_signal(signal.SIGINT)
    outage.communicate(timeout=60)


def both_controllers_up(cluster: SlurmHA) -> None:
    """Every controller's slurmctld running and answering (what the converge left, or what a
    test put back)."""
    for host in cluster.controllers:
        cluster.sh(host, "systemctl reset-failed slurmctld; systemctl start slurmctld")
    state = wait_for(
        lambda: ping(cluster),
        lambda p: sorted(p.values()) == ["UP"] * len(cluster.controllers),
        timeout=120,
    )
    assert sorted(state) == sorted(cluster.controllers) and set(state.values()) == {"UP"}, state


def standby_again(cluster: SlurmHA, backup: str) -> str:
    """The backup's slurmctld once systemd has started it again after the hand-back stopped
    it (`Restart=always`, `RestartSec=10`: `activating` until then): its state, waited for."""
    return wait_for(
        lambda: on_node(backup, "systemctl is-active slurmctld", timeout=60).stdout.strip(),
        lambda state: state == "active",
        timeout=60,
    )


@pytest.fixture
def ha(converged_lab: Converged) -> Iterator[SlurmHA]:  # noqa: F811
    converged_lab.require_converged()
    cluster = SlurmHA(converged_lab.expanded)
    # the lab plan has the pair (the slurm_controller role on two hosts): these proofs need it
    assert len(cluster.controllers) == 2, f"no HA pair of Slurm controllers: {cluster.controllers}"
    both_controllers_up(cluster)
    yield cluster
    both_controllers_up(cluster)


def test_slurm_conf_names_the_pair_primary_first_and_state_on_the_shared_mount(ha: SlurmHA):
    primary, backup = ha.controllers
    state = ha.slurm["state_save"]
    for host in ha.controllers:
        conf = ha.sh(
            host,
            "grep -E '^(SlurmctldHost|StateSaveLocation|\\w*Timeout)=' /etc/slurm/slurm.conf",
        )
        hosts = re.findall(r"^SlurmctldHost=(\w+)\(", conf, re.M)
        assert hosts == [primary, backup], conf
        assert f"StateSaveLocation={state}\n" in conf
        assert f"SlurmctldTimeout={ha.slurm['controller_timeout_s']}\n" in conf
        assert f"SlurmdTimeout={ha.slurm['node_timeout_s']}\n" in conf
        assert f"MessageTimeout={ha.slurm['message_timeout_s']}\n" in conf
        # the state directory is on the CephFS both mount, owned by the slurm user
        mount = ha.expanded["storage"]["ceph"]["cephfs"]["mount"]
        fs = ha.sh(host, f"findmnt -n -o TARGET,FSTYPE -T {state}").split()
        assert fs == [mount, "fuse.ceph-fuse"], (host, fs)
        assert ha.sh(host, f"stat -c %U {state}").strip() == "slurm"
        # slurmctld starts only once that file system is mounted
        after = ha.sh(host, "systemctl show slurmctld -p RequiresMountsFor -p After")
        assert state in after and f"{mount.strip('/')}.mount" in after, after
        # the hand-back: the primary waits for a backup in control; a backup notes its stop
        unit = ha.sh(host, "systemctl show slurmctld -p ExecStartPre -p ExecStopPost -p Restart")
        if host == primary:
            assert f"slurmctld-handback {state} " in unit and "Restart=no" in unit, unit
        else:
            assert f"slurmctld-handback --stopped {state} {host}" in unit, unit
            assert "Restart=always" in unit, unit
    # one state: what the primary wrote, the backup sees
    assert ha.sh(backup, f"ls {state}/job_state").strip() == f"{state}/job_state"


@pytest.mark.lab_changes
def test_the_backup_takes_over_when_the_primary_dies_and_hands_back_when_it_returns(ha: SlurmHA):
    """The fault is slurmctld killed (SIGKILL) on the primary, not the whole of head01 down:
    head01 also carries slurmdbd, a Ceph manager and MDS, NFS, NTP and the backups, and a
    network cut of a controller that keeps running would leave two controllers writing one
    state directory (Slurm has no fencing). A dead slurmctld is the failure the pair covers."""
    primary, backup = ha.controllers
    timeout = ha.slurm["controller_timeout_s"]
    jobs: list[str] = []
    try:
        # Runs on past the takeover (about 1.2 x SlurmctldTimeout on the lab,
        # docs/reliability.md) until the test releases it under the backup.
        running = held_job(ha, f"ha-kill-{os.getpid()}", jobs)
        before = running["JobId"]

        backup_lines = log_lines(ha, backup)
        ha.sh(primary, "systemctl kill --signal=SIGKILL slurmctld")
        # Submitted while no controller is in control: the client retries until the backup
        # has taken over (within SlurmctldTimeout and a half, Slurm's own limit).
        during = submit_through_outage(ha, timeout * 3 // 5 + 10, timeout * 10 + 120)
        jobs.append(during)
        assert ping(ha) == {primary: "DOWN", backup: "UP"}
        log = log_after(ha, backup, backup_lines)
        assert "taking over" in log, log[-2000:]

        release(ha, running)  # the job that ran across the takeover ends under the backup
        ended = wait_for(
            lambda: [ha.job(j)["JobState"] for j in (before, during)],
            lambda states: states == ["COMPLETED", "COMPLETED"],
            timeout=240,
        )
        assert ended == ["COMPLETED", "COMPLETED"], ended

        # The primary comes back: before it starts, the backup in control saves all of its
        # state and stops (slurmctld-handback), then the primary reads the shared state.
        primary_lines = log_lines(ha, primary)
        backup_lines = log_lines(ha, backup)
        since = ha.sh(primary, "date '+%Y-%m-%d %H:%M:%S'").strip()
        ha.sh(primary, "systemctl reset-failed slurmctld; systemctl start slurmctld")
        handback = ha.sh(primary, f"journalctl -u slurmctld --since '{since}' -o cat")
        assert "backup controller 1 is in control" in handback, handback
        assert f"{backup} saved its state and stopped" in handback, handback
        stopping = log_after(ha, backup, backup_lines)
        assert "Saving all slurm state" in stopping, stopping[-2000:]
        assert "Old state possible" not in stopping, stopping[-2000:]
        state = wait_for(
            lambda: ping(ha), lambda p: p == {primary: "UP", backup: "UP"}, timeout=120
        )
        assert state == {primary: "UP", backup: "UP"}, state
        after = sbatch(ha, "-p general -t 2 --wrap 'true'")
        jobs.append(after)
        assert int(after) > int(during)  # the job ids go on from the backup's
        done = wait_for(lambda: ha.job(after), lambda j: j["JobState"] == "COMPLETED", 120)
        assert done["JobState"] == "COMPLETED", done
        # nothing lost: the primary knows both jobs of the outage and how they ended
        assert [ha.job(j)["JobState"] for j in (before, during)] == ["COMPLETED"] * 2
        # and it is the primary that is in control again, the backup a standby
        primary_log = log_after(ha, primary, primary_lines)
        assert "Running as primary controller" in primary_log, primary_log[-2000:]
        assert standby_again(ha, backup) == "active"
    finally:
        if jobs:
            on_node(ha.client, "scancel " + " ".join(jobs))


def fault(node: str, seconds: int, kind: str = "--down") -> subprocess.Popen[str]:
    """`cluster-plan lab fault PLAN NODE --down --duration SECONDS` (or `--freeze`), in the
    background: it clears the fault by itself when the time is up."""
    return subprocess.Popen(
        [
            str(BIN / "cluster-plan"),
            "lab",
            "fault",
            str(PLAN),
            node,
            kind,
            "--duration",
            str(seconds),
        ],
        cwd=ROOT,
        env=ansible_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=sigint_default,  # the test ends its wait with SIGINT
    )


def node_state(cluster: SlurmHA, node: str) -> str:
    """The node's state (sinfo lists a node once per partition; the state is the same)."""
    out = on_node(cluster.client, f"sinfo -h -N -n {node} -o %T", timeout=60).stdout.split()
    return out[0] if out else ""


@pytest.mark.lab_changes
def test_a_lost_node_goes_down_requeues_or_fails_its_jobs_and_returns_by_itself(ha: SlurmHA):
    partition = "training"  # the one class over two nodes in the lab plan
    nodes = ha.sh(ha.client, f"sinfo -h -N -p {partition} -o %N").split()
    assert len(nodes) >= 2, nodes
    detect = ha.slurm["node_timeout_s"]
    jobs: list[str] = []
    outage: subprocess.Popen[str] | None = None
    lost = ""
    try:
        requeued = sbatch(ha, f"-p {partition} -t 10 --requeue --wrap 'sleep 600'")
        jobs.append(requeued)
        first = wait_for(lambda: ha.job(requeued), lambda j: j["JobState"] == "RUNNING", 120)
        assert first["JobState"] == "RUNNING", first
        lost = first["NodeList"]
        failed = sbatch(ha, f"-p {partition} -t 10 --no-requeue -w {lost} --wrap 'sleep 600'")
        jobs.append(failed)
        held = wait_for(lambda: ha.job(failed), lambda j: j["JobState"] == "RUNNING", 120)
        assert held["JobState"] == "RUNNING", held

        # Bounded by itself (cleared after that long even if this test dies); cleared below as
        # soon as Slurm has done what it should, requeued job's start delay included.
        outage = fault(lost, detect * 4 + 300)
        down = wait_for(lambda: node_state(ha, lost), lambda s: s.startswith("down"), detect * 3)
        assert down.startswith("down"), down
        gone = wait_for(lambda: ha.job(failed), lambda j: j["JobState"] != "RUNNING", 60)
        assert gone["JobState"] == "NODE_FAIL", gone
        moved = wait_for(
            lambda: ha.job(requeued),
            lambda j: j["JobState"] == "RUNNING" and j["NodeList"] != lost,
            timeout=300,
        )
        assert moved["JobState"] == "RUNNING" and moved["NodeList"] in nodes, moved
        assert moved["NodeList"] != lost and int(moved["Restarts"]) >= 1, moved

        # The links come back; nobody runs `scontrol update`.
        cleared = cli("lab", "fault", str(PLAN), lost, "--clear")
        assert cleared.returncode == 0, cleared.stderr
        outage.send_signal(signal.SIGINT)  # its wait ends (and it clears once more)
        outage.communicate(timeout=60)
        # It returns at slurmctld's next registration request, which a DOWN node gets once
        # every 21 pings (SlurmdTimeout/3 apart): about 7 x SlurmdTimeout; two rounds allowed.
        back = wait_for(lambda: node_state(ha, lost), lambda s: s == "idle", detect * 14 + 120)
        assert back == "idle", back
        reason = ha.sh(ha.client, f"sinfo -h -N -n {lost} -R -o %E").strip()
        assert not reason, reason
        # what still ran there while it was cut off is killed: those jobs live elsewhere now
        left = wait_for(
            lambda: on_node(lost, "pgrep -f 'slee[p] 600' || true", timeout=60).stdout.strip(),
            lambda pids: not pids,
            timeout=120,
        )
        assert not left, left
    finally:
        end_fault(outage, lost)
        if jobs:
            on_node(ha.client, "scancel " + " ".join(jobs))


def journal_since(cluster: SlurmHA, host: str, unit: str, since: str) -> str:
    return cluster.sh(host, f"journalctl -u {unit} --since '{since}' -o cat")


@pytest.mark.lab_changes
@pytest.mark.parametrize("kind", ["--down", "--freeze"], ids=["links-down", "hung"])
def test_the_backup_fences_a_lost_primary_node_takes_over_and_hands_back_when_it_returns(
    ha: SlurmHA, kind: str
):
    """The whole primary node lost: every link of head01 down (`lab fault --down`), its
    processes still running, as after a dead NIC or switch port; or head01 hung (`lab fault
    --freeze`): every process frozen and nothing sent, links up, as after a kernel hang. Its
    CephFS client holds
    capabilities on the state files that the backup must read; the backup's slurmctld-fence
    evicts that client (the MDS blocklists it), the backup takes over, and the primary, once
    back, finds its mount evicted, stops its slurmctld, mounts again and takes control back
    through the hand-back, with nothing lost. slurmdbd (on head01) is away the whole time: the
    backup runs on the associations cached in the state."""
    primary, backup = ha.controllers
    timeout = ha.slurm["controller_timeout_s"]
    jobs: list[str] = []
    outage: subprocess.Popen[str] | None = None
    try:
        running = held_job(ha, f"ha-node{kind[1:]}-{os.getpid()}", jobs)
        before = running["JobId"]

        backup_lines = log_lines(ha, backup)
        since = ha.sh(backup, "date '+%Y-%m-%d %H:%M:%S'").strip()
        lost_at = time.monotonic()
        outage = fault(primary, 900, kind)  # bounded by itself if this test dies
        assert outage.stdout is not None
        applied = outage.stdout.readline()  # "NODE: link down" / "hung ...": from here
        assert ("link down" if kind == "--down" else "hung") in applied, applied
        during = submit_through_outage(ha, timeout * 3 // 5 + 20, timeout * 12 + 300)
        jobs.append(during)
        print(f"\n{kind}: node lost -> first job accepted: {time.monotonic() - lost_at:.1f} s")
        assert ping(ha) == {primary: "DOWN", backup: "UP"}
        fenced = journal_since(ha, backup, "slurmctld-fence", since)
        assert f"fenced {primary}" in fenced, fenced
        assert "asked this backup's slurmctld to take control" in fenced, fenced
        log = log_after(ha, backup, backup_lines)
        assert "taking over" in log, log[-2000:]

        release(ha, running)
        ended = wait_for(
            lambda: [ha.job(j)["JobState"] for j in (before, during)],
            lambda states: states == ["COMPLETED", "COMPLETED"],
            timeout=300,
        )
        assert ended == ["COMPLETED", "COMPLETED"], ended

        # head01 comes back: its evicted client makes it stop slurmctld, mount again and
        # take control back through the hand-back (slurmctld-handback).
        primary_lines = log_lines(ha, primary)
        back_since = ha.sh(primary, "date '+%Y-%m-%d %H:%M:%S'").strip()
        cleared = cli("lab", "fault", str(PLAN), primary, "--clear")
        assert cleared.returncode == 0, cleared.stderr
        outage.send_signal(signal.SIGINT)
        outage.communicate(timeout=60)
        returned_at = time.monotonic()
        primary_log = wait_for(
            lambda: on_node(primary, f"tail -n +{primary_lines + 1} {SLURMCTLD_LOG}").stdout,
            lambda text: "Running as primary controller" in text,
            timeout=600,
            step=3,
        )
        assert "Running as primary controller" in primary_log, primary_log[-2000:]
        state = wait_for(
            lambda: ping(ha), lambda p: p == {primary: "UP", backup: "UP"}, timeout=180
        )
        assert state == {primary: "UP", backup: "UP"}, state
        print(f"{kind}: node back -> primary in control: {time.monotonic() - returned_at:.1f} s")
        rejoined = journal_since(ha, primary, "slurmctld-fence", back_since)
        assert "mounting the file system again" in rejoined, rejoined
        handback = journal_since(ha, primary, "slurmctld", back_since)
        assert "backup controller 1 is in control" in handback, handback

        after = sbatch(ha, "-p general -t 2 --wrap 'true'")
        jobs.append(after)
        assert int(after) > int(during)  # the job ids go on from the backup's
        done = wait_for(lambda: ha.job(after), lambda j: j["JobState"] == "COMPLETED", 120)
        assert done["JobState"] == "COMPLETED", done
        # nothing lost: the primary knows both jobs of the outage and how they ended
        assert [ha.job(j)["JobState"] for j in (before, during)] == ["COMPLETED"] * 2
        assert standby_again(ha, backup) == "active"
    finally:
        end_fault(outage, primary)
        if jobs:
            on_node(ha.client, "scancel " + " ".join(jobs))
