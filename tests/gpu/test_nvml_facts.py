"""The nvml_facts module: sysfs, /proc and kernel-log readers, the NVML boundary, the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pynvml
import pytest
from nvml_replay import ReplayNvml, load_nvml_facts

from cluster_plan.gpu.health import judge_node

nvml_facts = load_nvml_facts()
REPO = Path(__file__).resolve().parents[2]


def make_pci(root: Path, address: str, vendor: str, pci_class: str, device: str) -> None:
    folder = root / "bus/pci/devices" / address
    folder.mkdir(parents=True)
    (folder / "vendor").write_text(vendor + "\n")
    (folder / "class").write_text(pci_class + "\n")
    (folder / "device").write_text(device + "\n")


def test_pci_devices_only_nvidia_and_kinds(tmp_path: Path) -> None:
    make_pci(tmp_path, "0000:18:00.0", "0x10de", "0x030200", "0x2330")
    make_pci(tmp_path, "0000:05:00.0", "0x10DE", "0x068000", "0x22a3")
    make_pci(tmp_path, "0000:00:1f.0", "0x8086", "0x060100", "0xa1c1")
    devices = nvml_facts.read_pci_devices(str(tmp_path))
    assert [(d["address"], d["kind"]) for d in devices] == [
        ("0000:05:00.0", "nvswitch"),
        ("0000:18:00.0", "gpu"),
    ]


def test_no_pci_tree_means_no_devices(tmp_path: Path) -> None:
    assert nvml_facts.read_pci_devices(str(tmp_path)) == []


@pytest.mark.parametrize(
    ("text", "version", "flavour"),
    [
        (
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  "
            "(dvs-builder@U16-I3-B03-4-3)  Tue Jul  8 18:23:45 UTC 2025\n"
            "GCC version:  gcc 12.2.0\n",
            "570.172.08",
            "open",
        ),
        (
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  "
            "Sun May 12 19:39:15 UTC 2024\n",
            "535.183.01",
            "proprietary",
        ),
    ],
)
def test_loaded_module(tmp_path: Path, text: str, version: str, flavour: str) -> None:
    (tmp_path / "driver/nvidia").mkdir(parents=True)
    (tmp_path / "driver/nvidia/version").write_text(text)
    loaded = nvml_facts.read_loaded_module(str(tmp_path))
    assert (loaded["version"], loaded["kernel_modules"]) == (version, flavour)


def test_no_loaded_module(tmp_path: Path) -> None:
    assert nvml_facts.read_loaded_module(str(tmp_path)) is None


def test_xid_lines_parsed_and_others_ignored() -> None:
    log = (
        "2026-11-30T08:14:19+0000 gpu01 kernel: NVRM: Xid (PCI:0000:9a:00): 79, pid='<unk"
        "nown>', name=<unknown>, GPU has fallen off the bus.\n"
        "2026-11-30T08:14:20+0000 gpu01 kernel: nvidia-modeset: Loading\n"
        "[  12.5] NVRM: Xid (PCI:0000:3A:00): 74, pid=1234, NVLink: fatal error\n"
    )
    events = nvml_facts.parse_xid_events(log)
    assert [(e["pci_bus_id"], e["xid"]) for e in events] == [("0000:9a:00", 79), ("0000:3a:00", 74)]
    assert events[0]["time"] == "2026-11-30T08:14:19+0000"
    assert events[0]["message"].endswith("GPU has fallen off the bus.")


def test_read_xid_reports_journalctl_failure() -> None:
    result = nvml_facts.read_xid(lambda argv: (1, "", "No journal files were found."), "-1h")
    assert result["error"] == "No journal files were found."
    assert result["events"] == []
    seen: list[list[str]] = []

    def journalctl(argv: list[str]) -> tuple[int, str, str]:
        seen.append(argv)
        return 0, "", ""

    nvml_facts.read_xid(journalctl, "")
    assert seen[0][-1] == "-b"


def test_without_the_library_nvml_is_not_available() -> None:
    # nvidia-ml-py is installed here, libnvidia-ml.so is not: the real binding must fail
    # cleanly, and so must a node without the binding at all.
    facts = nvml_facts.query_nvml(pynvml)
    assert facts["available"] is False
    assert facts["error"].startswith("NVML not available: ")
    assert nvml_facts.query_nvml(None)["error"] == (
        "NVML not available: nvidia-ml-py is not installed"
    )


def test_not_available_fails_a_planned_gpu_node_and_skips_others() -> None:
    facts = {**nvml_facts.query_nvml(None), "pci_devices": [], "xid": {}}
    report = judge_node("gpu01", facts, {"model": "H100-SXM5-80GB", "count": 8}, None)
    assert report["verdict"] == "fail"
    assert report["findings"][0]["check"] == "nvml"
    assert judge_node("head01", facts, None, None)["verdict"] == "skipped"
    tpu = judge_node("infer01", facts, {"model": "tpu", "count": 4}, None)
    assert tpu["verdict"] == "skipped"
    assert "not an NVIDIA GPU" in tpu["findings"][0]["message"]


def test_gpus_on_pci_without_driver_hint() -> None:
    facts = {
        **nvml_facts.query_nvml(None),
        "xid": {},
        "pci_devices": [{"address": "0000:18:00.0", "kind": "gpu"}],
    }
    report = judge_node("gpu01", facts, None, None)
    assert report["verdict"] == "fail"
    assert "is the driver loaded?" in report["findings"][0]["message"]


def test_init_error_and_per_gpu_errors_are_reported() -> None:
    assert nvml_facts.query_nvml(ReplayNvml({}, init_error="DRIVER_NOT_LOADED"))["error"] == (
        "NVML not available: Driver Not Loaded"
    )
    recording: dict[str, Any] = {
        "system": {"nvmlSystemGetDriverVersion": "570.1.2"},
        "devices": [
            {
                "nvmlDeviceGetName": {"": "NVIDIA L40S"},
                "nvmlDeviceGetTemperature": {"0": {"nvml_error": "GPU_IS_LOST"}},
                "nvmlDeviceGetCurrentClocksEventReasons": {
                    "": {"nvml_error": "FUNCTION_NOT_FOUND"}
                },
                "nvmlDeviceGetCurrentClocksThrottleReasons": {"": 0x40},
            }
        ],
    }
    facts = nvml_facts.query_nvml(ReplayNvml(recording))
    gpu = facts["gpus"][0]
    assert gpu["name"] == "NVIDIA L40S"
    assert gpu["temperature_c"] is None
    assert gpu["errors"] == ["nvmlDeviceGetTemperature: GPU is lost"]
    assert gpu["nvlinks"] == [] and gpu["remapped_rows"] is None
    assert gpu["clock_event_reasons"] == ["hw_thermal_slowdown"]  # pre-R535 name, same bits


def test_module_runs_through_ansible_without_nvml(tmp_path: Path) -> None:
    (tmp_path / "ansible.cfg").write_text("[defaults]\n")
    env = {
        **os.environ,
        "ANSIBLE_LIBRARY": str(REPO / "plugins/modules"),
        "ANSIBLE_CONFIG": str(tmp_path / "ansible.cfg"),
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false",
    }
    ansible = Path(sys.executable).parent / "ansible"
    proc = subprocess.run(
        [
            str(ansible),
            "localhost",
            "-c",
            "local",
            "-m",
            "nvml_facts",
            "-a",
            "collect_xid=false",
            "-e",
            f"ansible_python_interpreter={sys.executable}",
            "-o",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.split("=>", 1)[1])
    assert result["changed"] is False
    assert result["nvml"]["available"] is False
    assert "Traceback" not in proc.stdout + proc.stderr


def test_absent_gpus_skip_is_only_for_nodes_without_nvml() -> None:
    facts = {**nvml_facts.query_nvml(None), "xid": {}, "pci_devices": []}
    plan = {"model": "H100-PCIE-80GB", "count": 2}
    skipped = judge_node("gpu01", facts, plan, None, absent_gpus="skip")
    assert skipped["verdict"] == "skipped"
    assert (
        "the plan says 2x H100-PCIE-80GB; 0 NVIDIA PCI device(s)"
        in (skipped["findings"][0]["message"])
    )
    assert judge_node("gpu01", facts, plan, None)["verdict"] == "fail"
    # A lab node on a GPU machine sees the host's GPUs in sysfs, without NVML: skipped too.
    on_bus = {**facts, "pci_devices": [{"address": "0000:18:00.0", "kind": "gpu"}]}
    assert judge_node("head01", on_bus, None, None, absent_gpus="skip")["verdict"] == "skipped"
    # With NVML answering, skip changes nothing: the GPUs are judged.
    fixture = json.loads((Path(__file__).parent / "fixtures/pcie_x8.json").read_text())
    answering = {
        **nvml_facts.query_nvml(ReplayNvml(fixture["recording"])),
        "xid": {},
        "pci_devices": fixture["pci_devices"],
    }
    assert (
        judge_node("gpu01", answering, fixture["accelerators"], None, absent_gpus="skip")["verdict"]
        == "fail"
    )


def test_recorder_round_trips_through_replay(tmp_path: Path) -> None:
    # Record "real" NVML (here: a replay of the healthy fixture standing in for pynvml), then
    # replay the recording: the boundary must see the same answers both times.
    import nvml_replay

    fixture = json.loads((Path(__file__).parent / "fixtures/nvlink_down.json").read_text())
    recorded = nvml_replay.record(tmp_path / "node.json", ReplayNvml(fixture["recording"]))
    replayed = nvml_facts.query_nvml(ReplayNvml(json.loads((tmp_path / "node.json").read_text())))
    assert replayed == recorded
    assert recorded["gpus"][2]["nvlinks"][7] == {"link": 7, "active": False}
    assert len(recorded["gpus"]) == 8


def test_documentation_matches_the_argument_spec() -> None:
    import yaml

    documented = yaml.safe_load(nvml_facts.DOCUMENTATION)["options"]
    assert {k: (v["type"], v["default"]) for k, v in documented.items()} == {
        k: (v["type"], v["default"]) for k, v in nvml_facts.ARGUMENT_SPEC.items()
    }
    yaml.safe_load(nvml_facts.RETURN)
