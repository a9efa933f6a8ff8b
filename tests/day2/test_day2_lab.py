"""Day-2 operations proven on the lab: drift detection and backups with a proven restore.

The lab is the session lab of `support.lab_session` ($CLUSTER_PLAN_LAB_ID,
default `test`), converged once per session by its `converged_lab` fixture, which every lab
test module shares (its idempotence run is judged in tests/roles/test_slurm_lab.py). Tests
marked `lab_changes` change the lab and run after every test that only reads it; each puts
the lab back, except the last, which leaves gpu01's repository corrupted. Every command on
a node runs through `cluster-plan lab run` (nsenter), every SSH connection through the lab's
admin namespace: nothing leaves the lab.

Drift: a fresh converge has none; six hand changes on six hosts are exactly six findings on
those hosts; site.yml puts them right; a node taken down is reported unreachable.
Backups: a snapshot per node that the backup host cannot read; slurmctld's state and the
munge key lost and restored with the queue intact; one file restored alone; back-dated
snapshots pruned as the plan's retention says; a corrupted segment fails the drill, the unit
and `cluster-plan backup status`.

CLUSTER_PLAN_LAB_CONVERGED=1 uses the lab already running under $CLUSTER_PLAN_LAB_ID as it
is (no session lab, no converge): quick iterations.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.cli_output import result as command_result

# The shared session fixtures (`lab`, `converged_lab`), requested by `day2` below.
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.node_shell import lab_run
from support.playbooks import CONVERGE_TIMEOUT_S, recap, vault_view

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "inventory" / "lab" / "cluster.yml"
BIN = Path(sys.executable).parent
SIX = {
    ("cpu01", "address", "compute"),
    ("stor01", "mtu", "storage"),
    ("gpu02", "service", "slurmd"),
    ("infer01", "file", "/etc/slurm/cgroup.conf"),
    ("gpu01", "package-hold", "slurm-client"),
    ("stor02", "nftables", "inet cluster_plan"),
}


def _env() -> dict[str, str]:
    return {**os.environ, "PATH": f"{BIN}:{os.environ.get('PATH', '')}", "ANSIBLE_NOCOLOR": "1"}


def run(*argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@dataclass
class Day2:
    expanded: dict[str, Any]
    timings: dict[str, float]

    def sh(self, host: str, script: str, timeout: float = 300, check: bool = True) -> str:
        done = lab_run(PLAN, host, ["sh", "-c", script], _env(), timeout)
        if check:
            assert done.returncode == 0, f"{host}: {script}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        started = time.monotonic()
        done = run(str(BIN / "cluster-plan"), *args, timeout=timeout)
        self.timings.setdefault(args[0], time.monotonic() - started)
        return done

    def drift(self) -> tuple[int, dict[str, Any]]:
        done = self.cli("drift", str(PLAN), "--format", "json")
        assert "Traceback" not in done.stderr, done.stderr
        return done.returncode, command_result(done.stdout)

    def playbook(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run(
            str(BIN / "ansible-playbook"), "-i", str(PLAN), *args, timeout=CONVERGE_TIMEOUT_S
        )

    def controller(self) -> str:
        """The primary controller: the first in the plan's order, as slurm.conf lists them."""
        return self.controllers()[0]

    def controllers(self) -> list[str]:
        group = set(self.expanded["groups"]["slurm_controller"])
        return [host for host in self.expanded["hosts"] if host in group]

    def backup_host(self) -> str:
        return str(self.expanded["backups"]["target"]["host"])


@pytest.fixture(scope="session")
def day2(converged_lab: Converged) -> Day2:  # noqa: F811
    """The session's converged lab (session-wide, like `backed_up`: the tests that change the
    lab run at the end of the session, after other modules' tests)."""
    converged_lab.require_converged()
    return Day2(dict(converged_lab.expanded), {})


# --- drift --------------------------------------------------------------------------------


def test_a_freshly_converged_lab_has_no_drift(day2: Day2) -> None:
    code, report = day2.drift()
    assert report["findings"] == [] and code == 0
    assert report["reachable"] == report["hosts"] == len(day2.expanded["hosts"])


@pytest.mark.lab_changes
def test_a_downed_node_is_reported_unreachable(day2: Day2) -> None:
    fault = ("lab", "fault", str(PLAN), "gpu02")
    assert day2.cli(*fault, "--down").returncode == 0
    try:
        code, report = day2.drift()
    finally:
        assert day2.cli(*fault, "--clear").returncode == 0
    assert code == 1
    assert [(f["host"], f["check"]) for f in report["findings"]] == [("gpu02", "unreachable")]
    assert report["findings"][0]["found"]  # the reason, in words


def _make_six_changes(cluster: Day2) -> None:
    compute = cluster.expanded["hosts"]["cpu01"]["interfaces"]["compute"]
    dev, cidr = compute["device"], f"{compute['address']}/{compute['prefixlen']}"
    cluster.sh("cpu01", f"ip addr del {cidr} dev {dev} && ip addr add 10.41.0.99/24 dev {dev}")
    storage = cluster.expanded["hosts"]["stor01"]["interfaces"]["storage"]["device"]
    cluster.sh("stor01", f"ip link set dev {storage} mtu 1500")
    cluster.sh("gpu02", "systemctl stop slurmd")
    cluster.sh("infer01", "echo '# edited by hand' >> /etc/slurm/cgroup.conf")
    cluster.sh("gpu01", "apt-mark unhold slurm-client")
    cluster.sh("stor02", "nft add rule inet cluster_plan input tcp dport 9999 accept")


@pytest.mark.lab_changes
def test_six_hand_changes_are_found_on_their_hosts_and_site_yml_fixes_them(day2: Day2) -> None:
    _make_six_changes(day2)
    code, report = day2.drift()
    found = {(f["host"], f["check"], f["subject"]) for f in report["findings"]}
    assert (code, found) == (1, SIX), json.dumps(report["findings"], indent=1)
    assert len(report["findings"]) == 6
    # The stages that own these settings (host baseline, Slurm), as site.yml runs them, on
    # the changed hosts: the whole site.yml would add the storage stage and a network
    # acceptance run (three hosts' networks changed) to an already long lab session.
    hosts = ",".join(sorted({h for h, _, _ in SIX} | {day2.controller()}))
    fixed = day2.playbook("playbooks/common.yml", "playbooks/slurm.yml", "--limit", hosts)
    assert fixed.returncode == 0, fixed.stdout[-4000:]
    changed = {h for h, r in recap(fixed.stdout).items() if r["changed"]}
    assert {h for h, _, _ in SIX} <= changed
    # slurmd on gpu02 and infer01 registers again within seconds of its restart
    for _ in range(10):
        code, report = day2.drift()
        if code == 0:
            break
        time.sleep(6)
    assert (code, report["findings"]) == (0, [])


# --- backups ------------------------------------------------------------------------------


def start_backup(host: str) -> subprocess.CompletedProcess[str]:
    """What the timer does: start the backup unit, and wait for it (a oneshot)."""
    return run(
        str(BIN / "cluster-plan"),
        "lab",
        "run",
        str(PLAN),
        host,
        "--",
        "systemctl",
        "start",
        "cluster-plan-backup.service",
        timeout=900,
    )


@pytest.fixture(scope="session")
def backed_up(day2: Day2) -> Iterator[dict[str, Any]]:
    """A pending job and a canary file, then every node's backup timer run once."""
    controller = day2.controller()
    job = (
        day2.sh(controller, "cd /tmp && sbatch --parsable --begin=now+7days -t 1 --wrap 'sleep 1'")
        .strip()
        .split(";")[0]
    )
    token = secrets.token_hex(16)
    day2.sh("gpu01", f"echo 'canary {token}' > /etc/cluster-plan-canary")
    started = time.monotonic()
    hosts = list(day2.expanded["hosts"])
    with ThreadPoolExecutor(len(hosts)) as pool:
        runs = dict(zip(hosts, pool.map(start_backup, hosts), strict=True))
    seconds = time.monotonic() - started
    failed = {h: r.stderr[-500:] for h, r in runs.items() if r.returncode != 0}
    assert failed == {}, failed
    try:
        yield {"job": job, "token": token, "seconds": seconds}
    finally:
        day2.sh(controller, f"scancel {job}", check=False)
        day2.sh("gpu01", "rm -f /etc/cluster-plan-canary", check=False)


def test_every_node_has_a_snapshot_the_backup_host_cannot_read(
    day2: Day2, backed_up: dict[str, Any]
) -> None:
    path = day2.expanded["backups"]["target"]["path"]
    repositories = day2.sh(day2.backup_host(), f"ls {path}").split()
    assert sorted(repositories) == sorted(day2.expanded["hosts"])  # one per node
    timer = day2.sh(
        "gpu01",
        "systemctl show cluster-plan-backup.timer -p TimersCalendar "
        "-p Persistent -p RandomizedDelayUSec",
    )
    assert "OnCalendar=*-*-* 02:00:00" in timer and "Persistent=yes" in timer
    assert "RandomizedDelayUSec=30min" in timer
    for host in day2.expanded["hosts"]:
        archives = day2.sh(host, "cluster-plan-backup borg list --short").split()
        assert any(a.startswith(f"{host}-") for a in archives), (host, archives)
    archive = day2.sh("gpu01", "cluster-plan-backup borg list --short --last 1").strip()
    held = day2.sh(
        "gpu01", f"cluster-plan-backup borg extract --stdout ::{archive} etc/cluster-plan-canary"
    )
    assert backed_up["token"] in held  # the snapshot holds it ...
    found = day2.sh(day2.backup_host(), f"grep -rl {backed_up['token']} {path}; echo rc=$?")
    assert found.strip() == "rc=1"  # ... and the backup host cannot read it
    status = day2.cli("backup", "status", str(PLAN), "--format", "json")
    report = command_result(status.stdout)
    assert (status.returncode, report["findings"]) == (0, [])
    assert {r["host"] for r in report["hosts"] if r["drill_ok"]} == set(day2.expanded["hosts"])


def test_a_monitors_snapshot_holds_what_a_lost_quorum_is_rebuilt_from(
    day2: Day2, backed_up: dict[str, Any]
) -> None:
    """The ceph role declares the monitors' state precious: each monitor's snapshot holds its
    keyring and the dumps made just before (monmap, configuration, CRUSH map, cephx keys)."""
    monitors = day2.expanded["groups"]["ceph_mon"]
    mon = monitors[0]
    fsid = day2.sh(mon, "ceph --connect-timeout 15 fsid").strip()
    archive = day2.sh(mon, "cluster-plan-backup borg list --short --last 1").strip()
    listed = day2.sh(mon, f"cluster-plan-backup borg list --short ::{archive}").split()
    dump = "var/lib/cluster-plan/ceph-dump"
    for item in ("monmap", "config-dump.json", "crushmap", "auth.keyring"):
        assert f"{dump}/{item}" in listed, (mon, item)
    assert f"var/lib/ceph/mon/ceph-{mon}/keyring" in listed
    # the monmap restored from the snapshot is this cluster's, with every planned monitor
    shown = day2.sh(
        mon,
        f'd=$(mktemp -d) && cd "$d" && cluster-plan-backup borg extract ::{archive}'
        f' {dump}/monmap && monmaptool --print {dump}/monmap; rc=$?; rm -rf "$d"; exit $rc',
    )
    assert f"fsid {fsid}" in shown, shown
    assert all(f"mon.{m}" in shown for m in monitors), shown
    # the dump stays root-only on the monitor
    assert day2.sh(mon, f"stat -c %a /{dump}").strip() == "700"
    # hosts without a monitor declare no ceph-mon state
    osd_only = [h for h in day2.expanded["groups"]["ceph_osd"] if h not in monitors]
    for host in osd_only:
        manifest = json.loads(day2.sh(host, "cat /var/lib/cluster-plan/manifest/ceph.json"))
        assert manifest["precious"] == [], host
        assert any(s.startswith("ceph-osd@") for s in manifest["services"]), manifest


@pytest.mark.lab_changes
def test_slurmctld_state_and_munge_key_come_back_with_the_queue(
    day2: Day2, backed_up: dict[str, Any]
) -> None:
    controller, job = day2.controller(), backed_up["job"]
    key_before = day2.sh(controller, "sha256sum /etc/munge/munge.key").split()[0]
    state = day2.expanded["scheduler"]["slurm"]["state_save"]
    # An HA pair's backup is stopped first, or it would take over the lost state
    # (docs/operations.md: restoring the state of an HA pair).
    standby = day2.controllers()[1:]
    for host in standby:
        day2.sh(host, "systemctl stop slurmctld")
    day2.sh(controller, f"systemctl stop slurmctld && rm -rf {state} /etc/munge/munge.key")
    restored = day2.playbook(
        "playbooks/restore.yml",
        "-l",
        controller,
        "-e",
        json.dumps({"backup_restore_names": ["munge", "slurmctld"]}),
    )
    assert restored.returncode == 0, restored.stdout[-4000:]
    assert day2.sh(controller, "sha256sum /etc/munge/munge.key").split()[0] == key_before
    day2.sh(
        controller,
        "for i in $(seq 30); do scontrol ping | grep -q UP && exit 0; sleep 2; done; exit 1",
    )
    assert day2.sh(controller, f"squeue -h -j {job} -o %T").strip() == "PENDING"
    for host in standby:
        day2.sh(host, "systemctl start slurmctld")
    new = (
        day2.sh(controller, "cd /tmp && sbatch --parsable --begin=now+7days -t 1 --wrap 'sleep 1'")
        .strip()
        .split(";")[0]
    )
    day2.sh(controller, f"scancel {new}")
    assert int(new) > int(job)  # the job id counter did not start again


@pytest.mark.lab_changes
def test_one_file_is_restored_alone(day2: Day2, backed_up: dict[str, Any]) -> None:
    before = day2.sh("gpu02", "cat /etc/issue")
    day2.sh("gpu02", "rm /etc/issue && echo later > /etc/cluster-plan-after-backup")
    wanted = json.dumps({"backup_restore_paths": ["/etc/issue"]})
    preview = day2.playbook("playbooks/restore.yml", "--check", "-l", "gpu02", "-e", wanted)
    assert preview.returncode == 0, preview.stdout[-4000:]
    assert "would_restore" in preview.stdout and "/etc/issue" in preview.stdout
    assert day2.sh("gpu02", "test -e /etc/issue; echo $?").strip() == "1"  # --check changed nothing
    restored = day2.playbook(
        "playbooks/restore.yml",
        "-l",
        "gpu02",
        "-e",
        json.dumps({"backup_restore_paths": ["/etc/issue"]}),
    )
    assert restored.returncode == 0, restored.stdout[-4000:]
    assert day2.sh("gpu02", "cat /etc/issue") == before
    # nothing else came back from the snapshot: a file made after it is still there
    assert day2.sh("gpu02", "cat /etc/cluster-plan-after-backup") == "later\n"
    day2.sh("gpu02", "rm /etc/cluster-plan-after-backup")


def _kept_passphrase(kept: Path) -> str:
    """The controller's copy, decrypted when Ansible Vault encrypts it (the session lab
    configures a vault password: tests/roles/test_secrets_lab.py)."""
    return vault_view(kept).strip()


@pytest.mark.lab_changes
def test_a_passphrase_is_never_replaced(day2: Day2, backed_up: dict[str, Any]) -> None:
    """The controller's copy is the one to keep: missing, it is taken back from the node; if
    it differs from the node's, the run stops instead of making the backups unreadable."""
    root = os.environ.get("CLUSTER_PLAN_SECRETS_DIR") or str(
        Path.home() / ".config" / "cluster-plan" / "secrets"
    )
    kept = Path(root) / day2.expanded["cluster"]["name"] / "gpu02.passphrase"
    original = kept.read_text()
    original_passphrase = _kept_passphrase(kept)
    on_node = "cat /var/lib/cluster-plan-backup/passphrase"
    try:
        kept.unlink()
        taken_back = day2.playbook("playbooks/backup.yml", "-l", "gpu02")
        assert taken_back.returncode == 0, taken_back.stdout[-4000:]
        passphrase = _kept_passphrase(kept)
        assert passphrase == day2.sh("gpu02", on_node) == original_passphrase
        assert oct(kept.stat().st_mode & 0o777) == "0o600"
        assert passphrase not in taken_back.stdout  # no_log: never printed
        kept.write_text("not-the-passphrase\n")
        refused = day2.playbook("playbooks/backup.yml", "-l", "gpu02")
        assert refused.returncode != 0
        assert "differs from" in refused.stdout
        assert day2.sh("gpu02", on_node) == original_passphrase  # the node's stays
    finally:
        kept.write_text(original)
        kept.chmod(0o600)


# Back-dated snapshots (2020, ISO weeks W05 to W09) and the plan's retention, daily 7 and
# weekly 4. borg keeps the newest snapshot of each of the 7 newest days (today's run and
# 2020-02-24..29, the later one on the 29th), then the newest of each of the 4 next weeks not
# already kept: W08 (23rd), W07 (16th), W06 (9th), W05 (2nd).
BACKDATED = [
    "2020-01-19T02:00:00",
    "2020-01-26T02:00:00",
    "2020-02-02T02:00:00",
    "2020-02-09T02:00:00",
    "2020-02-10T02:00:00",
    "2020-02-16T02:00:00",
    "2020-02-22T02:00:00",
    "2020-02-23T02:00:00",
    "2020-02-24T02:00:00",
    "2020-02-25T02:00:00",
    "2020-02-26T02:00:00",
    "2020-02-27T02:00:00",
    "2020-02-28T02:00:00",
    "2020-02-29T02:00:00",
    "2020-02-29T14:00:00",
]
KEPT = {
    "2020-02-02T02:00:00",
    "2020-02-09T02:00:00",
    "2020-02-16T02:00:00",
    "2020-02-23T02:00:00",
    "2020-02-24T02:00:00",
    "2020-02-25T02:00:00",
    "2020-02-26T02:00:00",
    "2020-02-27T02:00:00",
    "2020-02-28T02:00:00",
    "2020-02-29T14:00:00",
}


def test_back_dated_snapshots_are_pruned_as_the_plan_says(
    day2: Day2, backed_up: dict[str, Any]
) -> None:
    assert day2.expanded["backups"]["retention"] == {"daily": 7, "weekly": 4, "monthly": 0}
    host = "cpu01"
    script = " && ".join(
        f"cluster-plan-backup borg create --timestamp {t} ::{host}-{t} /etc/hostname"
        for t in BACKDATED
    )
    day2.sh(host, script, timeout=900)
    assert start_backup(host).returncode == 0
    names = day2.sh(host, "cluster-plan-backup borg list --short").split()
    old = {n.removeprefix(f"{host}-") for n in names if n.startswith(f"{host}-2020-")}
    current = [n for n in names if not n.startswith(f"{host}-2020-")]
    assert old == KEPT
    assert len(current) == 1  # today's: the newest of the day; earlier runs today are pruned


@pytest.mark.lab_changes
def test_an_offsite_target_gets_its_own_copy(day2: Day2, backed_up: dict[str, Any]) -> None:
    """The plan's `offsite` (given here as the role's view of the plan, backup_plan): a
    second repository on another host, backed up and drilled on its own."""
    plan = dict(day2.expanded["backups"], offsite={"host": "stor03", "path": "/srv/offsite"})
    hosts = "gpu02,stor03"
    # What a plan naming stor03 offsite gives it through common: SSH for the repositories'
    # owner (common_ssh_service_users reads the plan's backups; this plan is the role's view).
    borg = json.dumps({"common_ssh_service_users": ["borg"]})
    try:
        allowed = day2.playbook("playbooks/common.yml", "-l", "stor03", "-e", borg)
        assert allowed.returncode == 0, allowed.stdout[-4000:]
        set_up = day2.playbook(
            "playbooks/backup.yml", "-l", hosts, "-e", json.dumps({"backup_plan": plan})
        )
        assert set_up.returncode == 0, set_up.stdout[-4000:]
        assert start_backup("gpu02").returncode == 0
        offsite = day2.sh("gpu02", "cluster-plan-backup borg --repository offsite list --short")
        assert offsite.split() and offsite.split()[-1].startswith("gpu02-")
        assert day2.sh("stor03", "ls /srv/offsite").split() == ["gpu02", "stor03"]
        status = json.loads(day2.sh("gpu02", "cluster-plan-backup status"))
        assert status["expected"] == ["target", "offsite"]
        assert [status["drills"][r]["ok"] for r in ("target", "offsite")] == [True, True]
    finally:
        back = day2.playbook("playbooks/backup.yml", "-l", hosts)  # the plan's own backups
        day2.sh("stor03", "rm -rf /srv/offsite", check=False)
        ssh = day2.playbook("playbooks/common.yml", "-l", "stor03")
        assert back.returncode == 0, back.stdout[-4000:]
        assert ssh.returncode == 0, ssh.stdout[-4000:]


@pytest.mark.lab_changes
def test_a_corrupted_segment_fails_the_drill_and_backup_status(
    day2: Day2, backed_up: dict[str, Any]
) -> None:
    """Leaves gpu01's repository corrupted (its drill fails from now on): the module's last
    test, and among the `lab_changes` tests of the session."""
    repo = f"{day2.expanded['backups']['target']['path']}/gpu01"
    # the largest data segment holds the snapshot's file contents: overwrite 64 bytes inside
    day2.sh(
        day2.backup_host(),
        f"seg=$(ls -S {repo}/data/*/* | head -1) && size=$(stat -c %s "
        '"$seg") && head -c 64 /dev/urandom | dd of="$seg" bs=1 '
        "seek=$((size / 2)) conv=notrunc status=none",
    )
    assert start_backup("gpu01").returncode != 0  # the unit failed
    failed = day2.sh("gpu01", "systemctl is-failed cluster-plan-backup.service", check=False)
    assert failed.strip() == "failed"
    status = day2.cli("backup", "status", str(PLAN), "--hosts", "gpu01", "--format", "json")
    report = command_result(status.stdout)
    assert status.returncode == 1
    assert [(f["host"], f["check"]) for f in report["findings"]] == [("gpu01", "drill")]
    assert report["findings"][0]["found"].startswith("failed: ")
