"""The software section: the catalog's version rule, which build each host gets, where a
prefix is seen, the checks at their edges, and the grammars the roles will write with."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_text import findings, replace_once

from cluster_plan.api import load_expanded
from cluster_plan.plan import software_catalog as catalog
from cluster_plan.plan.host_values import UnsafeValue, in_grammar
from cluster_plan.plan.software import host_mounts, host_software, on_mount
from cluster_plan.plan.validate import validate_text

ROOT = Path(__file__).resolve().parents[2]
PER_PLATFORM = (ROOT / "tests/plans/good/unusual-software-build-per-platform.yml").read_text()


@pytest.mark.parametrize(
    ("asked", "given", "matches"),
    [
        ("1.13", "1.13.1", True),
        ("1.13.1", "1.13.1", True),
        ("1", "1.13.1", True),
        ("1.1", "1.13.1", False),  # components, not characters
        ("1.13.2", "1.13.1", False),
        ("2.1", "1.13.1", False),
        ("1.13.1.0", "1.13.1", False),
        ("4.1+deb", "4.1.4", True),  # a local tag names no upstream version
    ],
)
def test_a_version_names_the_leading_components_of_what_the_source_gives(asked, given, matches):
    assert catalog.version_matches(asked, given) is matches


def test_cuda_wheels_are_recognised_as_pip_names_them():
    assert catalog.is_cuda_wheel("nvidia-nccl-cu12")
    assert catalog.is_cuda_wheel("NVIDIA_NCCL_CU12")
    assert catalog.is_cuda_wheel("nvidia.nccl.cu12")
    assert not catalog.is_cuda_wheel("torch")
    assert not catalog.is_cuda_wheel("nvidia-ml-py")


def test_each_platform_gets_its_build():
    result = validate_text(PER_PLATFORM)
    assert result.ok, result.findings
    got = host_software(result.plan, result.nodes)
    assert got["gpu01"]["pytorch"]["source"] == "pip"
    assert got["gpu01"]["pytorch"]["build"] == "cuda"
    assert got["gpu01"]["pytorch"]["prefix"] == "/opt/software/pytorch/2.5.1-cu121"
    assert got["cpu01"]["pytorch"] == {
        "version": "1.13",
        "source": "debian",
        "build": "cpu",
        "packages": ["python3-torch"],
        "prefix": None,
        "index_url": None,
        "module": "pytorch/1.13",
    }
    assert got["gpu02"]["mpi"] == got["cpu01"]["mpi"]
    assert got["head01"] == {} and got["stor01"] == {}


def test_the_lab_gives_the_training_pool_debian_torch_and_open_mpi():
    hosts = load_expanded(ROOT / "inventory/lab/cluster.yml")["hosts"]
    with_software = {name for name, host in hosts.items() if host["software"]}
    assert with_software == {name for name, host in hosts.items() if host["pool"] == "gpu"}
    gpu = hosts["gpu01"]["software"]
    assert {env: (b["source"], b["version"], b["module"]) for env, b in gpu.items()} == {
        "pytorch": ("debian", "1.13", "pytorch/1.13"),
        "mpi": ("debian", "4.1", "openmpi/4.1"),
    }


def test_mounts_follow_the_nfs_network_and_the_cephfs_client_roles():
    result = validate_text(PER_PLATFORM)
    nodes = {node.name: node for node in result.nodes}
    assert host_mounts(result.plan, nodes["gpu01"]) == ["/opt/software"]
    assert host_mounts(result.plan, nodes["head01"]) == []  # the server does not mount itself
    plan = dict(
        result.plan, storage={"ceph": {"cephfs": {"mount": "/shared", "clients": ["ceph_osd"]}}}
    )
    assert host_mounts(plan, nodes["stor01"]) == ["/shared"]
    assert host_mounts(plan, nodes["gpu01"]) == []


@pytest.mark.parametrize(
    ("path", "seen"),
    [
        ("/opt/software", True),
        ("/opt/software/pytorch", True),
        ("/opt/softwarex/pytorch", False),  # a sibling that starts with the same letters
        ("/opt", False),
    ],
)
def test_a_prefix_is_on_a_mount_only_at_or_below_it(path, seen):
    assert on_mount(path, ["/opt/software"]) is seen


def codes(text: str) -> set[str]:
    return {code for _, code, _ in findings(text)}


def test_a_cpu_pip_build_may_go_anywhere_its_prefix_is_seen():
    text = replace_once(
        PER_PLATFORM,
        ("        build: cuda\n", "        build: cpu\n"),
        ("packages: [torch, nvidia-nccl-cu12]", "packages: [torch]"),
        ("        classes: [training]\n", "        pools: [gpu]\n"),
        # a CPU build's wheels: PyTorch's CPU index and tag (a +cu121 tag is refused there)
        ('version: "2.5.1+cu121"', 'version: "2.5.1+cpu"'),
        ("whl/cu121", "whl/cpu"),
    )
    assert codes(text) == set()
    on_cpu = replace_once(PER_PLATFORM, ("        classes: [training]\n", "        pools: [cpu]\n"))
    assert "software-cuda-without-gpu" in codes(on_cpu)


def test_a_refused_string_is_reported_once_by_the_schema():
    text = replace_once(
        PER_PLATFORM, ('version: "1.13", source: debian', 'version: "1.13 x", source: debian')
    )
    got = findings(text)
    assert [code for _, code, _ in got] == ["format"]


@pytest.mark.parametrize(
    ("value", "grammar"),
    [
        ("openmpi/4.1\nprepend_path('PATH', '/tmp')", "lmod_module"),
        ("pytorch", "lmod_module"),
        ("torch==2.5.1", "package_name"),
        ("--index-url=http://evil", "package_name"),
        ("2.5.1; rm -rf /", "software_version"),
        ("latest", "software_version"),
    ],
)
def test_the_roles_second_check_refuses_what_the_schema_refuses(value, grammar):
    with pytest.raises(UnsafeValue):
        in_grammar(value, grammar)


def test_the_roles_second_check_passes_the_plans_values():
    assert in_grammar("pytorch/2.5.1", "lmod_module") == "pytorch/2.5.1"
    assert in_grammar("nvidia-nccl-cu12", "package_name") == "nvidia-nccl-cu12"
    assert in_grammar("2.5.1+cu121", "software_version") == "2.5.1+cu121"
