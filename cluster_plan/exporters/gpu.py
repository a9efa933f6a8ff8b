"""The GPU collector: what NVML says of each GPU, as the pinned cluster_plan_gpu_* metrics.

`read_nvml` is the one boundary to NVML (every library call happens there; plain data out);
`gpu_families` turns a reading into metric families and is pure. A node without NVML (no
binding, no driver, the driver gone) gives a reading with `up` False: the collector then writes
cluster_plan_gpu_nvml_up 0 and what the plan expects, never a traceback.

XIDs: NVML reports an XID as an event, only to an event set registered before it happens, and
keeps no history. A run therefore sees the XIDs raised while it waits (`xid_wait_ms`); the
counts and the last code are kept between runs in a small JSON state file, so
cluster_plan_gpu_xid_events_total only grows and cluster_plan_gpu_xid_last stays set until the
file is removed. XIDs raised between two runs are not seen here (the kernel log has them, and
the acceptance GPU check reads it).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.metrics_core import Metric

from cluster_plan.exporters.textfile import CollectorError, family, write_atomic
from cluster_plan.monitoring import metrics
from cluster_plan.plan.input_files import InputError, read_json

# nvmlClocksThrottleReason* bits (the same bits as nvmlClocksEventReason*)
THROTTLE_BITS = {
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sw_thermal": 0x20,
    "hw_thermal": 0x40,
    "hw_power_brake": 0x80,
}
# (scope, kind) -> nvmlDeviceGetTotalEccErrors(handle, error type, counter type)
ECC_COUNTERS = {
    ("volatile", "corrected"): (0, 0),
    ("volatile", "uncorrected"): (1, 0),
    ("aggregate", "corrected"): (0, 1),
    ("aggregate", "uncorrected"): (1, 1),
}
# nvmlDeviceGetRemappedRows answers (correctable, uncorrectable, pending, failure occurred)
REMAP_KINDS = ("correctable", "uncorrectable", "pending", "failure")
# NVML_NVLINK_ERROR_DL_*
NVLINK_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
NVML_CLOCK_SM = 1
NVML_TEMPERATURE_GPU = 0


@dataclass
class GpuReading:
    index: int
    uuid: str
    temperature_c: float | None = None
    power_mw: float | None = None
    power_limit_mw: float | None = None
    sm_clock_mhz: float | None = None
    throttle: int | None = None
    ecc: dict[tuple[str, str], int] = field(default_factory=dict)
    remapped: dict[str, int] = field(default_factory=dict)
    nvlink_errors: dict[tuple[int, str], int] = field(default_factory=dict)


@dataclass
class NvmlReading:
    up: bool
    error: str | None = None
    gpus: list[GpuReading] = field(default_factory=list)
    xids: list[tuple[str, int]] = field(default_factory=list)  # (uuid, xid) seen this run


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_nvml(nvml: Any, xid_wait_ms: int = 0) -> NvmlReading:
    """Every NVML call of the collector; `nvml` is the pynvml module, or None without it."""
    if nvml is None:
        return NvmlReading(up=False, error="nvidia-ml-py is not installed")
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return NvmlReading(up=False, error=f"NVML not available: {err}")
    try:
        answering = [_answering(nvml, index) for index in range(nvml.nvmlDeviceGetCount())]
        found = [(index, handle) for index, handle in enumerate(answering) if handle is not None]
        gpus = [_read_gpu(nvml, handle, index) for index, handle in found]
        handles = [handle for _, handle in found]
        xids = _read_xids(nvml, handles, xid_wait_ms) if xid_wait_ms > 0 else []
        return NvmlReading(up=True, gpus=gpus, xids=xids)
    except nvml.NVMLError as err:  # e.g. the driver went away between init and the count
        return NvmlReading(up=False, error=f"NVML failed: {err}")
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _answering(nvml: Any, index: int) -> Any:
    """The GPU's handle, or None when it is counted but lost (GPU_IS_LOST: not present)."""
    try:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        nvml.nvmlDeviceGetUUID(handle)
    except nvml.NVMLError as err:
        print(f"gpu collector: GPU {index}: {err}", file=sys.stderr)
        return None
    return handle


def _answer(nvml: Any, fn: Any, *args: Any) -> Any:
    """One query; None when this GPU or driver does not answer it (the metric is left out)."""
    try:
        return fn(*args)
    except nvml.NVMLError:
        return None


def _read_gpu(nvml: Any, handle: Any, index: int) -> GpuReading:
    gpu = GpuReading(index=index, uuid=_text(nvml.nvmlDeviceGetUUID(handle)))
    gpu.temperature_c = _answer(nvml, nvml.nvmlDeviceGetTemperature, handle, NVML_TEMPERATURE_GPU)
    gpu.power_mw = _answer(nvml, nvml.nvmlDeviceGetPowerUsage, handle)
    gpu.power_limit_mw = _answer(nvml, nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    gpu.sm_clock_mhz = _answer(nvml, nvml.nvmlDeviceGetClockInfo, handle, NVML_CLOCK_SM)
    gpu.throttle = _answer(nvml, nvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle)
    if gpu.throttle is None:  # drivers that only answer the newer name
        gpu.throttle = _answer(nvml, nvml.nvmlDeviceGetCurrentClocksEventReasons, handle)
    for key, (error_type, counter_type) in ECC_COUNTERS.items():
        count = _answer(nvml, nvml.nvmlDeviceGetTotalEccErrors, handle, error_type, counter_type)
        if count is not None:
            gpu.ecc[key] = int(count)
    remapped = _answer(nvml, nvml.nvmlDeviceGetRemappedRows, handle)
    if remapped is not None:
        gpu.remapped = {kind: int(v) for kind, v in zip(REMAP_KINDS, remapped, strict=True)}
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        if _answer(nvml, nvml.nvmlDeviceGetNvLinkState, handle, link) is None:
            continue  # a link this GPU does not have
        for kind, counter in NVLINK_COUNTERS.items():
            value = _answer(nvml, nvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
            if value is not None:
                gpu.nvlink_errors[(link, kind)] = int(value)
    return gpu


def _read_xids(nvml: Any, handles: list[Any], wait_ms: int) -> list[tuple[str, int]]:
    """The XID events raised while waiting up to `wait_ms`; none where NVML has no events."""
    try:
        events = nvml.nvmlEventSetCreate()
    except nvml.NVMLError:
        return []
    seen: list[tuple[str, int]] = []
    try:
        for handle in handles:
            with contextlib.suppress(nvml.NVMLError):  # GPUs without XID events
                nvml.nvmlDeviceRegisterEvents(handle, XID_EVENT, events)
        deadline = time.monotonic() + wait_ms / 1000
        while (left_ms := int((deadline - time.monotonic()) * 1000)) > 0:
            try:
                event = nvml.nvmlEventSetWait_v2(events, left_ms)
            except nvml.NVMLError:  # Timeout: nothing more in this run's window
                break
            if event.eventType & XID_EVENT:
                seen.append((_text(nvml.nvmlDeviceGetUUID(event.device)), int(event.eventData)))
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlEventSetFree(events)
    return seen


# --- XID state kept between runs ------------------------------------------------------------


MAX_XID_STATE_BYTES = 16 * 1024 * 1024
_AFRESH = "remove it to start counting afresh"


def load_xid_state(path: Path) -> dict[str, dict[str, Any]]:
    """{uuid: {"gpu": index, "last": xid, "counts": {xid: n}}}; empty when there is no file.
    A link, a FIFO or a file of another shape is a CollectorError naming the key."""
    if not os.path.lexists(path):
        return {}
    try:
        data = read_json(path, MAX_XID_STATE_BYTES, "an XID state file", follow=False)
    except InputError as exc:
        raise CollectorError(f"unreadable XID state: {exc}; {_AFRESH}") from None
    if not isinstance(data, dict) or not isinstance(data.get("gpus"), dict):
        raise CollectorError(f"{path}: not an XID state file; {_AFRESH}")
    gpus: dict[str, dict[str, Any]] = data["gpus"]
    for uuid, entry in gpus.items():
        problem = _xid_entry_problem(entry)
        if problem is not None:
            raise CollectorError(f"{path}: $.gpus.{uuid} {problem}; {_AFRESH}")
    return gpus


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _xid_entry_problem(entry: Any) -> str | None:
    if not isinstance(entry, dict):
        return "is not an object"
    if not _is_count(entry.get("gpu")) or not _is_count(entry.get("last")):
        return "has no whole-number gpu and last"
    counts = entry.get("counts")
    if not isinstance(counts, dict) or not all(
        k.isdigit() and _is_count(n) and n >= 0 for k, n in counts.items()
    ):
        return "counts is not {xid: count}"
    return None


def update_xid_state(state: dict[str, dict[str, Any]], reading: NvmlReading) -> None:
    """Add this run's XIDs to the counts; remember each GPU's index (for a GPU that is lost)."""
    indexes = {gpu.uuid: gpu.index for gpu in reading.gpus}
    for uuid, index in indexes.items():
        state.setdefault(uuid, {"gpu": index, "last": 0, "counts": {}})["gpu"] = index
    for uuid, xid in reading.xids:
        entry = state.setdefault(uuid, {"gpu": indexes.get(uuid, -1), "last": 0, "counts": {}})
        entry["last"] = xid
        entry["counts"][str(xid)] = entry["counts"].get(str(xid), 0) + 1


def save_xid_state(path: Path, state: dict[str, dict[str, Any]]) -> None:
    text = json.dumps({"gpus": state}, indent=1, sort_keys=True, allow_nan=False)
    write_atomic(path, text + "\n")


# --- metric families (pure) -----------------------------------------------------------------


def gpu_families(
    node: str,
    expected: int | None,
    reading: NvmlReading,
    xid_state: dict[str, dict[str, Any]],
) -> Iterator[Metric]:
    """Every cluster_plan_gpu_* family of one node's reading (docs/METRICS.md, the gpu
    collector)."""
    up = family(metrics.GPU_NVML_UP)
    up.add_metric([node], 1 if reading.up else 0)
    yield up
    if expected is not None:
        plan = family(metrics.GPU_EXPECTED)
        plan.add_metric([node], expected)
        yield plan
    if not reading.up:
        return  # nothing to count: present is left out rather than claimed 0
    present = family(metrics.GPU_PRESENT)
    present.add_metric([node], len(reading.gpus))
    yield present
    yield from _reading_families(node, reading.gpus)
    yield from _xid_families(node, xid_state)


def _reading_families(node: str, gpus: list[GpuReading]) -> Iterator[Metric]:
    scalars = [
        (metrics.GPU_TEMPERATURE, "temperature_c", 1.0),
        (metrics.GPU_POWER, "power_mw", 1e-3),
        (metrics.GPU_POWER_LIMIT, "power_limit_mw", 1e-3),
        (metrics.GPU_SM_CLOCK, "sm_clock_mhz", 1e6),
    ]
    for metric, attribute, scale in scalars:
        scalar = family(metric)
        for gpu in gpus:
            value = getattr(gpu, attribute)
            if value is not None:
                scalar.add_metric([node, str(gpu.index), gpu.uuid], value * scale)
        yield scalar
    throttle = family(metrics.GPU_THROTTLE)
    ecc = family(metrics.GPU_ECC_ERRORS)
    remap = family(metrics.GPU_REMAPPED_ROWS)
    nvlink = family(metrics.GPU_NVLINK_ERRORS)
    for gpu in gpus:
        ids = [node, str(gpu.index), gpu.uuid]
        if gpu.throttle is not None:
            for reason, bit in THROTTLE_BITS.items():
                throttle.add_metric([*ids, reason], 1 if gpu.throttle & bit else 0)
        for (scope, kind), count in gpu.ecc.items():
            ecc.add_metric([*ids, scope, kind], count)
        for kind, count in gpu.remapped.items():
            remap.add_metric([*ids, kind], count)
        for (link, kind), count in sorted(gpu.nvlink_errors.items()):
            nvlink.add_metric([*ids, str(link), kind], count)
    yield from (throttle, ecc, remap, nvlink)


def _xid_families(node: str, xid_state: dict[str, dict[str, Any]]) -> Iterator[Metric]:
    last = family(metrics.GPU_XID_LAST)
    total = family(metrics.GPU_XID_EVENTS)
    for uuid, entry in sorted(xid_state.items()):
        ids = [node, str(entry["gpu"]), uuid]
        last.add_metric(ids, entry["last"])
        for xid, count in sorted(entry["counts"].items(), key=lambda item: int(item[0])):
            total.add_metric([*ids, xid], count)
    yield last
    yield total


def import_nvml() -> Any:
    """The pynvml module, or None where nvidia-ml-py is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def collect_gpu(
    node: str, expected: int | None, state_file: Path, nvml: Any, xid_wait_ms: int
) -> list[Metric]:
    """Read NVML, fold this run's XIDs into the state file, and build the families."""
    state = load_xid_state(state_file)
    reading = read_nvml(nvml, xid_wait_ms)
    if not reading.up:  # a metric says so; the reason goes to the log
        print(f"gpu collector: {reading.error}", file=sys.stderr)
    else:
        update_xid_state(state, reading)
        save_xid_state(state_file, state)
    return list(gpu_families(node, expected, reading, state))
