"""Write tests/gpu/fixtures/*.json: NVML answers for an 8x H100 SXM node, healthy and degraded.

No GPU was at hand when these were made, so the answers are written in the recording format
of ``nvml_replay.py`` from NVML's documented answer shapes and an HGX H100's published
figures (81559 MiB, PCIe gen 5 x16, 18 NVLinks per GPU). A node recorded with
``python tests/gpu/nvml_replay.py record`` can be dropped in beside them.

    python tests/gpu/synth_fixtures.py      # rewrites the fixtures
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
BUSES = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]  # HGX H100 8-GPU baseboard layout
PLAN_8X_H100 = {
    "model": "H100-SXM5-80GB",
    "count": 8,
    "vendor": "nvidia",
    "kind": "gpu",
    "gres_type": "h100",
}
DRIVER = "570.172.08"


def _healthy_gpu(index: int) -> dict[str, Any]:
    bus = BUSES[index]
    zero = {"": 0}
    return {
        "nvmlDeviceGetName": {"": "NVIDIA H100 80GB HBM3"},
        "nvmlDeviceGetUUID": {"": f"GPU-5c1e8a2b-0f4d-4c1a-9e3b-{index:012x}"},
        "nvmlDeviceGetSerial": {"": f"165392200{index:04d}"},
        "nvmlDeviceGetPciInfo": {
            "": {"busId": f"00000000:{bus.upper()}:00.0", "pciDeviceId": 0x233010DE}
        },
        "nvmlDeviceGetMemoryInfo": {
            "": {
                "total": 81559 * 1024 * 1024,
                "free": 81004 * 1024 * 1024,
                "used": 555 * 1024 * 1024,
            }
        },
        "nvmlDeviceGetCudaComputeCapability": {"": [9, 0]},
        "nvmlDeviceGetCurrPcieLinkGeneration": {"": 5},
        "nvmlDeviceGetMaxPcieLinkGeneration": {"": 5},
        "nvmlDeviceGetCurrPcieLinkWidth": {"": 16},
        "nvmlDeviceGetMaxPcieLinkWidth": {"": 16},
        "nvmlDeviceGetTemperature": {"0": 33 + index},
        # NVML_TEMPERATURE_THRESHOLD_*: 0 shutdown, 1 slowdown, 3 gpu max
        "nvmlDeviceGetTemperatureThreshold": {"0": 92, "1": 89, "3": 87},
        "nvmlDeviceGetPowerUsage": {"": 71234 + 100 * index},
        "nvmlDeviceGetEnforcedPowerLimit": {"": 700000},
        "nvmlDeviceGetEccMode": {"": [1, 1]},
        # (error type, counter type): 0 corrected / 1 uncorrected, 0 volatile / 1 aggregate
        "nvmlDeviceGetTotalEccErrors": {"0,0": 0, "1,0": 0, "0,1": 2, "1,1": 0},
        "nvmlDeviceGetRetiredPages": {
            "0": {"nvml_error": "NOT_SUPPORTED"},
            "1": {"nvml_error": "NOT_SUPPORTED"},
        },
        "nvmlDeviceGetRemappedRows": {"": [0, 0, 0, 0]},
        "nvmlDeviceGetNvLinkState": {
            **{str(link): 1 for link in range(18)},
            **{str(link): {"nvml_error": "INVALID_ARGUMENT"} for link in range(18, 36)},
        },
        "nvmlDeviceGetCurrentClocksEventReasons": {"": 0x1},  # idle
        "nvmlDeviceGetRetiredPagesPendingStatus": zero,
        # what the GPU exporter reads besides (cluster_plan/exporters/gpu.py)
        "nvmlDeviceGetCurrentClocksThrottleReasons": {"": 0x1},
        "nvmlDeviceGetClockInfo": {"1": 345},  # NVML_CLOCK_SM, MHz, idle
        # (link, NVML_NVLINK_ERROR_DL_*): 0 replay, 1 recovery, 2 CRC flit, 3 CRC data
        "nvmlDeviceGetNvLinkErrorCounter": {
            f"{link},{counter}": 0 for link in range(18) for counter in range(4)
        },
    }


def healthy_recording() -> dict[str, Any]:
    return {
        "system": {"nvmlSystemGetDriverVersion": DRIVER, "nvmlSystemGetCudaDriverVersion": 12080},
        "devices": [_healthy_gpu(i) for i in range(8)],
    }


def pci_devices(gpus: int = 8) -> list[dict[str, Any]]:
    devices = [
        {"address": f"0000:{bus}:00.0", "device_id": "0x2330", "class": "0x030200", "kind": "gpu"}
        for bus in BUSES[:gpus]
    ]
    devices += [
        {
            "address": f"0000:{bus}:00.0",
            "device_id": "0x22a3",
            "class": "0x068000",
            "kind": "nvswitch",
        }
        for bus in ("05", "06", "07", "08")
    ]
    return devices


def _xid_line(bus: str, xid: int, message: str) -> str:
    return (
        f"2026-11-30T08:14:{xid % 60:02d}+0000 gpu01 kernel: NVRM: Xid "
        f"(PCI:0000:{bus}:00): {xid}, pid='<unknown>', name=<unknown>, {message}"
    )


def fixtures() -> dict[str, dict[str, Any]]:
    cases: dict[str, dict[str, Any]] = {}

    def case(
        name: str,
        description: str,
        recording: dict[str, Any],
        expected: dict[str, Any],
        kernel_log: str = "",
        gpus_on_pci: int = 8,
    ) -> None:
        cases[name] = {
            "description": description,
            "node": "gpu01",
            "accelerators": PLAN_8X_H100,
            "acceptance_gpu": {"max_temp_c": 85},
            "recording": recording,
            "pci_devices": pci_devices(gpus_on_pci),
            "kernel_log": kernel_log,
            "expected": expected,
        }

    case(
        "healthy_8x_h100",
        "8x H100 SXM, idle, every check passes",
        healthy_recording(),
        {"verdict": "pass", "failures": [], "warnings": []},
        kernel_log="2026-11-30T08:00:01+0000 gpu01 kernel: nvidia-nvlink: Nvlink Core is "
        "being initialized\n",
    )

    rec = healthy_recording()
    rec["devices"][3]["nvmlDeviceGetRemappedRows"] = {"": [0, 1, 1, 0]}
    rec["devices"][3]["nvmlDeviceGetTotalEccErrors"] = {"0,0": 0, "1,0": 1, "0,1": 2, "1,1": 1}
    rec["events"] = [{"device": 3, "xid": 63}]  # NVML's XID event for the same remap
    case(
        "row_remap_pending",
        "GPU 3 hit an uncorrectable error; a row remap waits for a reset",
        rec,
        {
            "verdict": "fail",
            "failures": [[3, "ecc_uncorrected"], [3, "remapped_rows"]],
            "warnings": [[3, "xid"]],
        },
        kernel_log=_xid_line(
            "5d", 63, "Row Remapper: New row marked for remapping, reset gpu to activate."
        ),
    )

    rec = healthy_recording()
    rec["devices"][5]["nvmlDeviceGetCurrPcieLinkWidth"] = {"": 8}
    case(
        "pcie_x8",
        "GPU 5's PCIe link trained down to x8",
        rec,
        {"verdict": "fail", "failures": [[5, "pcie_width"]], "warnings": []},
    )

    rec = healthy_recording()
    rec["devices"][2]["nvmlDeviceGetNvLinkState"]["7"] = 0
    rec["devices"][2]["nvmlDeviceGetNvLinkErrorCounter"].update(
        {"7,0": 41, "7,1": 3, "7,2": 17, "7,3": 2}
    )
    rec["events"] = [{"device": 2, "xid": 74}]
    case(
        "nvlink_down",
        "GPU 2's NVLink 7 is down, with the XID 74 that took it down",
        rec,
        {"verdict": "fail", "failures": [[2, "nvlink"], [2, "xid"]], "warnings": []},
        kernel_log=_xid_line(
            "3a",
            74,
            "NVLink: fatal error detected on link 7(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
        ),
    )

    rec = healthy_recording()
    rec["devices"][6]["nvmlDeviceGetTemperature"] = {"0": 91}
    rec["devices"][6]["nvmlDeviceGetCurrentClocksEventReasons"] = {"": 0x20 | 0x40}
    rec["devices"][6]["nvmlDeviceGetCurrentClocksThrottleReasons"] = {"": 0x20 | 0x40}
    rec["devices"][6]["nvmlDeviceGetClockInfo"] = {"1": 1275}
    case(
        "over_temperature",
        "GPU 6 at 91 C with thermal slowdown",
        rec,
        {"verdict": "fail", "failures": [[6, "temperature"]], "warnings": [[6, "clock_events"]]},
    )

    rec = healthy_recording()
    del rec["devices"][4]
    case(
        "gpu_missing",
        "One GPU fell off the bus: 7 answer NVML, 8 sit on the PCI bus",
        rec,
        {
            "verdict": "fail",
            "failures": [[None, "count"], [None, "pci"], [None, "xid"]],
            "warnings": [],
        },
        kernel_log=_xid_line("9a", 79, "GPU has fallen off the bus."),
    )
    return cases


def main() -> None:
    FIXTURES.mkdir(exist_ok=True)
    for name, data in fixtures().items():
        path = FIXTURES / f"{name}.json"
        path.write_text(json.dumps(copy.deepcopy(data), indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
