"""The offline bundle's artifact list: what each pinned release needs, what kubeadm will ask
for, and the pins against Kubernetes' own sources where this machine has them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cluster_plan.kubernetes.bundle.artifacts import (
    KUBERNETES_COMMANDS,
    bundle_spec,
    kubeadm_pins,
    pin_problems,
)
from cluster_plan.kubernetes.bundle.project import (
    BundleNeeds,
    TrainingBuild,
    source_digest,
    source_files,
    training_tag,
)
from cluster_plan.kubernetes.versions import (
    BUNDLE_RELEASES,
    UnsupportedVersion,
    bundle_release,
    release,
)

NODE_BINARIES = ("containerd", "containerd-shim-runc-v2", "ctr", "runc")
CNI = ("ptp", "bridge", "loopback", "host-local", "portmap")
# `kubeadm config images list --kubernetes-version v1.36.3` of the kubeadm the bundle builds
KUBEADM_1_36_3_IMAGES = [
    "registry.k8s.io/kube-apiserver:v1.36.3",
    "registry.k8s.io/kube-controller-manager:v1.36.3",
    "registry.k8s.io/kube-scheduler:v1.36.3",
    "registry.k8s.io/kube-proxy:v1.36.3",
    "registry.k8s.io/coredns/coredns:v1.14.2",
    "registry.k8s.io/pause:3.10.2",
    "registry.k8s.io/etcd:3.6.8-0",
]
# ... and with --image-repository mirror.example:5000/k8s
KUBEADM_1_36_3_MIRROR = [
    "mirror.example:5000/k8s/kube-apiserver:v1.36.3",
    "mirror.example:5000/k8s/kube-controller-manager:v1.36.3",
    "mirror.example:5000/k8s/kube-scheduler:v1.36.3",
    "mirror.example:5000/k8s/kube-proxy:v1.36.3",
    "mirror.example:5000/k8s/coredns:v1.14.2",
    "mirror.example:5000/k8s/pause:3.10.2",
    "mirror.example:5000/k8s/etcd:3.6.8-0",
]


@pytest.mark.parametrize("minor", sorted(BUNDLE_RELEASES))
def test_every_release_lists_the_binaries_a_node_and_a_control_plane_run(minor: str) -> None:
    spec = bundle_spec(minor)
    names = [b.name for b in spec.binaries]
    assert len(names) == len(set(names))
    expected = {*KUBERNETES_COMMANDS, "etcd", "etcdctl", "etcdutl", *NODE_BINARIES, *CNI}
    assert set(names) == expected | {"coredns", "pause"}
    kubernetes = f"v{spec.kubernetes}"
    for command in KUBERNETES_COMMANDS:
        binary = spec.binary(command)
        assert (binary.version, binary.source) == (kubernetes, f"k8s.io/kubernetes@{kubernetes}")
        assert binary.path == f"bin/{command}"
    assert {spec.binary(p).path for p in CNI} == {f"cni/bin/{p}" for p in CNI}
    assert spec.binary("etcd").source == f"go.etcd.io/etcd/server/v3@v{spec.release.etcd}"
    assert spec.binary("coredns").version == spec.release.coredns
    assert spec.binary("pause").source.endswith("/build/pause/linux/pause.c")


@pytest.mark.parametrize("minor", sorted(BUNDLE_RELEASES))
def test_the_images_are_the_ones_kubeadm_of_the_release_lists(minor: str) -> None:
    spec = bundle_spec(minor)
    pinned = BUNDLE_RELEASES[minor]
    version = f"v{pinned.kubernetes}"
    references = [i.reference for i in spec.images]
    assert references == [
        f"registry.k8s.io/kube-apiserver:{version}",
        f"registry.k8s.io/kube-controller-manager:{version}",
        f"registry.k8s.io/kube-scheduler:{version}",
        f"registry.k8s.io/kube-proxy:{version}",
        f"registry.k8s.io/coredns/coredns:{pinned.coredns}",
        f"registry.k8s.io/pause:{pinned.pause}",
        f"registry.k8s.io/etcd:{pinned.etcd_image_tag}",
    ]
    # every binary an image carries is one the bundle builds
    for image in spec.images:
        for path, binary in image.files:
            assert spec.binary(binary)
            assert not path.startswith("/")


def test_1_36_is_1_36_3_and_its_images_are_kubeadms_own_list() -> None:
    spec = bundle_spec("1.36")
    assert spec.kubernetes == "1.36.3"
    assert [i.reference for i in spec.images] == KUBEADM_1_36_3_IMAGES
    repository = "mirror.example:5000/k8s/"
    assert [i.mirror_reference(repository) for i in spec.images] == KUBEADM_1_36_3_MIRROR


def test_the_images_run_what_upstreams_run() -> None:
    spec = bundle_spec("1.36")
    # kubeadm's CoreDNS Deployment gives only args: the entrypoint must be the binary
    assert spec.image("coredns").entrypoint == ("/coredns",)
    assert spec.image("pause").entrypoint == ("/pause",)
    assert spec.image("pause").user == "65535:65535"
    assert spec.image("kube-apiserver").files == (
        ("usr/local/bin/kube-apiserver", "kube-apiserver"),
    )
    proxy = spec.image("kube-proxy")
    assert "/usr/sbin/nft" in proxy.host_files
    assert {link for link, _ in proxy.links} >= {"usr/sbin/iptables-restore", "usr/sbin/iptables"}
    assert {target for _, target in proxy.links} == {"xtables-nft-multi"}


def test_the_plan_version_picks_the_pinned_patch_and_nothing_else() -> None:
    assert bundle_release("1.36") == bundle_release("1.36.3") == BUNDLE_RELEASES["1.36"]
    with pytest.raises(UnsupportedVersion, match=r"builds Kubernetes 1\.36\.3 for 1\.36"):
        bundle_release("1.36.1")
    with pytest.raises(UnsupportedVersion, match=r"no Kubernetes 1\.34"):
        bundle_release("1.34")
    with pytest.raises(UnsupportedVersion, match="not a Kubernetes version"):
        bundle_release("latest")


@pytest.mark.parametrize("minor", sorted(BUNDLE_RELEASES))
def test_the_renderers_sandbox_image_is_the_bundles_pause(minor: str) -> None:
    """containerd's sandbox image and kubeadm's pause must be one image, or an air-gapped
    node tries to pull the other from the internet."""
    assert release(minor).pause_image == bundle_spec(minor).image("pause").reference


CONSTANTS = """
const (
	// DefaultEtcdVersion indicates the default etcd version that kubeadm uses
	DefaultEtcdVersion = "3.6.8-0"
	CoreDNSVersion = "v1.14.2"
	PauseVersion = "3.10.2"
)
"""


def test_kubeadm_pins_are_read_from_its_constants_and_compared() -> None:
    pins = kubeadm_pins(CONSTANTS, "TAG ?= 3.10.2\nREV = x\n")
    assert pins == {
        "etcd_image_tag": "3.6.8-0",
        "coredns": "v1.14.2",
        "pause": "3.10.2",
        "pause_source": "3.10.2",
    }
    assert pin_problems(BUNDLE_RELEASES["1.36"], pins) == []
    stale = kubeadm_pins(CONSTANTS.replace("3.6.8-0", "3.6.9-0"), "TAG ?= 3.10.1\n")
    problems = pin_problems(BUNDLE_RELEASES["1.36"], stale)
    assert problems == [
        "etcd_image_tag: pinned 3.6.8-0, Kubernetes 1.36.3's sources say 3.6.9-0",
        "pause_source: pinned 3.10.2, Kubernetes 1.36.3's sources say 3.10.1",
    ]
    assert kubeadm_pins("", "")["coredns"] == "(not found)"


def _module_caches() -> list[Path]:
    roots = [Path(os.environ.get("CLUSTER_PLAN_CACHE", "/var/cache/cluster-plan")) / "go/mod"]
    if os.environ.get("GOMODCACHE"):
        roots.append(Path(os.environ["GOMODCACHE"]))
    roots.append(Path.home() / "go/pkg/mod")
    return roots


@pytest.mark.parametrize("minor", sorted(BUNDLE_RELEASES))
def test_the_pins_match_the_kubernetes_sources_where_this_machine_has_them(minor: str) -> None:
    pinned = BUNDLE_RELEASES[minor]
    for root in _module_caches():
        source = root / f"k8s.io/kubernetes@v{pinned.kubernetes}"
        if source.is_dir():
            break
    else:
        pytest.skip(f"k8s.io/kubernetes@v{pinned.kubernetes} is in no Go module cache here")
    pins = kubeadm_pins(
        (source / "cmd/kubeadm/app/constants/constants.go").read_text(),
        (source / "build/pause/Makefile").read_text(),
    )
    assert pin_problems(pinned, pins) == []


def test_the_recipe_changes_with_every_pin() -> None:
    base = bundle_spec("1.36").recipe()
    assert base != bundle_spec("1.37").recipe()
    assert base == bundle_spec("1.36.3").recipe()
    assert base["go"]["runc"]["static"] is True
    assert base["go"]["containerd"]["tags"] == ["no_btrfs", "urfave_cli_no_docs"]
    kubernetes = base["go"]["kubernetes"]["ldflags"]
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in kubernetes
    assert "-X k8s.io/client-go/pkg/version.gitMinor=36" in kubernetes
    assert "-X k8s.io/component-base/version.buildDate={source_date}" in kubernetes


def test_a_plan_needing_the_device_plugin_gets_it_and_its_image() -> None:
    base = bundle_spec("1.36")
    spec = bundle_spec("1.36", BundleNeeds(device_plugin=True))
    added = {b.name for b in spec.binaries} - {b.name for b in base.binaries}
    assert added == {"cluster-plan-device-plugin"}
    (image,) = [i for i in spec.images if i.name not in {j.name for j in base.images}]
    build = spec.local_builds[0]
    assert image.files == (("usr/local/bin/cluster-plan-device-plugin", build.binary),)
    assert image.reference == f"cluster-plan.local/cluster-plan-device-plugin:{build.version}"
    assert not image.kubeadm  # kubeadm's list is checked against the others alone
    # its version is its sources' digest: a changed source is a new tag and a new key
    assert build.version == f"v0.1.0-{source_digest()[:12]}"
    assert spec.recipe()["local"]["device-plugin"]["digest"] == source_digest()
    # a plan without needs keeps the key it had before them
    assert base.recipe() == bundle_spec("1.36", BundleNeeds()).recipe()
    assert "local" not in base.recipe()


def test_the_plugins_sources_are_package_data_and_its_tests_no_part_of_its_tag() -> None:
    files = source_files()
    assert {"main.go", "plugin.go", "devices.go", "config.go", "go.mod", "go.sum"} <= set(files)
    assert not any(name.endswith("_test.go") for name in files)
    assert b"module cluster-plan.local/device-plugin" in files["go.mod"]


def test_a_plan_whose_job_runs_the_bundles_image_gets_the_training_image() -> None:
    build = TrainingBuild("1.13", ("python3-torch",))
    spec = bundle_spec("1.36", BundleNeeds(training=build))
    image = spec.image("cluster-plan-training")
    assert image.reference == f"cluster-plan.local/cluster-plan-training:{training_tag(build)}"
    assert image.tag.startswith("1.13-") and not image.kubeadm
    assert image.rootfs is not None and image.rootfs.packages == ("python3-torch",)
    recipe = spec.recipe()["images"]["cluster-plan-training"]
    assert recipe["rootfs"]["packages"] == ["python3-torch"]
    assert recipe["program"][0] == "/usr/local/lib/cluster-plan/cluster-plan-collectives.pyz"
    # another package list is another tree, tag and key; the other images' recipes stay
    other = bundle_spec("1.36", BundleNeeds(training=TrainingBuild("1.13", ("python3-torch", "x"))))
    assert other.image("cluster-plan-training").tag != image.tag
    assert other.recipe() != spec.recipe()
    base = bundle_spec("1.36").recipe()["images"]
    assert {k: v for k, v in spec.recipe()["images"].items() if k in base} == base
