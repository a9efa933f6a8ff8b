"""Day 2 on the session lab: `cluster-plan change` adds a compute node and a storage node,
rolls an upgrade over the cpu pool (stopping at a node made to fail its health check, then
continuing where it stopped, and at a node an operator drained, whose drain it keeps),
removes both again (the compute node while a job runs on it,
the storage node once Ceph has moved its data off, while a client checks its files), and
replaces another compute node.

One perturb -> change -> verify cycle per operation, in one test (each step starts from the
cluster the one before left), ending where it began: the lab plan's nine nodes. Runs after
every read-only lab test (`lab_changes`).
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest
from lab_helpers import PLAN, WRITE_FILES, cli, on_node, osd_hosts, sbatch
from lab_helpers import ceph_json as ceph

# The shared session fixtures (`lab`, `converged_lab`), requested by the test below.
from support.change_plans import (
    grow_cpu,
    grow_osd_only,
    shrink_cpu,
    shrink_osd_only,
    smaller_cpu_memory,
    write_plan,
)
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.lab_state import running_hosts
from support.waiting import wait_until

from cluster_plan.api import load_expanded
from cluster_plan.lab import images
from cluster_plan.lab.names import for_plan

# Last of all (lab_reprovisions): it retires a node and re-images another. Once their
# CephFS sessions, never evicted, hung /shared for the tests after it; `change` now evicts
# them, and the test ends by proving that the file system answers and no session is left.
pytestmark = [pytest.mark.lab, pytest.mark.lab_changes, pytest.mark.lab_reprovisions]

FAULT = "/etc/systemd/system/slurmd.service.d/zz-test-health-fault.conf"
# slurmd "runs" but never answers: the unit is active, the node takes no job
FAULT_UNIT = "[Service]\\nExecStart=\\nExecStart=/bin/sleep infinity\\n"
CONTROLLER = "head01"
# The client host name of each CephFS session the MDS holds, one per line.
CEPHFS_SESSIONS = (
    "ceph tell mds.0 session ls --format=json 2>/dev/null | python3 -c 'import json,sys; "
    '[print(s.get("client_metadata", {}).get("hostname", "?")) '
    "for s in json.load(sys.stdin)]'"
)


# A client that keeps checking its files on the CephFS through the storage node's coming and
# going: a line a check, "ok" or "FAIL".
READER = (
    "systemd-run --unit=cp-day2-reader --collect sh -c 'while :; do "
    "if sha256sum -c --quiet /root/cp-day2-sums >/dev/null 2>&1; then echo ok; else echo FAIL; fi; "
    "sleep 2; done > /root/cp-day2-reader.log'"
)


def change(journal: Path, old: Path, new: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(
        "change", str(old), str(new), "--yes", "--transport", "lab",
        "--journal-dir", str(journal), "--check-timeout", "30", *extra,
        timeout=1800,
    )  # fmt: skip


def booted_on(host: str) -> str:
    """What the lab booted the host on: `bare` or its node image's top layer."""
    names = for_plan(load_expanded(str(PLAN)))
    return images.describe(images.recorded(names.node_dir(host)))


def sh(host: str, script: str, plan: Path = PLAN) -> str:
    done = on_node(host, script, plan=plan)
    assert done.returncode == 0, f"{host}: {script}: {done.stderr}"
    return done.stdout


def acting_sets(mon: str) -> dict[str, list[int]]:
    return {p["pgid"]: p["acting"] for p in ceph(mon, "pg ls")["pg_stats"]}


def real_memory(host: str, node: str, plan: Path = PLAN) -> str:
    """The RealMemory `host`'s slurm.conf gives `node`."""
    conf = sh(host, "cat /etc/slurm/slurm.conf", plan)
    line = next(ln for ln in conf.splitlines() if re.match(rf"NodeName=\S*{node}\b", ln))
    return re.search(r"RealMemory=(\d+)", line).group(1)  # type: ignore[union-attr]


def squeue(job: str) -> tuple[str, str, str]:
    """The job's (state, nodes, partition), as the controller has them."""
    out = sh(CONTROLLER, f"squeue -h -j {job} -o '%T|%N|%P'")
    state, nodes, partition = [*out.strip().split("|"), "", "", ""][:3]
    return state, nodes, partition


def sinfo_state(node: str) -> str:
    """'COUNT STATE' of the node in the general partition."""
    return sh(CONTROLLER, f"sinfo -h -p general -n {node} -o '%D %t'").strip()


def test_nodes_are_added_upgraded_in_turn_removed_under_work_and_replaced(
    converged_lab: Converged,  # noqa: F811
    tmp_path: Path,
):
    grown = write_plan(tmp_path / "grown", grow_cpu, grow_osd_only)
    upgraded = write_plan(tmp_path / "upgraded", smaller_cpu_memory, base=grown)
    shrunk = write_plan(tmp_path / "shrunk", shrink_cpu, shrink_osd_only, base=upgraded)
    journal = tmp_path / "journal"
    seconds: dict[str, float] = {}
    before = real_memory(CONTROLLER, "cpu01")  # the lab profile's 4 GB, as Slurm counts it
    lab_plan = load_expanded(str(PLAN))
    mon = lab_plan["groups"]["ceph_mon"][0]
    mount = lab_plan["storage"]["ceph"]["cephfs"]["mount"]
    jobs: list[str] = []
    try:
        # gpu01 writes files on the CephFS and checks them every 2 s until the storage node
        # is gone (a unit left by an earlier run is stopped first)
        sh("gpu01", "systemctl stop cp-day2-reader 2>/dev/null; true")
        sums = sh("gpu01", WRITE_FILES.format(directory=f"{mount}/cp-day2", count=20))
        assert len(sums.splitlines()) == 20, sums
        sh("gpu01", f"cat > /root/cp-day2-sums <<'EOF'\n{sums}EOF\n{READER}")
        placed_before = acting_sets(mon)
        # -- add: cpu02 and osdn01 boot and converge in one run, every host learns of them,
        # a job lands on cpu02, osdn01's OSDs take placement groups in its rack. A job that
        # runs on the training pool meanwhile runs on through it, on the same node: the
        # change restarts slurmctld, which only a restart teaches new nodes.
        training = sbatch(CONTROLLER, "-p training -t 10 --wrap 'sleep 900'", CONTROLLER)
        jobs.append(training)
        running = wait_until(lambda: squeue(training), lambda row: row[0] == "RUNNING", 90, step=2)
        assert running[0] == "RUNNING", running
        slurmctld = sh(CONTROLLER, "systemctl show -p MainPID --value slurmctld").strip()
        started = time.monotonic()
        added = change(journal, PLAN, grown)
        seconds["add a compute and a storage node"] = time.monotonic() - started
        assert added.returncode == 0, added.stdout[-4000:] + added.stderr[-2000:]
        restarted = sh(CONTROLLER, "systemctl show -p MainPID --value slurmctld").strip()
        assert restarted not in ("0", slurmctld), (slurmctld, restarted)
        assert squeue(training) == running
        sh(CONTROLLER, f"scancel {training}")
        assert "1. add cpu02, osdn01" in added.stdout, added.stdout[-4000:]
        assert "cpu02: healthy" in added.stdout and "osdn01: healthy" in added.stdout
        # they joined a running lab, so they booted the bare base and the roles installed
        # every package on them: the install path the node images skip elsewhere is proven
        assert booted_on("cpu02") == booted_on("osdn01") == "bare"
        assert booted_on("cpu01") != "bare"
        grown_plan = load_expanded(str(grown))
        new_osds = [o for o, h in osd_hosts(ceph(mon, "osd tree")).items() if h == "osdn01"]
        planned = [d for d in grown_plan["hosts"]["osdn01"]["disks"] if d.get("use") == "osd"]
        assert new_osds and len(new_osds) == len(planned), ceph(mon, "osd tree")
        tree = {n["name"]: n for n in ceph(mon, "osd crush tree")["nodes"]}
        rack = tree[grown_plan["hosts"]["osdn01"]["rack"]]  # CRUSH holds it in its plan rack
        assert tree["osdn01"]["id"] in rack.get("children", []), tree
        # HEALTH_OK may come before backfill ends (misplaced objects raise no warning): wait
        # until placement groups are served by the new OSDs
        for _ in range(30):
            placed = acting_sets(mon)
            moved = [pg for pg, acting in placed.items() if set(acting) & set(new_osds)]
            if moved:
                break
            time.sleep(2)
        assert moved and any(placed_before.get(pg) != placed[pg] for pg in moved), placed
        address = grown_plan["hosts"]["cpu02"]["address"]
        assert f"{address}\tcpu02.lab.internal cpu02" in sh(CONTROLLER, "cat /etc/hosts")
        ran = sh(CONTROLLER, "cd /tmp && timeout 120 srun -p general -w cpu02 -t 1 hostname")
        assert ran.split() == ["cpu02"]
        idle = wait_until(
            lambda: sinfo_state("cpu02"), lambda state: state == "1 idle", 120, step=2
        )
        assert idle == "1 idle", idle
        sh("cpu02", "command -v iperf3 fping", grown)  # it can take part in acceptance runs

        # -- upgrade: cpu01 fails its health check; the roll stops there, cpu02 untouched
        sh("cpu01", f"mkdir -p {Path(FAULT).parent} && printf '{FAULT_UNIT}' > {FAULT} "
                    "&& systemctl daemon-reload")  # fmt: skip
        # (the failing check's wait is the whole timeout: 10 s proves the stop as well as 30)
        started = time.monotonic()
        stopped = change(journal, grown, upgraded, "--check-timeout", "10")
        seconds["upgrade, stopped at cpu01"] = time.monotonic() - started
        assert stopped.returncode == 1, stopped.stdout[-3000:]
        assert "FAILED: cpu01" in stopped.stdout, stopped.stdout[-3000:]
        assert "cpu01 is drained" in stopped.stdout
        assert "2. upgrade cpu02" not in stopped.stdout.split("FAILED")[-1]
        smaller = real_memory("cpu01", "cpu01", grown)
        assert int(smaller) < int(before)  # cpu01 was converged to the new profile
        assert real_memory("cpu02", "cpu02", grown) == before  # cpu02 was not touched
        sh("cpu01", f"rm -f {FAULT} && systemctl daemon-reload && systemctl restart slurmd")
        # an operator drains cpu02 for a reason of their own before its turn: the change
        # converges it all the same, but neither overwrites that reason nor resumes it, and
        # its health check stops the roll, naming it
        operator = "operator: reseat the NIC"
        sh(CONTROLLER, f"scontrol update NodeName=cpu02 State=DRAIN Reason='{operator}'")
        started = time.monotonic()
        held = change(journal, grown, upgraded, "--check-timeout", "10")
        seconds["upgrade, continued to cpu02 drained by an operator"] = time.monotonic() - started
        assert held.returncode == 1, held.stdout[-4000:] + held.stderr[-2000:]
        assert "continuing an earlier run of this change" in held.stdout
        assert "done before: drain cpu01" in held.stdout
        assert f"cpu02 is out of service already ({operator}): left so" in held.stdout
        assert "cpu02 stays drained" in held.stdout and "FAILED: cpu02" in held.stdout
        assert f"Reason={operator} [" in sh(CONTROLLER, "scontrol show node --oneliner cpu02")
        assert real_memory("cpu02", "cpu02", grown) == smaller  # converged all the same
        sh(CONTROLLER, "scontrol update NodeName=cpu02 State=RESUME")  # the operator's own call
        started = time.monotonic()
        resumed = change(journal, grown, upgraded)
        seconds["upgrade, continued"] = time.monotonic() - started
        assert resumed.returncode == 0, resumed.stdout[-4000:] + resumed.stderr[-2000:]
        assert "done before: apply the new plan to cpu02" in resumed.stdout
        assert real_memory(CONTROLLER, "cpu02", grown) == smaller

        # -- remove both and replace cpu01, in one change (one reconfigure for all three):
        # cpu02 drains while a job runs on it; the job finishes, nothing is lost; cpu01 gets
        # a new disk under the same name and address and comes back on the lab plan's profile.
        # The change drains cpu02 about 3 s after the job starts (a fresh-clone run's journal): 12 s
        # keeps it running through the drain, and the wait for it short.
        job = sbatch(
            CONTROLLER, "-p general -w cpu02 -t 3 -o /tmp/removal-%j.out --wrap "
            "'sleep 12; echo finished'", CONTROLLER,
        )  # fmt: skip
        sh(CONTROLLER, f"for i in $(seq 60); do squeue -h -j {job} -t R | grep -q . && exit 0; "
                       "sleep 1; done; exit 1")  # fmt: skip
        address = lab_plan["hosts"]["cpu01"]["address"]
        sh("cpu01", "echo old disk > /root/replace-marker")
        started = time.monotonic()
        removed = change(journal, upgraded, PLAN, "--replace", "cpu01")
        seconds["remove both (a job of 12 s running), replace cpu01"] = time.monotonic() - started
        assert removed.returncode == 0, removed.stdout[-4000:] + removed.stderr[-2000:]
        assert f"cpu02: running job(s) {job}" in removed.stdout, removed.stdout[-4000:]
        # the removals come first: cpu02's job is waited for before cpu01 is re-imaged
        numbered = dict(
            re.findall(r"^(\d+)\. (remove cpu02|replace cpu01)\b", removed.stdout, re.M)
        )
        order = {what: int(number) for number, what in numbered.items()}
        assert order["remove cpu02"] < order["replace cpu01"], removed.stdout[:3000]
        record = sh(CONTROLLER, f"sacct -n -X -j {job} -o State,ExitCode -P")
        assert record.split() == ["COMPLETED|0:0"], record
        assert "cpu02" not in sh(CONTROLLER, "sinfo -h -N -o %N")
        assert "cpu02" not in sh(CONTROLLER, "cat /etc/hosts /etc/slurm/slurm.conf")
        # osdn01's data moved off before its OSDs were purged; the client never missed a file
        assert "mark the OSDs of osdn01 out" in removed.stdout
        assert "osdn01" not in [n["name"] for n in ceph(mon, "osd crush tree")["nodes"]]
        assert not set(new_osds) & {o["osd"] for o in ceph(mon, "osd dump")["osds"]}
        assert sh("gpu01", "systemctl is-active cp-day2-reader").split() == ["active"]
        log = sh("gpu01", "systemctl stop cp-day2-reader; cat /root/cp-day2-reader.log")
        # a check every 2 s or so through minutes of changes, and not one mismatch
        assert log.split().count("ok") >= 30 and "FAIL" not in log, log[-2000:]
        assert not {"cpu02", "osdn01"} & running_hosts(PLAN)
        # cpu01 was re-imaged; what every other host knows of it follows the lab plan
        assert "re-provision cpu01" in removed.stdout and "cpu01: healthy" in removed.stdout
        assert sh("cpu01", "ls /root/replace-marker 2>/dev/null || echo gone").split() == ["gone"]
        assert f"inet {address}/" in sh("cpu01", "ip -4 -o addr show")
        ran = sh(CONTROLLER, "cd /tmp && timeout 120 srun -p general -w cpu01 -t 1 hostname")
        assert ran.split() == ["cpu01"]
        sh("cpu01", "command -v iperf3 fping")
        assert real_memory(CONTROLLER, "cpu01") == before
        again = change(journal, upgraded, PLAN, "--replace", "cpu01")
        assert again.returncode == 0 and "carried out to the end" in again.stdout

        # -- the CephFS: no session of a retired or re-imaged node is left holding it, and
        # every file written before the changes reads back as written
        sessions = sh(mon, CEPHFS_SESSIONS)
        assert sessions.split().count("cpu01") <= 1 and "cpu02" not in sessions.split(), sessions
        health = sh(mon, "for i in $(seq 60); do h=$(ceph health); "
                         "[ \"$h\" = HEALTH_OK ] && break; sleep 2; done; echo $h")  # fmt: skip
        assert health.strip() == "HEALTH_OK", sh(mon, "ceph health detail")
        assert sh("gpu01", "timeout 30 ls -d /shared/. && timeout 30 touch /shared/.day2 "
                  "&& rm /shared/.day2").strip() == "/shared/."  # fmt: skip
        # read by the re-imaged cpu01, whose new client has cached none of them
        check = "timeout 60 sha256sum -c --quiet /root/cp-day2-sums && echo intact"
        checked = sh("cpu01", f"cat > /root/cp-day2-sums <<'EOF'\n{sums}EOF\n{check}")
        assert checked.split() == ["intact"], checked
    finally:
        if jobs:
            on_node(CONTROLLER, "scancel " + " ".join(jobs), timeout=60)
        on_node("cpu01", f"rm -f {FAULT} && systemctl daemon-reload", timeout=60)
        on_node("gpu01", "systemctl stop cp-day2-reader 2>/dev/null; true", timeout=60)
        # back to the lab plan's cluster whatever stopped
        if {"cpu02", "osdn01"} & running_hosts(PLAN):
            back = change(tmp_path / "restore", upgraded, shrunk, "--force")
            print("restoring the lab plan's nodes:", back.stdout[-3000:], back.stderr[-2000:])
        if real_memory(CONTROLLER, "cpu01") != before:
            back = change(tmp_path / "restore", shrunk, PLAN, "--force")
            print("restoring cpu01's profile:", back.stdout[-3000:], back.stderr[-2000:])
        # last: a CephFS that hangs must not keep the restores above from running
        on_node("gpu01", f"timeout 30 rm -rf {mount}/cp-day2; rm -f /root/cp-day2-*", timeout=60)
        on_node("cpu01", "rm -f /root/cp-day2-sums", timeout=60)
    print("day-2 operation times on the lab:", {k: round(v) for k, v in seconds.items()})
