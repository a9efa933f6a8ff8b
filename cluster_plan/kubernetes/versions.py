"""The Kubernetes releases the renderer supports (cluster_plan.plan.kubernetes holds them, and
why: validate refuses a plan that names another), the configuration APIs kubeadm and kubelet
read, and what the offline bundle pins for each release."""

from __future__ import annotations

from dataclasses import dataclass

from cluster_plan.plan.kubernetes import SUPPORTED as SUPPORTED
from cluster_plan.plan.kubernetes import VERSION_PATTERN, UnsupportedVersion
from cluster_plan.plan.kubernetes import Release as Release
from cluster_plan.plan.kubernetes import release as release

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
KUBELET_API = "kubelet.config.k8s.io/v1beta1"


# The offline bundle (cluster_plan.kubernetes.bundle): the patch release built for each minor,
# and what that release's kubeadm asks for, from cmd/kubeadm/app/constants/constants.go of
# its module (DefaultEtcdVersion, CoreDNSVersion, PauseVersion); the bundle's builder reads
# them there again and stops when they differ.
@dataclass(frozen=True)
class BundleRelease:
    kubernetes: str  # "1.36.3"
    etcd_image_tag: str  # "3.6.8-0": the image tag; the etcd sources are v3.6.8
    coredns: str  # "v1.14.2"
    pause: str  # "3.10.2"

    @property
    def minor(self) -> str:
        return self.kubernetes.rsplit(".", 1)[0]

    @property
    def etcd(self) -> str:
        return self.etcd_image_tag.split("-", 1)[0]

    def recipe(self) -> dict[str, str]:
        return {
            "kubernetes": self.kubernetes,
            "etcd_image_tag": self.etcd_image_tag,
            "coredns": self.coredns,
            "pause": self.pause,
        }


BUNDLE_RELEASES = {
    "1.36": BundleRelease("1.36.3", "3.6.8-0", "v1.14.2", "3.10.2"),
    "1.37": BundleRelease("1.37.2", "3.7.0-0", "v1.14.6", "3.10.2"),
}
# The node's runtime and network plugins, the same for every release above: containerd 2
# (1.7 lacks the CRI features 1.36 uses by default), runc for it, the CNI reference plugins.
CONTAINERD = "2.4.2"
RUNC = "1.5.3"
CNI_PLUGINS = "1.10.0"


def bundle_release(version: str) -> BundleRelease:
    """The pinned release for a plan's version: "1.36" or its pinned patch "1.36.3"."""
    match = VERSION_PATTERN.match(str(version))
    if not match:
        raise UnsupportedVersion(f"{version!r} is not a Kubernetes version like 1.36 or 1.36.3")
    minor, patch = match.group(1), match.group(2)
    pinned = BUNDLE_RELEASES.get(minor)
    if pinned is None:
        raise UnsupportedVersion(
            f"the offline bundle has no Kubernetes {minor}: it builds "
            + ", ".join(r.kubernetes for r in BUNDLE_RELEASES.values())
        )
    if patch is not None and f"{minor}.{patch}" != pinned.kubernetes:
        raise UnsupportedVersion(
            f"the offline bundle builds Kubernetes {pinned.kubernetes} for {minor}, not "
            f'{minor}.{patch}: set the version to "{minor}" or "{pinned.kubernetes}"'
        )
    return pinned
