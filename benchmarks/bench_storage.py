"""Storage on the lab, measured: a bare lab to HEALTH_OK, the storage stage's re-run, rados
bench against a raw read and write of the same loop device, and memory per Ceph daemon.

    .venv/bin/python benchmarks/bench_storage.py [--plan PLAN] [--keep]

Brings up its own lab (id `bench-storage`, or $CLUSTER_PLAN_LAB_ID) and takes it down at
the end (`--keep` leaves it up). Prints figures; asserts nothing about time. Needs root and
the lab's host tools; says so and exits 0 without them, so `make bench` runs anywhere.

The raw figures are taken on one OSD disk's loop device before Ceph owns it (dd with
O_DIRECT, 4 MiB blocks, the same size as rados bench's objects), then the device is zeroed
again so that the role finds it empty. rados bench writes and reads through the whole
cluster: replicas over the lab's rate-limited links, so the ratio is the overhead of Ceph
*and* the lab's scaled network, not of Ceph alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's playbook runner (tests/support)

from support.playbooks import playbook, recap  # noqa: E402

BIN = Path(sys.executable).parent
RAW_MIB = 256
BENCH_SECONDS = 10
DAEMONS = ("ceph-mon", "ceph-mgr", "ceph-osd", "ceph-mds", "ceph-fuse", "ganesha.nfsd")


def cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "cluster-plan"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def on_node(plan: str, host: str, script: str, timeout: float = 600) -> str:
    result = cli("lab", "run", plan, host, "--", "sh", "-c", script, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"{host}: {script}\n{result.stdout}\n{result.stderr}")
    return result.stdout


def dd_mb_s(text: str) -> float:
    """MB/s from dd's last line: '... copied, 2.5 s, 107 MB/s' (or GB/s, kB/s)."""
    value, unit = text.strip().splitlines()[-1].rsplit(",", 1)[1].split()
    return float(value) * {"kB/s": 1e-3, "MB/s": 1.0, "GB/s": 1e3}[unit]


def raw_figures(plan: str, host: str) -> tuple[float, float]:
    """Write then read RAW_MIB of one empty OSD loop device, direct I/O; zero it after."""
    device = "/dev/disk/by-id/lab-osd0"
    write = on_node(
        plan,
        host,
        f"dd if=/dev/zero of={device} bs=4M count={RAW_MIB // 4} oflag=direct 2>&1",
    )
    read = on_node(
        plan, host, f"dd if={device} of=/dev/null bs=4M count={RAW_MIB // 4} iflag=direct 2>&1"
    )
    return dd_mb_s(write), dd_mb_s(read)


def health_ok_after(plan: str, mon: str, timeout: float = 900) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        out = on_node(plan, mon, "ceph health --format json || true")
        if '"HEALTH_OK"' in out:
            return time.monotonic() - started
        time.sleep(3)
    raise RuntimeError(f"not HEALTH_OK within {timeout:.0f}s")


def rados_bench(plan: str, mon: str, pool: str) -> tuple[dict[str, Any], dict[str, Any]]:
    base = f"rados bench -p {pool} {BENCH_SECONDS} -t 16 --format json"
    write = on_node(plan, mon, f"{base.replace(' -t', ' write -b 4194304 --no-cleanup -t')}")
    read = on_node(plan, mon, f"{base.replace(' -t', ' seq -t')}")
    on_node(plan, mon, f"rados -p {pool} cleanup")

    def last_json(text: str) -> dict[str, Any]:
        for line in reversed(text.splitlines()):
            if line.startswith("{"):
                data: dict[str, Any] = json.loads(line)
                return data
        raise RuntimeError(f"no rados bench summary in: {text[-500:]}")

    return last_json(write), last_json(read)


def daemon_memory(plan: str, hosts: list[str]) -> dict[str, list[tuple[float, float]]]:
    """Daemon name -> [(PSS MiB, RSS MiB)] over every node that runs it."""
    script = (
        "for p in $(pgrep -x '" + "|".join(DAEMONS) + "'); do "
        'printf "%s " "$(cat /proc/$p/comm)"; '
        "awk '/^(Pss|Rss):/ {printf \"%s \", $2}' /proc/$p/smaps_rollup; echo; done"
    )
    found: dict[str, list[tuple[float, float]]] = {}
    for host in hosts:
        for line in on_node(plan, host, script).splitlines():
            parts = line.split()
            if len(parts) == 3:
                rss, pss = float(parts[1]), float(parts[2])  # smaps_rollup: Rss before Pss
                found.setdefault(parts[0], []).append((pss / 1024, rss / 1024))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plan", default="inventory/lab/cluster.yml")
    parser.add_argument("--keep", action="store_true", help="leave the lab up afterwards")
    args = parser.parse_args()
    if os.geteuid() != 0 or not all(shutil.which(t) for t in ("debootstrap", "unshare", "nft")):
        print("bench_storage: skipped, the lab needs root and its host tools")
        return 0
    os.environ.setdefault("CLUSTER_PLAN_LAB_ID", "bench-storage")
    from cluster_plan.api import load_expanded

    expanded = load_expanded(args.plan)
    plan = Path(args.plan)
    mon = expanded["groups"]["ceph_mon"][0]
    osd_host = expanded["groups"]["ceph_osd"][0]
    pool = expanded["acceptance"]["storage"]["pool"]
    cli("lab", "down", args.plan)
    try:
        started = time.monotonic()
        up = cli("lab", "up", args.plan)
        if up.returncode != 0:
            print(up.stderr, file=sys.stderr)
            return 1
        lab_s = time.monotonic() - started
        raw_started = time.monotonic()
        raw_write, raw_read = raw_figures(args.plan, osd_host)
        raw_s = time.monotonic() - raw_started
        common = playbook(plan, ["playbooks/common.yml"])
        storage = playbook(plan, ["playbooks/storage.yml"])
        if not (common.ok and storage.ok):
            print((common.output + storage.output)[-4000:], file=sys.stderr)
            return 1
        settle = health_ok_after(args.plan, mon)
        to_health = time.monotonic() - started - raw_s  # from a bare lab, dd left out
        rerun = playbook(plan, ["playbooks/storage.yml"])
        changed = sum(r["changed"] for r in recap(rerun.result.stdout).values())
        write, read = rados_bench(args.plan, mon, pool)
        memory = daemon_memory(args.plan, list(expanded["hosts"]))
    finally:
        if not args.keep:
            cli("lab", "down", args.plan)
    w_mb, r_mb = float(write["bandwidth"]), float(read["bandwidth"])
    print(f"plan {args.plan}, lab id {os.environ['CLUSTER_PLAN_LAB_ID']}")
    print(f"lab up (bare nodes)                      {lab_s:7.1f} s")
    print(f"common stage                             {common.seconds:7.1f} s")
    print(f"storage stage, first run                 {storage.seconds:7.1f} s")
    print(f"then HEALTH_OK after                     {settle:7.1f} s")
    print(f"bare lab -> HEALTH_OK                    {to_health:7.1f} s   (goal: < 300 s)")
    print(f"storage stage re-run                     {rerun.seconds:7.1f} s   changed={changed}")
    print(f"raw loop device ({RAW_MIB} MiB, 4 MiB direct)   write {raw_write:8.1f} MB/s"
          f"   read {raw_read:8.1f} MB/s")  # fmt: skip
    print(f"rados bench ({BENCH_SECONDS} s, 4 MiB, 16 threads, {pool})"
          f"   write {w_mb:8.1f} MB/s   read {r_mb:8.1f} MB/s")  # fmt: skip
    print(f"rados / raw                              write {w_mb / raw_write:8.3f}"
          f"        read {r_mb / raw_read:8.3f}")  # fmt: skip
    for daemon in DAEMONS:
        rows = memory.get(daemon) or []
        if rows:
            pss = [p for p, _ in rows]
            rss = [r for _, r in rows]
            print(f"{daemon:<14} x{len(rows)}  PSS {min(pss):6.1f}-{max(pss):6.1f} MiB   "
                  f"RSS {min(rss):6.1f}-{max(rss):6.1f} MiB   (goal: RSS < 600 MiB)")  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
