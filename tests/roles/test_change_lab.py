"""Day 2 on the session lab: `cluster-plan change` adds a compute node, rolls an upgrade over
the cpu pool (stopping at a node made to fail its health check, then continuing where it
stopped), removes the node again while a job runs on it, and replaces another.

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
from lab_helpers import PLAN, cli, on_node, sbatch

# The shared session fixtures (`lab`, `converged_lab`), requested by the test below.
from support.change_plans import grow_cpu, shrink_cpu, smaller_cpu_memory, write_plan
from support.lab_session import Converged, converged_lab, lab  # noqa: F401

from cluster_plan.api import load_expanded
from cluster_plan.lab import state
from cluster_plan.lab.names import for_plan

# Last of all (lab_reprovisions): it retires a node and re-images another. In ci14 their
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


def change(journal: Path, old: Path, new: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return cli(
        "change", str(old), str(new), "--yes", "--transport", "lab",
        "--journal-dir", str(journal), "--check-timeout", "30", *extra,
        timeout=1800,
    )  # fmt: skip


def lab_hosts() -> set[str]:
    st = state.load(for_plan(load_expanded(str(PLAN))).state_file)
    assert st is not None
    return {h for h, ref in st.nodes.items() if ref.alive()}


def sh(host: str, script: str, plan: Path = PLAN) -> str:
    done = on_node(host, script, plan=plan)
    assert done.returncode == 0, f"{host}: {script}: {done.stderr}"
    return done.stdout


def real_memory(host: str, node: str, plan: Path = PLAN) -> str:
    """The RealMemory `host`'s slurm.conf gives `node`."""
    conf = sh(host, "cat /etc/slurm/slurm.conf", plan)
    line = next(ln for ln in conf.splitlines() if re.match(rf"NodeName=\S*{node}\b", ln))
    return re.search(r"RealMemory=(\d+)", line).group(1)  # type: ignore[union-attr]


def test_a_node_is_added_upgraded_in_turn_and_removed_under_a_running_job(
    converged_lab: Converged,  # noqa: F811
    tmp_path: Path,
):
    grown = write_plan(tmp_path / "grown", grow_cpu)
    upgraded = write_plan(tmp_path / "upgraded", smaller_cpu_memory, base=grown)
    shrunk = write_plan(tmp_path / "shrunk", shrink_cpu, base=upgraded)
    journal = tmp_path / "journal"
    seconds: dict[str, float] = {}
    before = real_memory(CONTROLLER, "cpu01")  # the lab profile's 4 GB, as Slurm counts it
    try:
        # -- add: cpu02 boots, converges, every host learns of it, a job lands on it
        started = time.monotonic()
        added = change(journal, PLAN, grown)
        seconds["add"] = time.monotonic() - started
        assert added.returncode == 0, added.stdout[-4000:] + added.stderr[-2000:]
        assert "1. add cpu02" in added.stdout and "cpu02: healthy" in added.stdout
        address = load_expanded(str(grown))["hosts"]["cpu02"]["address"]
        assert f"{address}\tcpu02.lab.internal cpu02" in sh(CONTROLLER, "cat /etc/hosts")
        ran = sh(CONTROLLER, "cd /tmp && timeout 120 srun -p general -w cpu02 -t 1 hostname")
        assert ran.split() == ["cpu02"]
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
        started = time.monotonic()
        resumed = change(journal, grown, upgraded)
        seconds["upgrade, continued"] = time.monotonic() - started
        assert resumed.returncode == 0, resumed.stdout[-4000:] + resumed.stderr[-2000:]
        assert "continuing an earlier run of this change" in resumed.stdout
        assert "done before: drain cpu01" in resumed.stdout
        assert real_memory(CONTROLLER, "cpu02", grown) == smaller

        # -- remove: cpu02 drains while a job runs on it; the job finishes, nothing is lost
        job = sbatch(
            CONTROLLER, "-p general -w cpu02 -t 3 -o /tmp/removal-%j.out --wrap "
            "'sleep 25; echo finished'", CONTROLLER,
        )  # fmt: skip
        sh(CONTROLLER, f"for i in $(seq 60); do squeue -h -j {job} -t R | grep -q . && exit 0; "
                       "sleep 1; done; exit 1")  # fmt: skip
        started = time.monotonic()
        removed = change(journal, upgraded, shrunk)
        seconds["remove (a job of 25 s running)"] = time.monotonic() - started
        assert removed.returncode == 0, removed.stdout[-4000:] + removed.stderr[-2000:]
        assert f"cpu02: running job(s) {job}" in removed.stdout, removed.stdout[-4000:]
        record = sh(CONTROLLER, f"sacct -n -X -j {job} -o State,ExitCode -P")
        assert record.split() == ["COMPLETED|0:0"], record
        assert "cpu02" not in sh(CONTROLLER, "sinfo -h -N -o %N")
        assert "cpu02" not in sh(CONTROLLER, "cat /etc/hosts /etc/slurm/slurm.conf")
        assert "cpu02" not in lab_hosts()

        # -- replace: cpu01 gets a new disk under the same name and address, and comes back
        # on the lab plan's profile (what every other host knows of it follows)
        address = load_expanded(str(PLAN))["hosts"]["cpu01"]["address"]
        sh("cpu01", "echo old disk > /root/replace-marker")
        started = time.monotonic()
        replaced = change(journal, shrunk, PLAN, "--replace", "cpu01")
        seconds["replace, back to the lab plan"] = time.monotonic() - started
        assert replaced.returncode == 0, replaced.stdout[-4000:] + replaced.stderr[-2000:]
        assert "re-provision cpu01" in replaced.stdout and "cpu01: healthy" in replaced.stdout
        assert sh("cpu01", "ls /root/replace-marker 2>/dev/null || echo gone").split() == ["gone"]
        assert f"inet {address}/" in sh("cpu01", "ip -4 -o addr show")
        ran = sh(CONTROLLER, "cd /tmp && timeout 120 srun -p general -w cpu01 -t 1 hostname")
        assert ran.split() == ["cpu01"]
        sh("cpu01", "command -v iperf3 fping")
        assert real_memory(CONTROLLER, "cpu01") == before
        again = change(journal, shrunk, PLAN, "--replace", "cpu01")
        assert again.returncode == 0 and "carried out to the end" in again.stdout

        # -- the CephFS: no session of a retired or re-imaged node is left holding it
        lab_plan = load_expanded(str(PLAN))["hosts"]
        mon = next(h for h, spec in lab_plan.items() if "ceph_mon" in spec["roles"])
        sessions = sh(mon, CEPHFS_SESSIONS)
        assert sessions.split().count("cpu01") <= 1 and "cpu02" not in sessions.split(), sessions
        health = sh(mon, "for i in $(seq 60); do h=$(ceph health); "
                         "[ \"$h\" = HEALTH_OK ] && break; sleep 2; done; echo $h")  # fmt: skip
        assert health.strip() == "HEALTH_OK", sh(mon, "ceph health detail")
        assert sh("gpu01", "timeout 30 ls -d /shared/. && timeout 30 touch /shared/.day2 "
                  "&& rm /shared/.day2").strip() == "/shared/."  # fmt: skip
    finally:
        on_node("cpu01", f"rm -f {FAULT} && systemctl daemon-reload", timeout=60)
        if "cpu02" in lab_hosts():  # back to the lab plan's cluster whatever stopped above
            back = change(tmp_path / "restore", upgraded, shrunk, "--force")
            print(back.stdout[-3000:], back.stderr[-2000:])
        if real_memory(CONTROLLER, "cpu01") != before:
            back = change(tmp_path / "restore", shrunk, PLAN, "--force")
            print(back.stdout[-3000:], back.stderr[-2000:])
    print("day-2 operation times on the lab:", {k: round(v) for k, v in seconds.items()})
