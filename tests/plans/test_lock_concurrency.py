"""Nothing lost to concurrency or crashes: `cluster-plan lock` runs that really race, and runs
really killed with SIGKILL, leave a whole and correct lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from plan_factory import synthetic_plan

CLI = [sys.executable, "-m", "cluster_plan.cli"]


def lock_cmd(plan: Path, *extra: str) -> list[str]:
    return [*CLI, "lock", *extra, str(plan)]


def test_racing_lock_runs_take_turns(tmp_path: Path) -> None:
    """Eight `lock` runs start at once on a plan that has no lock yet: one writes, the others
    find the lock it wrote current. Without the file lock each would read 'no lock' and write
    its own."""
    plan = tmp_path / "cluster.yml"
    plan.write_text(synthetic_plan(2048))
    runs = [subprocess.Popen(lock_cmd(plan), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True) for _ in range(8)]  # fmt: skip
    outputs = [run.communicate(timeout=600) for run in runs]
    assert [run.returncode for run in runs] == [0] * 8, outputs
    verbs = sorted(out.split(": ", 1)[1].split(" ", 1)[0] for out, _ in outputs)
    assert verbs == ["unchanged"] * 7 + ["wrote"], outputs
    lock = json.loads(plan.with_name("cluster.lock.json").read_text())
    check = subprocess.run(lock_cmd(plan, "--check"), capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    assert len(lock["networks"]["mgmt"]["hosts"]) == 2048 + 4


def test_a_lock_killed_at_any_moment_leaves_the_old_lock_or_the_new_one(tmp_path: Path) -> None:
    plan = tmp_path / "cluster.yml"
    lock_file = plan.with_name("cluster.lock.json")
    plan.write_text(synthetic_plan(4096))
    assert subprocess.run(lock_cmd(plan), capture_output=True, timeout=600).returncode == 0
    old = lock_file.read_text()
    plan.write_text(synthetic_plan(8192))  # the next lock adds 4096 hosts
    # how long a whole run takes here, so that kills land all through it (reading, allocating,
    # writing); no timing is asserted
    started = time.monotonic()
    probe = subprocess.run(lock_cmd(plan, "--check"), capture_output=True, timeout=600)
    assert probe.returncode == 1  # out of date
    span = time.monotonic() - started
    for step in range(12):
        run = subprocess.Popen(lock_cmd(plan), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(span * (0.3 + step * 0.07))
        os.kill(run.pid, signal.SIGKILL)
        run.wait(timeout=60)
        text = lock_file.read_text()
        json.loads(text)  # whole, never half written
        if text != old:  # the kill came after the rename: the new lock, whole
            assert (
                json.loads(text)["networks"]["mgmt"]["hosts"].keys()
                >= json.loads(old)["networks"]["mgmt"]["hosts"].keys()
            )
            lock_file.write_text(old)  # start the next kill from the old lock again
    final = subprocess.run(lock_cmd(plan), capture_output=True, text=True, timeout=600)
    assert final.returncode == 0, final.stderr
    new = json.loads(lock_file.read_text())
    previous = json.loads(old)
    for net, data in previous["networks"].items():  # survivors kept their addresses
        for host, address in data["hosts"].items():
            assert new["networks"][net]["hosts"][host] == address
    assert not list(tmp_path.glob(".cluster.lock.json.*"))  # the killed runs' leftovers gone
