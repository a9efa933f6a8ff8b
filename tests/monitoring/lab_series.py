"""Fixture series of the lab plan, as Prometheus would store them after scraping the rendered
targets: node_exporter's metrics on every node, the project's exporters' `cluster_plan_*`
metrics (names as in docs/monitoring-exporters.md) and Ceph's manager module. Written by hand
with a few faults in them (a node down, a GPU missing, a thermal throttle, an XID, HEALTH_WARN,
a failed acceptance and restore drill) and one hostile label value, which the status page must
show as text. The target labels come from the rendered file_sd/node.json."""

from __future__ import annotations

import json
from pathlib import Path

HOSTILE = '<script>alert("x")</script><b>&amp;'
GPU_NODES = {"gpu01": 2, "gpu02": 1}  # GPUs present; the plan gives each 2
SLURM = {"cpu01": 0, "gpu01": 2, "gpu02": 2, "infer01": 0}  # GPUs configured
DEVICES = {"mgmt": 1500, "compute": 9000, "storage": 9000}
OSDS = {"osd.0": "stor01", "osd.1": "stor02", "osd.2": "stor03", "osd.3": "osd01"}
DOWN = "cpu01"
STEP_S = 60
STEPS = 30


def _labels(labels: dict[str, str]) -> str:
    def esc(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

    return "{" + ",".join(f'{k}="{esc(v)}"' for k, v in labels.items()) + "}"


def target_labels(rendered: Path) -> dict[str, dict[str, str]]:
    """node -> the labels Prometheus gives its node_exporter's series."""
    out = {}
    for group in json.loads((rendered / "file_sd" / "node.json").read_text()):
        labels = {"job": "node", "instance": group["targets"][0], **group["labels"]}
        out[labels["node"]] = labels
    return out


def _node_series(node: str, base: dict[str, str]) -> list[tuple[str, dict[str, str], float]]:
    series = [
        ("up", base, 0.0 if node == DOWN else 1.0),
        ("cluster_plan_clock_synchronised", base, 1.0),
        ("cluster_plan_clock_local_reference", base, 0.0),
        ("node_timex_offset_seconds", base, -0.00012),
        ("node_network_mtu_bytes", {**base, "device": "lo"}, 65536.0),
    ]
    for device, mtu in DEVICES.items():
        if node == "osd01" and device == "compute":
            continue  # osd01 has no compute network
        speed = 1.25e8 if (node, device) == ("gpu01", "compute") else 1.25e9  # 1 of 10 Gb/s
        series += [
            ("node_network_speed_bytes", {**base, "device": device}, speed),
            ("node_network_mtu_bytes", {**base, "device": device}, float(mtu)),
        ]
    return series


def _gpu_series(node: str, base: dict[str, str], present: int) -> list[tuple[str, dict, float]]:
    n = {**base, "node": node}
    series = [
        ("cluster_plan_gpu_nvml_up", n, 1.0),
        ("cluster_plan_gpu_expected", n, 2.0),
        ("cluster_plan_gpu_present", n, float(present)),
    ]
    for gpu in range(present):
        g = {**n, "gpu": str(gpu), "uuid": f"GPU-{node}-{gpu}"}
        hot = node == "gpu02"
        series += [
            ("cluster_plan_gpu_temperature_celsius", g, 91.0 if hot else 54.0),
            ("cluster_plan_gpu_power_watts", g, 301.5),
            ("cluster_plan_gpu_power_limit_watts", g, 350.0),
            ("cluster_plan_gpu_sm_clock_hertz", g, 1.275e9 if hot else 1.755e9),
            ("cluster_plan_gpu_xid_last", g, 79.0 if hot else 0.0),
        ]
        for reason in ("sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"):
            on = hot and reason in ("sw_thermal", "hw_thermal")
            series.append(("cluster_plan_gpu_throttle", {**g, "reason": reason}, float(on)))
        for scope in ("volatile", "aggregate"):
            for kind in ("corrected", "uncorrected"):
                labels = {**g, "scope": scope, "kind": kind}
                series.append(
                    ("cluster_plan_gpu_ecc_errors_total", labels, 3.0 * (kind == "corrected"))
                )
        for kind in ("correctable", "uncorrectable", "pending", "failure"):
            series.append(("cluster_plan_gpu_remapped_rows", {**g, "kind": kind}, 0.0))
        if hot:
            series.append(("cluster_plan_gpu_xid_events_total", {**g, "xid": "79"}, 1.0))
    return series


def _controller_series(head: dict[str, str]) -> list[tuple[str, dict, float]]:
    """The Slurm and state collectors on head01, naming other nodes in `node`."""
    series: list[tuple[str, dict, float]] = []
    for node, gpus in SLURM.items():
        n = {**head, "node": node}
        current = "drained" if node == "infer01" else ("mixed" if gpus else "idle")
        for state in ("idle", "allocated", "mixed", "drained", "draining", "down", "other"):
            labels = {**n, "partition": "batch", "state": state}
            series.append(("cluster_plan_slurm_node_state", labels, float(state == current)))
        series += [
            ("cluster_plan_slurm_node_gpus", n, float(gpus)),
            ("cluster_plan_slurm_node_gpus_allocated", n, float(gpus // 2)),
        ]
    series += [
        ("cluster_plan_slurm_jobs_pending", {**head, "partition": "batch", "account": "nlp"}, 4.0),
        ("cluster_plan_slurm_slurmdbd_up", head, 1.0),
        ("cluster_plan_acceptance_passed", head, 0.0),
        ("cluster_plan_drift_findings", head, 2.0),
        ("cluster_plan_backup_drill_passed", {**head, "node": HOSTILE}, 0.0),
        ("cluster_plan_backup_drill_passed", {**head, "node": "head01"}, 1.0),
    ]
    for collector in ("slurm", "state"):
        series.append(("cluster_plan_collector_success", {**head, "collector": collector}, 1.0))
    return series


def _ceph_series() -> list[tuple[str, dict, float]]:
    mgr = {"job": "ceph", "instance": "10.40.0.10:9283", "mgr": "head01"}
    series = [("ceph_health_status", mgr, 1.0)]
    for daemon, host in OSDS.items():
        d = {**mgr, "ceph_daemon": daemon}
        series += [
            ("ceph_osd_up", d, 0.0 if daemon == "osd.3" else 1.0),
            ("ceph_osd_metadata", {**d, "hostname": host}, 1.0),
        ]
    for pool_id, name, stored, avail in (
        ("1", "rbd", 8.6e11, 1.4e11),
        ("2", "cephfs_data", 2e11, 8e11),
    ):
        p = {**mgr, "pool_id": pool_id}
        series += [
            ("ceph_pool_stored", p, stored),
            ("ceph_pool_max_avail", p, avail),
            ("ceph_pool_metadata", {**p, "name": name}, 1.0),
        ]
    return series


def series(rendered: Path) -> list[tuple[str, dict[str, str], float]]:
    targets = target_labels(rendered)
    out: list[tuple[str, dict[str, str], float]] = []
    for node, base in targets.items():
        out += _node_series(node, base)
    for node, present in GPU_NODES.items():
        out += _gpu_series(node, targets[node], present)
    out += _controller_series(targets["head01"])
    out += _ceph_series()
    return out


def openmetrics(rendered: Path, end: int) -> str:
    """Every series every STEP_S seconds up to `end` (whole seconds), one family at a time,
    time-ascending, as `promtool tsdb create-blocks-from openmetrics` reads it. Timestamps
    (backups, acceptance) are relative to each sample's time."""
    by_name: dict[str, list[tuple[dict[str, str], float]]] = {}
    for name, labels, value in series(rendered):
        by_name.setdefault(name, []).append((labels, value))
    times = [end - STEP_S * i for i in reversed(range(STEPS))]
    lines = []
    stamps = {
        "cluster_plan_acceptance_last_run_timestamp_seconds": [({}, -2 * 86400.0)],
        "cluster_plan_backup_last_success_timestamp_seconds": [
            ({"node": "head01"}, -30 * 3600.0),  # older than the plan's 26 h
            ({"node": "gpu01"}, -3 * 3600.0),
        ],
    }
    head = target_labels(rendered)["head01"]
    for name, entries in stamps.items():
        for labels, offset in entries:
            text = _labels({**head, **labels})
            lines += [f"{name}{text} {t + offset:.0f} {t}" for t in times]
    for name, entries in by_name.items():
        for labels, value in entries:
            text = _labels(labels)
            lines += [f"{name}{text} {value!r} {t}" for t in times]
    return "\n".join(lines) + "\n# EOF\n"
