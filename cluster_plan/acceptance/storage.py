"""Storage acceptance: the Ceph cluster's health, its OSDs against the plan, its placement
groups, and a `rados bench` write and read, judged and put in the report's storage section.

Commands run on the first monitor (it holds the admin key) through the runner's executor;
Ceph's are asked and read by cluster_plan.storage.ceph_commands, rados bench's here. Parsing
and judging are pure, tested on recorded output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cluster_plan.storage import ceph_commands as ceph
from cluster_plan.transport.execution import CommandResult, last_json_object

Run = Callable[[Sequence[str], float], CommandResult]
MIB = 1 << 20


@dataclass(frozen=True)
class StorageSpec:
    admin: str  # the host the commands run on
    planned_osds: int
    pool: str
    seconds: int
    threads: int = 16
    object_size: int = 4 * MIB
    health_wait_s: float = 180.0


def storage_spec_from_expanded(expanded: Mapping[str, Any]) -> StorageSpec | None:
    """What storage acceptance checks, or None for a plan without Ceph."""
    ceph = (expanded.get("storage") or {}).get("ceph")
    hosts = expanded.get("hosts") or {}
    # Only hosts of this run (a run may be limited to some hosts).
    mons = [h for h in _group(expanded, "ceph_mon") if h in hosts]
    if not ceph or not mons:
        return None
    settings = (expanded.get("acceptance") or {}).get("storage") or {}
    pool = settings.get("pool") or _bench_pool(ceph.get("pools") or [])
    if not pool:
        return None
    seconds = int(settings.get("bench_seconds", 10))
    return StorageSpec(mons[0], _planned_osds(expanded, hosts), pool, seconds)


def _group(expanded: Mapping[str, Any], name: str) -> list[str]:
    return list((expanded.get("groups") or {}).get(name) or [])


def _planned_osds(expanded: Mapping[str, Any], hosts: Mapping[str, Any]) -> int:
    """The OSD disks the plan gives the OSD hosts."""
    disks = [disk for host in _group(expanded, "ceph_osd") for disk in _disks(hosts, host)]
    return sum(1 for disk in disks if disk.get("use") == "osd")


def _disks(hosts: Mapping[str, Any], host: str) -> list[dict[str, Any]]:
    return list((hosts.get(host) or {}).get("disks") or [])


def _bench_pool(pools: list[dict[str, Any]]) -> str:
    """The first rbd pool, else the first pool ("" without pools)."""
    rbd = [p["name"] for p in pools if p.get("application", "rbd") == "rbd"]
    return str((rbd or [p["name"] for p in pools] or [""])[0])


def bench_argv(pool: str, seconds: int, mode: str, threads: int, object_size: int) -> list[str]:
    """`rados bench` on the pool: `write` (its objects kept for the read) or `seq`."""
    argv = ["rados", "bench", "-p", pool, str(seconds), mode]
    if mode == "write":
        argv += ["-b", str(object_size), "--no-cleanup"]
    return [*argv, "-t", str(threads), "--format", "json"]


def bench_cleanup_argv(pool: str) -> list[str]:
    return ["rados", "-p", pool, "cleanup"]


def parse_bench(result: CommandResult) -> dict[str, Any]:
    """MB/s, IOPS and mean latency from `rados bench ... --format json` (the JSON is the
    last line that parses), or its error."""
    data = last_json_object(result.stdout, "bandwidth")
    if data is not None:
        return {
            "mb_s": round(float(data["bandwidth"]), 3),
            "iops": round(float(data.get("average_iops", 0)), 3),
            "latency_s": round(float(data.get("average_latency", 0)), 4),
            "seconds": round(float(data.get("total_time_run", 0)), 3),
            "error": None,
        }
    error = (result.stderr or result.stdout).strip().splitlines()[-1:] or [f"exit {result.rc}"]
    return {"mb_s": None, "iops": None, "latency_s": None, "seconds": None, "error": error[0]}


def storage_section(
    spec: StorageSpec,
    health: Any,
    osd_dump: Any,
    pg_stat: Any,
    write: dict[str, Any],
    read: dict[str, Any],
) -> dict[str, Any]:
    """The report's storage section and its verdict: HEALTH_OK, every planned OSD up and in,
    every PG active+clean, both benchmarks ran."""
    section = {
        "host": spec.admin,
        "health": (health or {}).get("status", "unknown"),
        "health_checks": sorted((health or {}).get("checks") or {}),
        "osds": {"planned": spec.planned_osds, **ceph.osd_counts(osd_dump)},
        "pgs": ceph.pg_counts(pg_stat),
        "bench": {
            "pool": spec.pool,
            "seconds": spec.seconds,
            "threads": spec.threads,
            "object_size": spec.object_size,
            "write": write,
            "read": read,
        },
    }
    problems = _storage_problems(spec, section)
    section["problems"] = problems
    section["passed"] = not problems
    return section


def _storage_problems(spec: StorageSpec, section: dict[str, Any]) -> list[str]:
    problems = []
    if section["health"] != "HEALTH_OK":
        checks = ", ".join(section["health_checks"]) or "no detail"
        problems.append(f"ceph health is {section['health']} ({checks})")
    o = section["osds"]
    if not o["up"] == o["in"] == o["total"] == spec.planned_osds:
        problems.append(
            f"{o['up']} OSDs up and {o['in']} in of {o['total']}, the plan has {spec.planned_osds}"
        )
    p = section["pgs"]
    if p["total"] == 0 or p["active_clean"] != p["total"]:
        problems.append(f"{p['active_clean']} of {p['total']} placement groups active+clean")
    for name in ("write", "read"):
        error = section["bench"][name]["error"]
        if error:
            problems.append(f"rados bench {name} on pool {spec.pool} failed: {error}")
    return problems


def run_storage_phase(
    spec: StorageSpec,
    run: Run,
    progress: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Wait (bounded) for HEALTH_OK, read the cluster's state, benchmark, clean up."""

    def health() -> ceph.Health:
        return ceph.health_of_json(ceph.json_answer(run(ceph.health_detail_argv(), 60)))

    healthy = ceph.wait_healthy(health, spec.health_wait_s, sleep=sleep, clock=clock)
    osd_dump = ceph.json_answer(run(ceph.osd_dump_argv(), 60))
    pg_stat = ceph.json_answer(run(ceph.pg_stat_argv(), 60))
    timeout = spec.seconds * 6 + 60
    results = {}
    for mode, words in (("write", "write"), ("seq", "read")):
        progress(f"storage: rados bench {words} {spec.seconds}s on pool {spec.pool}")
        argv = bench_argv(spec.pool, spec.seconds, mode, spec.threads, spec.object_size)
        results[words] = parse_bench(run(argv, timeout))
    run(bench_cleanup_argv(spec.pool), timeout)
    return storage_section(
        spec, healthy.document, osd_dump, pg_stat, results["write"], results["read"]
    )
