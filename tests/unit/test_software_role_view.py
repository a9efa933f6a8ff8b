"""What the software role installs on a host, from its builds (cluster_plan.software.role_view):
the lab plan's training nodes, a plan with a pip build, and the hosts of a Kubernetes plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cluster_plan.api import load_expanded
from cluster_plan.software.role_view import (
    software_host_builds,
    software_in_image,
    software_modules,
    software_packages,
    software_pip_builds,
    software_pip_installs,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lab_hosts() -> dict[str, Any]:
    hosts: dict[str, Any] = load_expanded(str(ROOT / "inventory" / "lab" / "cluster.yml"))["hosts"]
    return hosts


def test_training_nodes_get_torch_and_open_mpi_in_one_sorted_list(
    lab_hosts: dict[str, Any],
) -> None:
    packages = software_packages(lab_hosts["gpu01"]["software"])
    assert packages == sorted(
        ["python3-torch", "openmpi-bin", "libopenmpi-dev", "python3-mpi4py", "libpmix2"]
    )
    assert software_pip_builds(lab_hosts["gpu01"]["software"]) == []


@pytest.mark.parametrize("host", ["head01", "cpu01", "infer01", "stor01"])
def test_hosts_outside_the_training_pool_get_nothing(lab_hosts: dict[str, Any], host: str) -> None:
    assert software_packages(lab_hosts[host]["software"]) == []
    assert software_modules(lab_hosts[host]["software"], "/m") == []


def test_one_modulefile_per_build_with_a_module(lab_hosts: dict[str, Any]) -> None:
    modules = software_modules(lab_hosts["gpu01"]["software"], "/etc/cluster-plan/modulefiles")
    by_env = {m["environment"]: m for m in modules}
    assert set(by_env) == {"mpi", "pytorch"}
    torch = by_env["pytorch"]
    assert torch["path"] == "/etc/cluster-plan/modulefiles/pytorch/1.13.lua"
    assert (torch["name"], torch["version"], torch["build_version"]) == ("pytorch", "1.13", "1.13")
    assert torch["bin"] is None  # Debian's torch is on the system's PATH
    assert by_env["mpi"]["module"] == "openmpi/4.1"


def test_a_pip_build_puts_its_prefix_first_on_path_and_is_reported() -> None:
    envs = {
        "pytorch": {
            "version": "2.5.1+cu121",
            "source": "pip",
            "build": "cuda",
            "packages": ["torch", "nvidia-nccl-cu12"],
            "prefix": "/shared/sw/pytorch/2.5.1",
            "index_url": "https://download.pytorch.org/whl/cu121",
            "module": "pytorch/2.5.1",
        },
        "mpi": {"version": "4.1", "source": "debian", "packages": ["openmpi-bin"], "module": None},
    }
    assert software_packages(envs) == ["openmpi-bin"]  # pip projects are not apt packages
    assert software_pip_builds(envs) == ["pytorch 2.5.1+cu121"]
    (module,) = software_modules(envs, "/m")
    assert module["bin"] == "/shared/sw/pytorch/2.5.1/bin"
    assert module["path"] == "/m/pytorch/2.5.1.lua"


def test_a_host_without_software_gets_nothing() -> None:
    assert software_packages(None) == []
    assert software_modules({}, "/m") == []


def test_each_shared_prefix_is_installed_once_by_the_first_host_that_gets_it() -> None:
    build = {
        "version": "2.5.1+cu121",
        "source": "pip",
        "build": "cuda",
        "packages": ["torch", "nvidia-nccl-cu12"],
        "prefix": "/shared/sw/torch",
        "index_url": "https://download.pytorch.org/whl/cu121",
        "module": "pytorch/2.5.1",
    }
    debian = {"version": "4.1", "source": "debian", "packages": ["openmpi-bin"]}
    play = {
        "head01": {"plan_host": {"software": {}}},
        "gpu01": {"plan_host": {"software": {"pytorch": build, "mpi": debian}}},
        # host vars (or -e) outrank the plan, as they do for the role's own variable
        "gpu02": {"plan_host": {"software": {}}, "software_environments": {"pytorch": build}},
    }
    (install,) = software_pip_installs(play, "gpu01")
    assert install == {
        "environment": "pytorch",
        "version": "2.5.1+cu121",
        "packages": ["torch", "nvidia-nccl-cu12"],
        "prefix": "/shared/sw/torch",
        "index_url": "https://download.pytorch.org/whl/cu121",
    }
    assert software_pip_installs(play, "gpu02") == []  # gpu01 installs the shared prefix
    assert software_pip_installs(play, "head01") == []
    other = {**build, "prefix": "/shared/sw/torch-2"}
    play["gpu02"]["software_environments"] = {"pytorch": other}
    assert [i["prefix"] for i in software_pip_installs(play, "gpu02")] == ["/shared/sw/torch-2"]


KUBERNETES = {"type": "kubernetes", "kubernetes": {"version": "1.36"}}


def test_a_kubernetes_plan_s_hosts_get_none_of_their_builds(lab_hosts: dict[str, Any]) -> None:
    """The pods run the training image, which the section describes: the role's view of a
    training node with Debian's torch is empty, while the plan keeps the build."""
    gpu01 = lab_hosts["gpu01"]
    assert "python3-torch" in gpu01["software"]["pytorch"]["packages"]
    builds = software_host_builds(gpu01, KUBERNETES)
    assert builds == {}
    assert software_packages(builds) == []
    assert software_modules(builds, "/m") == []
    assert software_pip_builds(builds) == []
    assert software_in_image(KUBERNETES)


@pytest.mark.parametrize("scheduler", [{"type": "slurm"}, None])
def test_a_slurm_plan_s_hosts_get_their_builds(
    lab_hosts: dict[str, Any], scheduler: dict[str, Any] | None
) -> None:
    assert software_host_builds(lab_hosts["gpu01"], scheduler) == lab_hosts["gpu01"]["software"]
    assert software_host_builds(lab_hosts["head01"], scheduler) == {}
    assert not software_in_image(scheduler)


def test_no_host_of_a_kubernetes_plan_installs_a_pip_build() -> None:
    build = {
        "version": "2.5.1+cu121",
        "source": "pip",
        "packages": ["torch"],
        "prefix": "/shared/sw/torch",
        "index_url": None,
    }
    host = {"plan_host": {"software": {"pytorch": build}}}
    assert [i["prefix"] for i in software_pip_installs({"gpu01": host}, "gpu01")] == [
        "/shared/sw/torch"
    ]
    on_kubernetes = {**host, "cluster_plan": {"scheduler": KUBERNETES}}
    assert software_pip_installs({"gpu01": on_kubernetes}, "gpu01") == []
    # host vars (or -e) still outrank the plan, as for the role's own variable
    chosen = {**on_kubernetes, "software_environments": {"pytorch": build}}
    assert len(software_pip_installs({"gpu01": chosen}, "gpu01")) == 1
