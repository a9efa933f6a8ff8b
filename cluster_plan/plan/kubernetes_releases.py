"""The Kubernetes releases a plan may name, and the ones the offline bundle builds.

The plan's routing policy is a MutatingAdmissionPolicy (KEP-3962): alpha in 1.32 and 1.33,
beta in 1.34 and 1.35 (both off by default, so the API server gets the feature gate and the
API group version switched on), GA in 1.36. Older releases have no in-tree way to mutate a
pod from a policy object, so they are refused rather than served a half policy. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ADMISSION_GROUP = "admissionregistration.k8s.io"


@dataclass(frozen=True)
class Release:
    minor: str  # "1.36"
    version: str  # the full version kubeadm installs: "1.36.3"
    mutating_policy_version: str  # v1alpha1 | v1beta1 | v1
    pause: str  # the sandbox (pause) image tag this kubeadm release expects: "3.10.2"

    @property
    def pause_image(self) -> str:
        return f"registry.k8s.io/pause:{self.pause}"

    @property
    def mutating_policy_api(self) -> str:
        return f"{ADMISSION_GROUP}/{self.mutating_policy_version}"

    @property
    def validating_policy_api(self) -> str:
        return f"{ADMISSION_GROUP}/v1"  # GA since 1.30

    @property
    def api_server_args(self) -> list[dict[str, str]]:
        """kube-apiserver flags that turn the mutating policy API on where it is not GA."""
        if self.mutating_policy_version == "v1":
            return []
        return [
            {"name": "feature-gates", "value": "MutatingAdmissionPolicy=true"},
            {"name": "runtime-config", "value": f"{self.mutating_policy_api}=true"},
        ]


# The one table of releases: per minor, the patch release a plan naming only the minor
# installs (the newest the Go module proxy served when it was pinned; the offline bundle
# builds the same one), the policy API version and the pause tag of its kubeadm
# (cmd/kubeadm/app/constants/constants.go). A plan may pin another patch: version: "1.36.4".
_RELEASES = {
    "1.32": ("1.32.13", "v1alpha1", "3.10"),
    "1.33": ("1.33.13", "v1alpha1", "3.10"),
    "1.34": ("1.34.4", "v1beta1", "3.10.1"),
    "1.35": ("1.35.4", "v1beta1", "3.10.1"),
    "1.36": ("1.36.3", "v1", "3.10.2"),
    "1.37": ("1.37.2", "v1", "3.10.2"),
}
SUPPORTED = tuple(_RELEASES)
VERSION_PATTERN = re.compile(r"^(1\.[0-9]+)(?:\.([0-9]+))?$")


class UnsupportedVersion(ValueError):
    """str() says which versions are supported."""


def release(version: str) -> Release:
    """The release for a plan's `scheduler.kubernetes.version` ("1.36" or "1.36.3")."""
    match = VERSION_PATTERN.match(str(version))
    if not match:
        raise UnsupportedVersion(f"{version!r} is not a Kubernetes version like 1.36 or 1.36.3")
    minor, patch = match.group(1), match.group(2)
    if minor not in _RELEASES:
        raise UnsupportedVersion(
            f"Kubernetes {minor} is not supported: the scheduling policy needs "
            f"MutatingAdmissionPolicy, so {SUPPORTED[0]} to {SUPPORTED[-1]}"
        )
    pinned, api, pause = _RELEASES[minor]
    return Release(minor, f"{minor}.{patch}" if patch is not None else pinned, api, pause)


# The offline bundle (cluster_plan.kubernetes.bundle): the patch release built for each minor,
# and what that release's kubeadm asks for, from cmd/kubeadm/app/constants/constants.go of
# its module (DefaultEtcdVersion, CoreDNSVersion, PauseVersion); the bundle's builder reads
# them there again and stops when they differ. Here in the core because a plan with a mirror
# may name only these (validate says so).
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


def _bundled(minor: str, etcd_image_tag: str, coredns: str) -> BundleRelease:
    """The bundle of a minor builds the release the renderer installs, with its pause."""
    pinned = release(minor)
    return BundleRelease(pinned.version, etcd_image_tag, coredns, pinned.pause)


BUNDLE_RELEASES = {
    "1.36": _bundled("1.36", "3.6.8-0", "v1.14.2"),
    "1.37": _bundled("1.37", "3.7.0-0", "v1.14.6"),
}


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
