#!/usr/bin/python
"""Ansible module: NVIDIA GPU facts through NVML (nvidia-ml-py), PCI sysfs and the kernel log."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

try:
    import pynvml
except ImportError:  # nvidia-ml-py not installed on the node: reported, not raised
    pynvml = None

DOCUMENTATION = r"""
---
module: nvml_facts
short_description: NVIDIA GPU facts from NVML, PCI sysfs and the kernel log
description:
  - >-
    Reads every NVIDIA GPU through NVML (the nvidia-ml-py binding) - name, UUID, serial,
    memory, driver and CUDA versions, PCIe generation and width (current and max),
    temperature and its thresholds, power, ECC mode and error counters, retired pages or
    remapped rows, NVLink state and clock-event (throttle) reasons.
  - >-
    Lists NVIDIA PCI devices from C(/sys/bus/pci/devices/*/vendor) (no lspci, no driver
    needed) and the loaded kernel module from C(/proc/driver/nvidia/version).
  - Collects XID errors from the kernel log (journalctl) since a given time.
  - Never fails for a missing library, driver or GPU; C(available=false) and C(error) say why.
version_added: "0.1.0"
options:
  xid_since:
    description:
      - >-
        Collect XID errors logged since this time (any C(journalctl --since) value, e.g.
        C(-24h) or C(2026-11-30 08:00:00)). Empty means since the current boot.
    type: str
    default: ""
  collect_xid:
    description: Read the kernel log for XID errors.
    type: bool
    default: true
  sysfs_root:
    description: Where sysfs is mounted (tests point it at a recorded tree).
    type: path
    default: /sys
  procfs_root:
    description: Where procfs is mounted (tests point it at a recorded tree).
    type: path
    default: /proc
author: cluster-plan contributors
"""

EXAMPLES = r"""
- name: Read GPU facts
  nvml_facts:
    xid_since: "-24h"
  register: gpu_facts
"""

RETURN = r"""
nvml:
  description: Everything read; the same dict is set as the C(nvml) fact.
  returned: always
  type: dict
  contains:
    available:
      description: NVML could be initialised.
      type: bool
    error:
      description: Why NVML is not available (null when it is).
      type: str
    driver_version:
      description: Driver version NVML reports.
      type: str
    cuda_version:
      description: Highest CUDA version the driver supports.
      type: str
    gpus:
      description: One dict per GPU (see docs/gpu.md).
      type: list
      elements: dict
    pci_devices:
      description: NVIDIA PCI functions found in sysfs, with kind gpu, nvswitch or other.
      type: list
      elements: dict
    loaded_module:
      description: Version and flavour (open or proprietary) of the loaded nvidia module.
      type: dict
    xid:
      description: XID events from the kernel log, and the error when it could not be read.
      type: dict
"""

ARGUMENT_SPEC: dict[str, dict[str, Any]] = {
    "xid_since": {"type": "str", "default": ""},
    "collect_xid": {"type": "bool", "default": True},
    "sysfs_root": {"type": "path", "default": "/sys"},
    "procfs_root": {"type": "path", "default": "/proc"},
}
NVIDIA_PCI_VENDOR = "0x10de"
_XID_LINE = re.compile(
    r"^(?:(?P<time>\S+)\s+\S+\s+kernel:\s+)?.*NVRM: Xid \(PCI:(?P<bus>[0-9A-Fa-f:.]+)\):\s*"
    r"(?P<xid>\d+),\s*(?P<message>.*)$"
)
_MODULE_VERSION = re.compile(
    r"NVIDIA UNIX (?P<open>Open )?(?:\S+ )?Kernel Module(?: for \S+)?\s+(?P<version>\d+(?:\.\d+)+)"
)
_CLOCK_EVENT_REASONS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def read_pci_devices(sysfs_root: str = "/sys") -> list[dict[str, Any]]:
    """NVIDIA PCI functions (GPUs, NVSwitches, audio) from sysfs, sorted by address."""
    devices = []
    for vendor_file in sorted(Path(sysfs_root, "bus/pci/devices").glob("*/vendor")):
        try:
            if vendor_file.read_text().strip().lower() != NVIDIA_PCI_VENDOR:
                continue
            folder = vendor_file.parent
            pci_class = folder.joinpath("class").read_text().strip().lower()
            device_id = folder.joinpath("device").read_text().strip().lower()
        except OSError:
            continue
        kind = (
            "gpu"
            if pci_class.startswith("0x03")
            else "nvswitch"
            if pci_class.startswith("0x0680")
            else "other"
        )
        devices.append(
            {"address": folder.name, "device_id": device_id, "class": pci_class, "kind": kind}
        )
    return devices


def read_loaded_module(procfs_root: str = "/proc") -> dict[str, Any] | None:
    """The loaded nvidia kernel module's version and flavour, or None when none is loaded."""
    try:
        text = Path(procfs_root, "driver/nvidia/version").read_text()
    except OSError:
        return None
    match = _MODULE_VERSION.search(text)
    if match is None:
        return {"version": None, "kernel_modules": None, "raw": text.strip()}
    return {
        "version": match.group("version"),
        "kernel_modules": "open" if match.group("open") else "proprietary",
        "raw": text.strip().splitlines()[0],
    }


def parse_xid_events(kernel_log: str) -> list[dict[str, Any]]:
    """XID events from ``journalctl -k -o short-iso`` (or dmesg) text."""
    events = []
    for line in kernel_log.splitlines():
        match = _XID_LINE.match(line.strip())
        if match:
            events.append(
                {
                    "time": match.group("time"),
                    "pci_bus_id": match.group("bus").lower(),
                    "xid": int(match.group("xid")),
                    "message": match.group("message"),
                }
            )
    return events


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def query_nvml(nvml: Any) -> dict[str, Any]:
    """The one boundary to NVML: every call to the library happens here; plain dicts out.

    ``nvml`` is the pynvml module (or None when it is not installed). Unsupported queries
    come back as None; other per-GPU errors are listed in that GPU's ``errors``.
    """
    if nvml is None:
        return {
            "available": False,
            "error": "NVML not available: nvidia-ml-py is not installed",
            "gpus": [],
        }
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        return {"available": False, "error": f"NVML not available: {err}", "gpus": []}
    try:
        cuda = _caller(nvml, [])(nvml.nvmlSystemGetCudaDriverVersion)
        result: dict[str, Any] = {
            "available": True,
            "error": None,
            "driver_version": _text(_caller(nvml, [])(nvml.nvmlSystemGetDriverVersion)),
            "cuda_version": None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",
            "gpus": [],
        }
        for index in range(nvml.nvmlDeviceGetCount()):
            errors: list[str] = []
            call = _caller(nvml, errors)
            handle = call(nvml.nvmlDeviceGetHandleByIndex, index)
            gpu = {"index": index} if handle is None else _query_gpu(nvml, handle, index, call)
            result["gpus"].append({**gpu, "errors": errors})
        return result
    except nvml.NVMLError as err:  # e.g. the driver went away between init and the count
        return {"available": False, "error": f"NVML failed: {err}", "gpus": []}
    finally:
        with contextlib.suppress(nvml.NVMLError):
            nvml.nvmlShutdown()


def _caller(nvml: Any, errors: list[str]) -> Callable[..., Any]:
    """Call an NVML function: None when the GPU does not support it, errors collected."""

    def call(fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound):
            return None  # this GPU, or this driver's NVML, does not have it
        except nvml.NVMLError as err:
            errors.append(f"{getattr(fn, '__name__', 'nvml')}: {err}")
            return None

    return call


def _retired_pages(nvml: Any, handle: Any, call: Callable[..., Any]) -> dict[str, Any] | None:
    """Pages retired for single- and double-bit ECC errors, and whether one is pending; None
    where NVML does not tell (GPUs that remap rows instead)."""
    single = call(
        nvml.nvmlDeviceGetRetiredPages,
        handle,
        nvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
    )
    if single is None:
        return None
    double = (
        call(
            nvml.nvmlDeviceGetRetiredPages,
            handle,
            nvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
        )
        or []
    )
    return {
        "single_bit": len(single),
        "double_bit": len(double),
        "pending": bool(call(nvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)),
    }


def _nvlinks(nvml: Any, handle: Any) -> list[dict[str, Any]]:
    nvlinks = []
    for link in range(nvml.NVML_NVLINK_MAX_LINKS):
        try:
            state = nvml.nvmlDeviceGetNvLinkState(handle, link)
        except nvml.NVMLError:  # links the GPU does not have answer NotSupported/InvalidArg
            continue
        nvlinks.append({"link": link, "active": state == nvml.NVML_FEATURE_ENABLED})
    return nvlinks


def _query_gpu(nvml: Any, handle: Any, index: int, call: Callable[..., Any]) -> dict[str, Any]:
    memory = call(nvml.nvmlDeviceGetMemoryInfo, handle)
    pci = call(nvml.nvmlDeviceGetPciInfo, handle)
    capability = call(nvml.nvmlDeviceGetCudaComputeCapability, handle)
    ecc_mode = call(nvml.nvmlDeviceGetEccMode, handle)
    power_mw = call(nvml.nvmlDeviceGetPowerUsage, handle)
    limit_mw = call(nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    remapped = call(nvml.nvmlDeviceGetRemappedRows, handle)
    reasons = call(nvml.nvmlDeviceGetCurrentClocksEventReasons, handle)
    if reasons is None:  # NVML before R535 calls them throttle reasons
        reasons = call(nvml.nvmlDeviceGetCurrentClocksThrottleReasons, handle)

    def ecc(kind: int, counter: int) -> Any:
        return call(nvml.nvmlDeviceGetTotalEccErrors, handle, kind, counter)

    def threshold(kind: int) -> Any:
        return call(nvml.nvmlDeviceGetTemperatureThreshold, handle, kind)

    retired = _retired_pages(nvml, handle, call)
    nvlinks = _nvlinks(nvml, handle)

    return {
        "index": index,
        "name": _text(call(nvml.nvmlDeviceGetName, handle)),
        "uuid": _text(call(nvml.nvmlDeviceGetUUID, handle)),
        "serial": _text(call(nvml.nvmlDeviceGetSerial, handle)),
        "pci_bus_id": None if pci is None else _text(pci.busId).lower(),
        "memory_total_mib": None if memory is None else memory.total // (1024 * 1024),
        "compute_capability": None if capability is None else f"{capability[0]}.{capability[1]}",
        "pcie": {
            "generation_current": call(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
            "generation_max": call(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
            "width_current": call(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
            "width_max": call(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
        },
        "temperature_c": call(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
        "temperature_thresholds_c": {
            "slowdown": threshold(nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN),
            "shutdown": threshold(nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN),
            "gpu_max": threshold(nvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX),
        },
        "power_w": None if power_mw is None else round(power_mw / 1000, 1),
        "power_limit_w": None if limit_mw is None else round(limit_mw / 1000, 1),
        "ecc": None
        if ecc_mode is None
        else {
            "enabled": bool(ecc_mode[0]),
            "pending": bool(ecc_mode[1]),
            "volatile_corrected": ecc(
                nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_VOLATILE_ECC
            ),
            "volatile_uncorrected": ecc(
                nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC
            ),
            "aggregate_corrected": ecc(
                nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, nvml.NVML_AGGREGATE_ECC
            ),
            "aggregate_uncorrected": ecc(
                nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_AGGREGATE_ECC
            ),
        },
        "retired_pages": retired,
        "remapped_rows": None
        if remapped is None
        else {
            "correctable": remapped[0],
            "uncorrectable": remapped[1],
            "pending": bool(remapped[2]),
            "failure": bool(remapped[3]),
        },
        "nvlinks": nvlinks,
        "clock_event_reasons": None
        if reasons is None
        else sorted(name for bit, name in _CLOCK_EVENT_REASONS.items() if reasons & bit),
    }


def read_xid(
    run_command: Callable[[list[str]], tuple[int, str, str]], since: str
) -> dict[str, Any]:
    """XID events from the kernel log through journalctl; errors are reported, not raised."""
    argv = ["journalctl", "-k", "-o", "short-iso", "--no-pager", "-q"]
    argv += ["--since", since] if since else ["-b"]
    try:
        rc, out, err = run_command(argv)
    except OSError as error:
        return {"source": "journalctl", "since": since or "boot", "events": [], "error": str(error)}
    return {
        "source": "journalctl",
        "since": since or "boot",
        "events": parse_xid_events(out) if rc == 0 else [],
        "error": None if rc == 0 else (err.strip() or f"journalctl exited {rc}"),
    }


def gather(
    params: dict[str, Any],
    run_command: Callable[[list[str]], tuple[int, str, str]],
    nvml: Any = pynvml,
) -> dict[str, Any]:
    facts = query_nvml(nvml)
    facts["pci_devices"] = read_pci_devices(params["sysfs_root"])
    facts["loaded_module"] = read_loaded_module(params["procfs_root"])
    if params["collect_xid"]:
        facts["xid"] = read_xid(run_command, params["xid_since"])
    else:
        facts["xid"] = {"source": None, "since": None, "events": [], "error": "not collected"}
    return facts


def main() -> None:
    # Imported here so the readers above work without Ansible (tests/gpu/device_check.sh).
    from ansible.module_utils.basic import AnsibleModule

    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)

    def run(argv: list[str]) -> tuple[int, str, str]:
        if module.get_bin_path(argv[0]) is None:
            return 127, "", f"{argv[0]} not found"
        rc, out, err = module.run_command(argv)
        return rc, out, err

    facts = gather(module.params, run)
    module.exit_json(changed=False, nvml=facts, ansible_facts={"nvml": facts})


if __name__ == "__main__":
    main()
