"""The plan's Kubernetes as an offline bundle: binaries and images built from the sources the
Go module proxy serves, cached on this machine, with a manifest of every artifact.

For the steps that install from it (a mirror, the lab's nodes, an API server for tests):

    from cluster_plan.kubernetes.bundle import ensure_bundle, built_bundle
    bundle = ensure_bundle("1.36")          # the plan's scheduler.kubernetes.version
    bundle.binary("kubeadm")                # Path of a binary (kube-apiserver, etcd, ptp, ...)
    bundle.image_layout("kube-apiserver")   # Path of an image's OCI layout
    bundle.artifact("pause", "image")       # its manifest entry: reference, sha256, ...
    built_bundle("1.36")                    # the same without building: None if not built
    ensure_bundle("1.36", needs=bundle_needs(plan))   # with what the plan needs besides
                                            # (kubernetes.devices.bundle_needs: the device plugin)

docs/kubernetes.md, "The offline bundle", has the list, the cache and the figures.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cluster_plan.kubernetes.bundle.artifacts import BundleSpec, bundle_spec
from cluster_plan.kubernetes.bundle.builder import Bundle, BundleError, ensure, find, prepare
from cluster_plan.kubernetes.bundle.cache import cache_root
from cluster_plan.kubernetes.bundle.project import BundleNeeds

__all__ = [
    "Bundle",
    "BundleError",
    "BundleNeeds",
    "BundleSpec",
    "built_bundle",
    "bundle_spec",
    "ensure_bundle",
]


def _quiet(_line: str) -> None:
    return None


def ensure_bundle(
    plan_version: str,
    cache: Path | None = None,
    note: Callable[[str], None] = _quiet,
    needs: BundleNeeds | None = None,
) -> Bundle:
    """The bundle for a plan's Kubernetes version, built first when the cache lacks it (a
    cold build takes minutes, a cached one is verified in seconds). BundleError says why not;
    versions.UnsupportedVersion when no release of that minor is pinned."""
    return ensure(prepare(bundle_spec(plan_version, needs), cache_root(cache)), note)


def built_bundle(
    plan_version: str, cache: Path | None = None, needs: BundleNeeds | None = None
) -> Bundle | None:
    """The bundle if this machine's cache has it complete (not verified), else None; also
    None where it could not be built (no Go, no gcc)."""
    try:
        return find(prepare(bundle_spec(plan_version, needs), cache_root(cache)))
    except BundleError:
        return None
