"""The plan's own mirror of the offline bundle (`scheduler.kubernetes.mirror`): where nodes
fetch binaries and pull images when the cluster cannot reach the internet.

A host of the plan serves, on its address on the node network:

- a files repository (HTTP, `files_port`): the bundle's node binaries and CNI plugins under
  `/<bundle>/` (the bundle's directory name, `<version>-<key>`, so a new bundle never
  replaces files a node is installing), and its `manifest.json`; nodes check every file
  against the manifest's sha256;
- an image registry (`registry_port`): every image of the bundle under its `mirror_path`
  (kubeadm's imageRepository is the registry itself), and again under its upstream path on
  registry.k8s.io (CoreDNS keeps its `coredns/`), for anything that names registry.k8s.io.

containerd on every node sends registry.k8s.io, and every other registry, to the mirror
(hosts.toml under certs.d, `_default` included), so no node ever asks a public registry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cluster_plan.kubernetes.cluster import KubernetesPlan
from cluster_plan.kubernetes.versions import BundleRelease, bundle_release

UPSTREAM_REGISTRY = "registry.k8s.io"
# The bundle's node binaries (docs/kubernetes.md, "What is in it") and where a node installs
# them; the CNI plugins go to containerd's CNI directory.
CONTAINERD_BINARIES = {
    "containerd": "/usr/local/bin/containerd",
    "containerd-shim-runc-v2": "/usr/local/bin/containerd-shim-runc-v2",
    "ctr": "/usr/local/bin/ctr",
    "runc": "/usr/local/sbin/runc",
}
KUBERNETES_BINARIES = {
    "kubeadm": "/usr/local/bin/kubeadm",
    "kubelet": "/usr/local/bin/kubelet",
    "kubectl": "/usr/local/bin/kubectl",
}
CNI_PLUGINS = ("ptp", "host-local", "loopback", "portmap", "bridge")


@dataclass(frozen=True)
class Mirror:
    host: str
    address: str  # the mirror host's address on the node network
    registry_port: int
    files_port: int
    release: BundleRelease

    @property
    def registry(self) -> str:
        """The registry as an image reference names it: kubeadm's imageRepository."""
        return f"{self.address}:{self.registry_port}"

    @property
    def files_url(self) -> str:
        return f"http://{self.address}:{self.files_port}"

    @property
    def sandbox_image(self) -> str:
        return f"{self.registry}/pause:{self.release.pause}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "address": self.address,
            "registry": self.registry,
            "registry_port": self.registry_port,
            "files_port": self.files_port,
            "files_url": self.files_url,
            "sandbox_image": self.sandbox_image,
            "kubernetes": self.release.kubernetes,
            "etcd_image_tag": self.release.etcd_image_tag,
            "coredns": self.release.coredns,
        }


def plan_mirror(plan: KubernetesPlan) -> Mirror | None:
    """The plan's mirror, or None when the nodes install from upstream."""
    if plan.mirror is None:
        return None
    host = str(plan.mirror["host"])
    return Mirror(
        host=host,
        address=str(plan.host(host)["interfaces"][plan.node_network]["address"]),
        registry_port=int(plan.mirror.get("registry_port", 5000)),
        files_port=int(plan.mirror.get("files_port", 8080)),
        release=bundle_release(plan.release.minor),
    )


def sandbox_image(plan: KubernetesPlan) -> str:
    """The pod sandbox (pause) image containerd runs: the mirror's, else upstream's, of the
    plan's release (one table: cluster_plan.kubernetes.versions)."""
    mirror = plan_mirror(plan)
    return mirror.sandbox_image if mirror else plan.release.pause_image


def registry_hosts(mirror: Mirror) -> dict[str, str]:
    """containerd's certs.d: directory name -> hosts.toml. The mirror itself (plain HTTP),
    registry.k8s.io and every other registry (`_default`) all go to the mirror only: its
    `server` replaces the registry's own, so containerd has no upstream to fall back to."""
    text = (
        "# Managed by Ansible (roles/containerd): every pull goes to the plan's mirror.\n"
        f'server = "http://{mirror.registry}"\n'
    )
    return {mirror.registry: text, UPSTREAM_REGISTRY: text, "_default": text}


def registry_repositories(artifact: dict[str, Any]) -> list[dict[str, str]]:
    """Where the mirror's registry holds one image of the bundle's manifest: its mirror path
    (what kubeadm's imageRepository asks for) and its upstream path on registry.k8s.io."""
    mirror_path = str(artifact["mirror_path"])
    upstream = str(artifact["reference"]).removeprefix(f"{UPSTREAM_REGISTRY}/")
    places = []
    for path in dict.fromkeys((mirror_path, upstream)):
        repository, tag = path.rsplit(":", 1)
        places.append({"repository": repository, "tag": tag})
    return places
