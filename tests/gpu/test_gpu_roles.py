"""The GPU roles on a GPU-less host and with a recorded GPU on the bus (their specs, README
and lint are checked for every role by tests/roles/test_role_quality.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.plan.catalog import load_catalog, nvswitch_default

REPO = Path(__file__).resolve().parents[2]


def run_gpu_playbook(
    tmp_path: Path,
    extra: dict[str, Any],
    *args: str,
    python: str = sys.executable,
    inventory: str = "localhost,",
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "vars.json").write_text(json.dumps(extra))
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_CACHE_PLUGIN": "memory",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        # The role runs here on the controller's own Python, which has no python3-apt, so the
        # apt module re-runs itself under /usr/bin/python3: Ansible's linear strategy can,
        # Mitogen cannot (https://github.com/mitogen-hq/mitogen/issues/849). Nodes run a Python
        # with python3-apt (roles/common installs it), so ansible.cfg's mitogen_linear serves
        # them.
        "ANSIBLE_STRATEGY": "linear",
    }
    command = [
        str(Path(sys.executable).parent / "ansible-playbook"),
        "-i",
        inventory,
        "-c",
        "local",
        str(REPO / "playbooks/gpu.yml"),
        "-e",
        f"@{tmp_path / 'vars.json'}",
        "-e",
        f"gpu_health_report_dir={tmp_path / 'reports'}",
        "-e",
        f"ansible_python_interpreter={python}",
        *args,
    ]
    return subprocess.run(
        command, capture_output=True, text=True, env=env, cwd=REPO, timeout=300, check=False
    )


GOLDEN_LAB = REPO / "tests" / "plans" / "golden" / "lab.expanded.json"


def plan_vars(
    model: str, count: int, lab: bool, pin: int | None = None, nvswitch: bool | None = None
) -> dict[str, Any]:
    """What the inventory gives a GPU host: the lab plan's expansion (the contract's shape),
    with the model, count, pin and NVSwitch under test (by default the catalog's, as the
    plan's defaults give it), as a lab plan or as a real cluster's."""
    expanded = json.loads(GOLDEN_LAB.read_text())
    host = expanded["hosts"]["gpu01"]
    host["accelerators"] = {
        **host["accelerators"],
        "model": model,
        "count": count,
        "driver_branch": pin,
        "nvswitch": nvswitch_default(model, count) if nvswitch is None else nvswitch,
        "catalog": load_catalog()[model],
    }
    cluster = {k: v for k, v in expanded.items() if k not in ("hosts", "groups")}
    if not lab:
        cluster["lab"] = None
    return {"plan_host": host, "cluster_plan": cluster}


def task_result(out: str, task: str) -> str:
    """The lines Ansible printed for one task: from its header to the next one."""
    header = f"TASK [nvidia_driver : {task}]"
    assert header in out, out
    return out.split(header, 1)[1].split("TASK [", 1)[0]


@pytest.mark.parametrize("check", [True, False], ids=["check-mode", "apply"])
def test_lab_gpu_node_without_gpus_is_left_alone(tmp_path: Path, check: bool) -> None:
    proc = run_gpu_playbook(
        tmp_path, plan_vars("H100-PCIE-80GB", 2, lab=True), *(["--check"] if check else [])
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "No NVIDIA PCI device on localhost" in out
    assert "nothing was changed" in out
    assert "Install the chosen driver" in out and "skipping: [localhost]" in out
    assert "GPU health skipped" in out
    if not check:
        report = json.loads((tmp_path / "reports/localhost.json").read_text())
        assert report["verdict"] == "skipped"
        assert report["planned_gpus"] == 2


def test_real_cluster_node_without_nvml_fails_clearly(tmp_path: Path) -> None:
    # /usr/bin/python3 has no nvidia-ml-py: the module must still answer, never a traceback.
    proc = run_gpu_playbook(
        tmp_path, plan_vars("H100-SXM5-80GB", 8, lab=False), python="/usr/bin/python3"
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "GPU health check failed on localhost: NVML not available" in out
    assert "Traceback" not in out
    report = json.loads((tmp_path / "reports/localhost.json").read_text())
    assert report["verdict"] == "fail"


def test_pin_too_old_is_refused_before_touching_the_host(tmp_path: Path) -> None:
    proc = run_gpu_playbook(
        tmp_path,
        plan_vars("H200-SXM-141GB", 8, lab=True, pin=535),
        "-e",
        '{"nvidia_driver_available_branches": [535, 550, 570, 580]}',
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    assert "older than H200-SXM-141GB's minimum branch 550" in out


def gpu_on_the_bus(root: Path, loaded: str | None = None) -> dict[str, str]:
    """A recorded sysfs tree with one H100 under ``root`` (and a procfs whose NVIDIA driver
    version is ``loaded``, if any): the role variables that point the role at them."""
    device = root / "sys/bus/pci/devices/0000:18:00.0"
    device.mkdir(parents=True)
    (device / "vendor").write_text("0x10de\n")
    (device / "class").write_text("0x030200\n")
    (device / "device").write_text("0x2330\n")
    proc_root = root / "proc"
    proc_root.mkdir()
    if loaded:
        (proc_root / "driver/nvidia").mkdir(parents=True)
        (proc_root / "driver/nvidia/version").write_text(
            f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {loaded}  Thu Jun 27 2024\n"
        )
    return {
        "nvidia_driver_sysfs_root": str(root / "sys"),
        "nvidia_driver_procfs_root": str(proc_root),
    }


# Package names are swapped for one every Debian host has, so check mode can look them up
# here. Extra vars: the role's include_vars (vars/Debian.yml) would override host vars.
STAND_IN = ["bash"]
STAND_INS = {
    "nvidia_driver_configure_repositories": False,
    "nvidia_driver_os_packages": {"open": STAND_IN, "proprietary": STAND_IN},
    "nvidia_driver_os_prerequisites": STAND_IN,
    "nvidia_driver_os_fabricmanager_packages": STAND_IN,
    "nvidia_driver_os_container_toolkit_packages": STAND_IN,
    "gpu_health_fail_on_findings": False,
}

# The hosts of one check-mode run of gpu.yml, each with an H100 on its (recorded) bus and no
# driver loaded: (GPU count, the plan's NVSwitch, fabric manager expected, scheduler). None of
# them changes a running driver, so the rollout play has no host.
INSTALL_PATH = {
    "hgx-8-gpu": (8, None, True, "kubernetes"),
    "hgx-4-gpu": (4, None, False, "kubernetes"),
    "no-nvswitch-in-plan": (8, False, False, "kubernetes"),
    "first-install": (4, None, False, "slurm"),
}


@dataclass(frozen=True)
class GpuRun:
    """One ansible-playbook run of gpu.yml over several hosts: its exit code and output."""

    returncode: int
    out: str

    def recap(self, host: str) -> str:
        """The host's PLAY RECAP line."""
        lines = [line for line in self.out.splitlines() if line.startswith(f"{host} ")]
        assert lines, self.out
        return lines[-1]

    def shows(self, section: str, task: str, host: str) -> bool:
        """Whether the task's result in ``section`` names the host."""
        result = task_result(section, task)
        included = [  # "included: /path/file.yml for host1, host2"
            line.split(" for ", 1)[1].strip().split(", ")
            for line in result.splitlines()
            if line.startswith("included:") and " for " in line
        ]
        return f"[{host}]" in result or any(host in hosts for hosts in included)


@pytest.fixture(scope="module")
def install_path_run(tmp_path_factory: pytest.TempPathFactory) -> GpuRun:
    """gpu.yml in check mode, once, over every INSTALL_PATH host (plan vars from the
    inventory, as the cluster_plan inventory plugin gives them)."""
    if not Path("/usr/bin/apt-get").exists():
        pytest.skip("needs an apt host")
    tmp_path = tmp_path_factory.mktemp("gpu-install-path")
    host_vars = tmp_path / "inventory/host_vars"
    host_vars.mkdir(parents=True)
    for host, (count, nvswitch, _, scheduler) in INSTALL_PATH.items():
        plan = plan_vars("H100-SXM5-80GB", count, lab=False, nvswitch=nvswitch)
        plan["cluster_plan"]["scheduler"]["type"] = scheduler
        roots = gpu_on_the_bus(tmp_path / host)
        slurm = {"nvidia_driver_slurm_controller": ""} if scheduler == "slurm" else {}
        (host_vars / f"{host}.json").write_text(json.dumps(plan | roots | slurm))
    (tmp_path / "inventory/hosts").write_text("\n".join(INSTALL_PATH) + "\n")
    proc = run_gpu_playbook(
        tmp_path, STAND_INS, "--check", inventory=str(tmp_path / "inventory/hosts")
    )
    return GpuRun(proc.returncode, proc.stdout + proc.stderr)


def assert_host_succeeded(run: GpuRun, host: str) -> None:
    recap = run.recap(host)
    assert " unreachable=0 " in recap and " failed=0 " in recap, run.out
    assert run.returncode == 0, run.out


@pytest.mark.parametrize("host", [h for h in INSTALL_PATH if h != "first-install"])
def test_install_path_runs_in_check_mode_with_a_gpu_on_the_bus(
    install_path_run: GpuRun, host: str
) -> None:
    # A recorded sysfs tree with one H100 puts the role on its install path. The fabric
    # manager comes with NVSwitch boards only (8-GPU HGX), whatever the model.
    fabric_manager = INSTALL_PATH[host][2]
    run, out = install_path_run, install_path_run.out
    assert_host_succeeded(run, host)
    for task in (
        "Check whether the driver packages would change",
        "Install the chosen driver packages",
        "Install the fabric manager matched to the driver",
        "Install the NVIDIA container toolkit",
        "Hold the driver packages so routine upgrades leave them alone",
        "Decide whether a reboot is needed",
        "Drain the node before its driver changes",  # no driver loaded: skipped
    ):
        assert run.shows(out, task, host), (task, out)
    fabric = task_result(out, "Install the fabric manager matched to the driver")
    assert (f"skipping: [{host}]" not in fabric) is fabric_manager, fabric
    shown = [line for line in out.splitlines() if f'"msg": "{host}: 1 NVIDIA GPU(s)' in line]
    assert len(shown) == 1, out
    assert f"fabric manager {'yes' if fabric_manager else 'no'}" in shown[0], shown


@pytest.mark.skipif(not Path("/usr/bin/apt-get").exists(), reason="needs an apt host")
@pytest.mark.parametrize(
    "loaded", [None, "525.147.05"], ids=["first-install", "older-driver-in-use"]
)
def test_only_a_running_driver_that_changes_waits_for_the_batched_rollout(
    request: pytest.FixtureRequest, tmp_path: Path, loaded: str | None
) -> None:
    # gpu.yml sets every host up at once and leaves to the serial rollout play only a host
    # whose loaded module differs from the chosen one (drain, upgrade, reboot): a run where
    # no running driver changes (a first install, with the install-path hosts) never waits
    # for batches.
    if not loaded:
        run: GpuRun = request.getfixturevalue("install_path_run")
        assert_host_succeeded(run, "first-install")
        first, rollout = run.out.split("PLAY [NVIDIA driver rollout]", 1)
        rollout = rollout.split("PLAY [GPU health]", 1)[0]
        assert run.shows(first, "Install the chosen driver packages", "first-install"), first
        assert "skipping: no hosts matched" in rollout
        return
    extra = plan_vars("H100-SXM5-80GB", 4, lab=False)
    extra |= gpu_on_the_bus(tmp_path, loaded) | STAND_INS | {"nvidia_driver_slurm_controller": ""}
    proc = run_gpu_playbook(tmp_path, extra, "--check")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    first, rollout = out.split("PLAY [NVIDIA driver rollout]", 1)
    rollout = rollout.split("PLAY [GPU health]", 1)[0]
    assert "Stop here for this host" in first and "ok: [localhost]" in first
    assert "TASK [nvidia_driver : Drain the node before its driver changes]" not in first
    assert "TASK [nvidia_driver : Drain the node before its driver changes]" in rollout
    assert "included:" in task_result(rollout, "Drain the node before its driver changes")


def run_tool(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "ANSIBLE_HOME": str(REPO / ".ansible"),
    }
    return subprocess.run(
        [str(Path(sys.executable).parent / argv[0]), *argv[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_nvml_facts_documentation_parses_for_ansible_doc() -> None:
    result = run_tool("ansible-doc", "-M", "plugins/modules", "nvml_facts")
    assert result.returncode == 0, result.stderr
    assert "Reads every NVIDIA GPU through NVML" in result.stdout
