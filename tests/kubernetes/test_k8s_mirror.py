"""The plan's mirror of the offline bundle and the host-routes pod network, offline: what
`validate` refuses, what kubeadm and containerd are told, the registry's storage the
k8s_registry_images module writes, the routes between the nodes' pod ranges, and the lab's
relaxations, which only a lab plan gets (docs/kubernetes.md, "Installing from the plan's
mirror"; docs/lab.md, "Kubernetes in the lab")."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_plans import PLANS, expanded_plan

from cluster_plan.kubernetes import files, render
from cluster_plan.kubernetes.bundle import built_bundle, bundle_spec, oci
from cluster_plan.kubernetes.cluster import refusals
from cluster_plan.kubernetes.cni import host_routes, host_routes_conflist
from cluster_plan.kubernetes.mirror import plan_mirror, registry_repositories
from cluster_plan.kubernetes.role_view import (
    kubernetes_mirror_files,
    kubernetes_mirror_images,
    kubernetes_rendering,
    kubernetes_runtime,
)
from cluster_plan.kubernetes.versions import release
from cluster_plan.lab import kubernetes as lab

ROOT = Path(__file__).resolve().parents[2]
MODULE = ROOT / "plugins" / "modules" / "k8s_registry_images.py"


def codes(expanded: dict[str, Any]) -> list[tuple[str, str]]:
    return [(f.code, ".".join(map(str, f.path))) for f in refusals(expanded)]


def lab_plan() -> dict[str, Any]:
    return expanded_plan("lab-k8s")


# --- validate ------------------------------------------------------------------------------


def test_the_lab_plan_has_a_mirror_and_host_routes_and_no_finding():
    expanded = lab_plan()
    k8s = expanded["scheduler"]["kubernetes"]
    assert (k8s["cni"], k8s["mirror"]) == (
        "host-routes",
        {"host": "cp01", "registry_port": 5000, "files_port": 8080},
    )
    assert codes(expanded) == []


def test_a_mirror_host_off_the_node_network_is_refused():
    expanded = lab_plan()
    del expanded["hosts"]["cp01"]["interfaces"]["compute"]
    assert ("node-off-network", "scheduler.kubernetes.mirror.host") in codes(expanded)


def test_a_mirror_needs_two_ports():
    expanded = lab_plan()
    expanded["scheduler"]["kubernetes"]["mirror"]["files_port"] = 5000
    assert codes(expanded) == [("mirror-port", "scheduler.kubernetes.mirror.files_port")]


def test_a_mirror_off_the_nodes_may_take_ports_kubernetes_uses_on_nodes():
    expanded = lab_plan()
    expanded["hosts"]["cp01"]["roles"] = ["ntp_server"]  # the mirror, no longer a node
    expanded["hosts"]["gpu01"]["roles"] = ["k8s_control_plane"]
    expanded["scheduler"]["kubernetes"]["mirror"]["registry_port"] = 10250
    assert [c for c in codes(expanded) if c[0] == "mirror-port"] == []


@pytest.mark.parametrize("version", ["1.34", "1.35"])
def test_a_mirror_needs_a_version_the_bundle_builds(version):
    expanded = lab_plan()
    expanded["scheduler"]["kubernetes"]["version"] = version
    assert codes(expanded) == [("unsupported-version", "scheduler.kubernetes.version")]
    expanded["scheduler"]["kubernetes"]["mirror"] = None
    assert codes(expanded) == []  # installed from upstream, any supported version


# --- what kubeadm and containerd are told --------------------------------------------------


def test_kubeadm_pulls_every_image_from_the_mirror_at_the_bundles_tags():
    rendering = render(lab_plan())
    cluster = next(d for d in rendering.kubeadm["cp01"] if d["kind"] == "ClusterConfiguration")
    spec = bundle_spec("1.36")
    assert cluster["kubernetesVersion"] == f"v{spec.kubernetes}"
    assert cluster["imageRepository"] == "10.45.0.1:5000"  # cp01 on compute
    assert cluster["etcd"]["local"]["imageTag"] == spec.release.etcd_image_tag
    assert cluster["dns"] == {"imageTag": spec.release.coredns}


def test_without_a_mirror_kubeadm_and_containerd_keep_upstream():
    expanded = lab_plan()
    expanded["scheduler"]["kubernetes"].update(mirror=None, cni="calico")
    rendering = render(expanded)
    cluster = next(d for d in rendering.kubeadm["cp01"] if d["kind"] == "ClusterConfiguration")
    assert "imageRepository" not in cluster and "dns" not in cluster
    hosts = expanded.pop("hosts")
    runtime = kubernetes_runtime(expanded, hosts)
    assert runtime["mirror"] is None and runtime["registry_hosts"] == {}
    assert runtime["sandbox_image"] == "registry.k8s.io/pause:3.10.2" == release("1.36").pause_image


def test_containerd_sends_every_registry_to_the_mirror_and_runs_its_pause():
    expanded = lab_plan()
    hosts = expanded.pop("hosts")
    runtime = kubernetes_runtime(expanded, hosts)
    assert runtime["problems"] == ""
    assert runtime["sandbox_image"] == "10.45.0.1:5000/pause:3.10.2"
    assert set(runtime["registry_hosts"]) == {"10.45.0.1:5000", "registry.k8s.io", "_default"}
    for text in runtime["registry_hosts"].values():
        assert yaml.safe_load(text.replace(" = ", ": ")) == {"server": "http://10.45.0.1:5000"}


def test_the_mirror_serves_each_image_under_kubeadms_path_and_upstreams():
    spec = bundle_spec("1.36")
    coredns = next(i for i in spec.images if i.name == "coredns")
    artifact = {"reference": coredns.reference, "mirror_path": f"coredns:{spec.release.coredns}"}
    assert registry_repositories(artifact) == [
        {"repository": "coredns", "tag": spec.release.coredns},
        {"repository": "coredns/coredns", "tag": spec.release.coredns},
    ]
    pause = {"reference": "registry.k8s.io/pause:3.10.2", "mirror_path": "pause:3.10.2"}
    assert registry_repositories(pause) == [{"repository": "pause", "tag": "3.10.2"}]


def test_kubeadm_of_the_bundle_asks_the_mirror_for_exactly_the_bundles_images(tmp_path):
    bundle = built_bundle("1.36")
    if bundle is None:
        pytest.skip("the 1.36 bundle is not built on this machine (cluster-plan k8s bundle)")
    text = files(render(lab_plan()))["kubeadm/cp01.yaml"]
    (tmp_path / "kubeadm.yaml").write_text(text)
    listed = subprocess.run(
        [str(bundle.binary("kubeadm")), "config", "images", "list", "--config",
         str(tmp_path / "kubeadm.yaml")],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout.split()  # fmt: skip
    mirror = plan_mirror(render(lab_plan()).plan)
    assert mirror is not None
    images = [a for a in bundle.manifest["artifacts"] if a["kind"] == "image"]
    assert sorted(listed) == sorted(f"{mirror.registry}/{a['mirror_path']}" for a in images)


def test_the_nodes_install_every_node_binary_of_the_bundle_from_the_mirror():
    spec = bundle_spec("1.36")
    manifest = {
        "artifacts": [
            {"name": b.name, "kind": "binary", "path": b.path, "sha256": "0" * 64}
            for b in spec.binaries
        ]
    }
    wanted = kubernetes_mirror_files(manifest)
    assert {f["name"] for f in wanted} == {
        "containerd", "containerd-shim-runc-v2", "ctr", "runc", "kubeadm", "kubelet",
        "kubectl", "ptp", "host-local", "loopback", "portmap", "bridge",
    }  # fmt: skip
    assert {f["dest"] for f in kubernetes_mirror_files(manifest, "cni")} == {
        f"/opt/cni/bin/{p}" for p in ("ptp", "host-local", "loopback", "portmap", "bridge")
    }


# --- the registry's storage ----------------------------------------------------------------


def registry_module() -> Any:
    loader = importlib.util.spec_from_file_location("k8s_registry_images", MODULE)
    assert loader and loader.loader
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, str]:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "pause").write_bytes(b"\x7fELF pause")
    directory = tmp_path / "pause"
    written = oci.write_layout(
        directory,
        [oci.Entry("pause", "file", 0o755, source=tmp_path / "src" / "pause")],
        oci.ImageConfig(entrypoint=("/pause",), env=()),
        reference="registry.k8s.io/pause:3.10.2",
        tag="3.10.2",
        epoch=0,
    )
    return directory, written.manifest_digest


def test_the_registry_storage_serves_the_layout_under_each_place(tmp_path, layout):
    module = registry_module()
    directory, digest = layout
    image = {
        "layout": str(directory),
        "digest": digest,
        "places": [{"repository": "pause", "tag": "3.10.2"}, {"repository": "x/pause", "tag": "1"}],
    }
    storage = module.Storage(str(tmp_path / "registry"), check_mode=False)
    module.serve(storage, image)
    base = tmp_path / "registry" / "docker" / "registry" / "v2"
    hexa = digest.split(":")[1]
    manifest = json.loads((directory / "blobs" / "sha256" / hexa).read_bytes())
    for place, tag in (("pause", "3.10.2"), ("x/pause", "1")):
        tags = base / "repositories" / place / "_manifests" / "tags" / tag
        assert (tags / "current" / "link").read_text() == digest
        assert (tags / "index" / "sha256" / hexa / "link").read_text() == digest
        revision = base / "repositories" / place / "_manifests" / "revisions" / "sha256" / hexa
        assert (revision / "link").read_text() == digest
        for blob in [manifest["config"], *manifest["layers"]]:
            link = base / "repositories" / place / "_layers" / "sha256"
            assert (link / blob["digest"].split(":")[1] / "link").read_text() == blob["digest"]
    for blob in [digest, manifest["config"]["digest"], manifest["layers"][0]["digest"]]:
        hexa = blob.split(":")[1]
        data = (base / "blobs" / "sha256" / hexa[:2] / hexa / "data").read_bytes()
        assert hashlib.sha256(data).hexdigest() == hexa
    # the same images again: nothing to write; check mode writes nothing either
    again = module.Storage(str(tmp_path / "registry"), check_mode=False)
    module.serve(again, image)
    assert again.written == []
    dry = module.Storage(str(tmp_path / "dry"), check_mode=True)
    module.serve(dry, image)
    assert dry.written and not (tmp_path / "dry").exists()


def test_the_registry_storage_refuses_a_layout_that_is_not_the_digest(tmp_path, layout):
    module = registry_module()
    directory, digest = layout
    storage = module.Storage(str(tmp_path / "registry"), check_mode=False)
    wrong = "sha256:" + "0" * 64
    with pytest.raises(module.LayoutError, match="does not name"):
        module.serve(storage, {"layout": str(directory), "digest": wrong, "places": []})
    hexa = digest.split(":")[1]
    (directory / "blobs" / "sha256" / hexa).write_bytes(b"{}")
    with pytest.raises(module.LayoutError, match="do not hash"):
        module.serve(storage, {"layout": str(directory), "digest": digest, "places": []})
    assert storage.written == []


def test_every_image_of_the_manifest_goes_to_the_registry_with_its_digest():
    manifest = {
        "artifacts": [
            {"name": "pause", "kind": "image", "path": "images/pause", "sha256": "a" * 64,
             "reference": "registry.k8s.io/pause:3.10.2", "mirror_path": "pause:3.10.2"},
            {"name": "kubelet", "kind": "binary", "path": "bin/kubelet", "sha256": "b" * 64},
        ]
    }  # fmt: skip
    assert kubernetes_mirror_images(manifest, "/srv/m/images/b") == [
        {
            "name": "pause",
            "path": "images/pause",
            "layout": "/srv/m/images/b/pause",
            "digest": "sha256:" + "a" * 64,
            "places": [{"repository": "pause", "tag": "3.10.2"}],
        }
    ]


# --- host routes ---------------------------------------------------------------------------


def node(name: str, address: str | None, cidr: str | None) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"podCIDR": cidr} if cidr else {},
        "status": {"addresses": [{"type": "InternalIP", "address": address}] if address else []},
    }


def test_each_node_routes_the_other_nodes_pod_ranges_via_their_addresses():
    nodes = {
        "items": [
            node("cp01", "10.45.0.1", "10.244.0.0/24"),
            node("gpu01", "10.45.0.2", "10.244.2.0/24"),
            node("cpu01", "10.45.0.4", "10.244.1.0/24"),
        ]
    }
    mine = host_routes(nodes, "gpu01")
    assert mine == {
        "pod_cidr": "10.244.2.0/24",
        "routes": [
            {"node": "cp01", "dst": "10.244.0.0/24", "via": "10.45.0.1"},
            {"node": "cpu01", "dst": "10.244.1.0/24", "via": "10.45.0.4"},
        ],
        "missing": [],
    }
    conflist = host_routes_conflist(mine["pod_cidr"], 9000)
    ptp = conflist["plugins"][0]
    assert (ptp["type"], ptp["mtu"], ptp["ipMasq"]) == ("ptp", 9000, False)
    assert ptp["ipam"]["ranges"] == [[{"subnet": "10.244.2.0/24"}]]


def test_a_node_without_a_range_or_address_yet_is_named_missing():
    nodes = {"items": [node("cp01", "10.45.0.1", "10.244.0.0/24"), node("w", "10.45.0.9", None),
                       node("v", None, "10.244.3.0/24")]}  # fmt: skip
    assert host_routes(nodes, "cp01")["missing"] == ["v", "w"]
    assert host_routes(nodes, "w")["pod_cidr"] is None


# --- the lab's relaxations: lab plans only -------------------------------------------------


def relaxations_in(expanded: dict[str, Any]) -> list[str]:
    """Each of the lab's settings found in the plan's rendering and containerd's settings."""
    rendering = render(expanded)
    documents = [d for docs in rendering.kubeadm.values() for d in docs]
    found = []
    for document in documents:
        if document["kind"] == "KubeletConfiguration":
            found += [
                k for k, v in lab.KUBELET.items() if k != "evictionHard" and document.get(k) == v
            ]
            eviction = document.get("evictionHard", {})
            found += [k for k, v in lab.KUBELET["evictionHard"].items() if eviction.get(k) == v]
        if document["kind"] == "KubeProxyConfiguration":
            found.append("kube-proxy conntrack")
        ignored = (document.get("nodeRegistration") or {}).get("ignorePreflightErrors") or []
        found += [p for p in lab.PREFLIGHT_IGNORED if p in ignored]
    hosts = expanded.pop("hosts")
    if kubernetes_runtime(expanded, hosts)["restrict_oom_score_adj"]:
        found.append("restrict_oom_score_adj")
    expanded["hosts"] = hosts
    rendered = kubernetes_rendering(expanded, hosts, expanded["groups"])
    if rendered["lab"]:
        found.append("lab")
    return sorted(set(found))


ALL_RELAXATIONS = sorted(
    {*(k for k in lab.KUBELET if k != "evictionHard"), *lab.KUBELET["evictionHard"],
     "kube-proxy conntrack", *lab.PREFLIGHT_IGNORED, "restrict_oom_score_adj", "lab"}
)  # fmt: skip


@pytest.mark.parametrize("name", [n for n in PLANS if n.startswith("k8s-")])
def test_no_example_plan_gets_the_labs_relaxations(name):
    expanded = expanded_plan(name)
    assert expanded["lab"] is None
    assert relaxations_in(expanded) == []


def test_the_lab_plan_gets_every_one_and_a_lab_section_is_what_decides():
    assert relaxations_in(lab_plan()) == ALL_RELAXATIONS
    example = copy.deepcopy(expanded_plan("k8s-inference"))
    example["lab"] = {"rate_scale": 0.01}  # only a plan the lab runs has one
    assert relaxations_in(example) == ALL_RELAXATIONS


def test_a_kubernetes_node_boots_with_what_its_kubelet_needs(tmp_path):
    lines = lab.boot_lines({"roles": ["k8s_worker"]}, tmp_path)
    assert 'mknod -m 644 "$R/dev/kmsg" c 1 3' in lines  # the null device, not a link to it
    for name in lab.KUBELET_SYSCTLS:  # a stand-in of its own, never the machine's
        assert (
            f'mount --bind {tmp_path}/sysctl/{name.replace("/", ".")} "$R/proc/sys/{name}"' in lines
        )
    assert lab.boot_lines({"roles": ["slurm_compute"]}, tmp_path) == []


def test_a_gpu_node_boots_with_a_stand_in_of_the_nvidia_runtime_that_runs_runc(tmp_path):
    gpu = {"roles": ["k8s_worker"], "accelerators": {"kind": "gpu", "count": 2}}
    lines = lab.boot_lines(gpu, tmp_path / "node")
    # at the path the containerd role's `nvidia` runtime names
    defaults = yaml.safe_load((ROOT / "roles/containerd/defaults/main.yml").read_text())
    assert defaults["containerd_nvidia_runtime_binary"] == lab.NVIDIA_RUNTIME
    root = tmp_path / "root"
    (root / "usr/bin").mkdir(parents=True)
    wanted = [line for line in lines if lab.NVIDIA_RUNTIME in line]
    subprocess.run(["sh", "-ec", "\n".join(wanted)], env={"R": str(root)}, check=True)
    stand_in = root / lab.NVIDIA_RUNTIME.lstrip("/")
    assert stand_in.stat().st_mode & 0o777 == 0o755
    # every call goes to the runc on PATH, its arguments unchanged
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "runc").write_text('#!/bin/sh\nprintf "%s|" "$@"\n')
    (bin_dir / "runc").chmod(0o755)
    ran = subprocess.run(
        [str(stand_in), "--root", "/run/x", "create", "--bundle", "a b", "id"],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert ran.stdout == "--root|/run/x|create|--bundle|a b|id|"
    # no stand-in where the node has no NVIDIA GPU
    for spec in ({"roles": ["k8s_worker"]}, {"roles": ["k8s_worker"], "accelerators": {
            "kind": "accelerator", "count": 4}}):  # fmt: skip
        assert not [line for line in lab.boot_lines(spec, tmp_path) if "nvidia" in line]


def test_the_lab_boots_only_its_kubernetes_nodes_with_them():
    from cluster_plan.lab import node
    from cluster_plan.lab.names import LabNames

    expanded = lab_plan()
    names = LabNames("unit")
    script = node.boot_script(names, "gpu01", expanded["hosts"]["gpu01"], (Path("/base"),), {})
    lines = script.splitlines()
    wanted = lab.boot_lines(expanded["hosts"]["gpu01"], names.node_dir("gpu01"))
    assert wanted and lines[lines.index(wanted[0]) :][: len(wanted)] == wanted
    # after /proc/sys is read-only and /dev is the node's, before systemd starts
    assert lines.index('mount -o remount,bind,ro "$R/proc/sys"') < lines.index(wanted[0])
    assert lines.index('mount -t tmpfs -o mode=755,size=8m,nosuid dev "$R/dev"') < lines.index(
        wanted[0]
    )
    # systemd starts in the node's root as its mount namespace's root, shared
    last = lines[-1]
    assert last == lab.exec_line(expanded["hosts"]["gpu01"])
    assert "pivot_root . run/lab-old-root" in last and "mount --make-rshared /" in last
    assert last.index("pivot_root") < last.index("--make-rshared")
    slurm = expanded_plan("lab-as-kubernetes")
    slurm_host = {**slurm["hosts"]["gpu01"], "roles": ["slurm_compute"]}
    other = node.boot_script(names, "gpu01", slurm_host, (Path("/base"),), {})
    assert "kmsg" not in other and "pivot_root" not in other
    assert other.rstrip().endswith('exec chroot "$R" /lib/systemd/systemd --system')
