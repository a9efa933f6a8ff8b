"""The Kubernetes releases the renderer supports and the offline bundle builds
(cluster_plan.plan.kubernetes_releases holds them, and why: validate refuses a plan that names
another), the configuration APIs kubeadm and kubelet read, and the node's runtime and network
plugins the bundle pins."""

from __future__ import annotations

from cluster_plan.plan.kubernetes_releases import BUNDLE_RELEASES as BUNDLE_RELEASES
from cluster_plan.plan.kubernetes_releases import SUPPORTED as SUPPORTED
from cluster_plan.plan.kubernetes_releases import BundleRelease as BundleRelease
from cluster_plan.plan.kubernetes_releases import Release as Release
from cluster_plan.plan.kubernetes_releases import UnsupportedVersion as UnsupportedVersion
from cluster_plan.plan.kubernetes_releases import bundle_release as bundle_release
from cluster_plan.plan.kubernetes_releases import release as release

KUBEADM_API = "kubeadm.k8s.io/v1beta4"
KUBELET_API = "kubelet.config.k8s.io/v1beta1"

# The node's runtime and network plugins, the same for every bundled release: containerd 2
# (1.7 lacks the CRI features 1.36 uses by default), runc for it, the CNI reference plugins.
CONTAINERD = "2.4.2"
RUNC = "1.5.3"
CNI_PLUGINS = "1.10.0"
