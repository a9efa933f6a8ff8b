"""kubeadm's configuration for each node, and the kubelet's.

- the first control plane gets InitConfiguration + ClusterConfiguration +
  KubeletConfiguration (the cluster-wide kubelet settings kubeadm uploads for every node);
- the other control planes and the workers get a JoinConfiguration that discovers the
  cluster from a kubeconfig the role writes at join time (it carries a short-lived bootstrap
  token, so no secret is in these files);
- every node gets a kubelet patch (kubeadm's `kubeletconfiguration` patch target) with what
  it reserves for its own daemons, which depends on its size.

Node IPs are the node's address on the plan's node network; labels and taints are the
ones of nodes.py, registered by kubeadm when the node joins.

With the plan's mirror (mirror.py), kubeadm pulls every image from it: imageRepository is
the mirror's registry, with the bundle's etcd and CoreDNS tags. A lab plan's cluster gets the
lab's settings (cluster_plan.lab.kubernetes); no other plan does.
"""

from __future__ import annotations

from typing import Any

from cluster_plan.kubernetes import nodes
from cluster_plan.kubernetes.cluster import API_PORT, KubernetesPlan
from cluster_plan.kubernetes.mirror import plan_mirror
from cluster_plan.kubernetes.reserved import EVICTION_HARD_MEMORY, SYSTEM_RESERVED, kube_reserved
from cluster_plan.kubernetes.versions import KUBEADM_API, KUBELET_API

KUBE_PROXY_API = "kubeproxy.config.k8s.io/v1alpha1"

CONFIG_DIR = "/etc/kubernetes/cluster-plan"
# what kubeadm init writes for the cluster's admin: kubectl on a control plane reads it
ADMIN_KUBECONFIG = "/etc/kubernetes/admin.conf"
PATCH_DIR = f"{CONFIG_DIR}/patches"
KUBELET_PATCH_FILE = "kubeletconfiguration+merge.yaml"
DISCOVERY_FILE = f"{CONFIG_DIR}/discovery.conf"
CRI_SOCKET = "unix:///run/containerd/containerd.sock"
DNS_DOMAIN = "cluster.local"


def _registration(plan: KubernetesPlan, name: str) -> dict[str, Any]:
    labels = nodes.kubelet_labels(nodes.node_labels(plan, name))
    args = [{"name": "node-ip", "value": plan.node_ip(name)}]
    if labels:
        args.append(
            {"name": "node-labels", "value": ",".join(f"{k}={v}" for k, v in labels.items())}
        )
    registration: dict[str, Any] = {
        "name": name,
        "criSocket": CRI_SOCKET,
        "kubeletExtraArgs": args,
        "taints": nodes.node_taints(plan, name),
    }
    ignored = []
    if plan.api_vip and name in plan.control_planes:
        # kube-vip's static pod is in place before kubeadm runs: the VIP must answer first
        ignored.append("DirAvailable--etc-kubernetes-manifests")
    if plan.lab:
        from cluster_plan.lab.kubernetes import PREFLIGHT_IGNORED

        ignored += PREFLIGHT_IGNORED
    if ignored:
        registration["ignorePreflightErrors"] = ignored
    return registration


def _local_endpoint(plan: KubernetesPlan, name: str) -> dict[str, Any]:
    return {"advertiseAddress": plan.node_ip(name), "bindPort": API_PORT}


def cluster_configuration(plan: KubernetesPlan) -> dict[str, Any]:
    sans = [plan.api_vip] if plan.api_vip else []
    for name in plan.control_planes:
        host = plan.host(name)
        sans += [plan.node_ip(name), str(host["hostname"]), str(host["fqdn"])]
    api_server: dict[str, Any] = {"certSANs": list(dict.fromkeys(sans))}
    if plan.release.api_server_args:
        api_server["extraArgs"] = plan.release.api_server_args
    configuration: dict[str, Any] = {
        "apiVersion": KUBEADM_API,
        "kind": "ClusterConfiguration",
        "clusterName": plan.cluster_name,
        "kubernetesVersion": f"v{plan.release.version}",
        "controlPlaneEndpoint": plan.endpoint,
        "networking": {
            "podSubnet": plan.pod_cidr,
            "serviceSubnet": plan.service_cidr,
            "dnsDomain": DNS_DOMAIN,
        },
        "apiServer": api_server,
        "etcd": {"local": {"dataDir": "/var/lib/etcd"}},
    }
    mirror = plan_mirror(plan)
    if mirror:
        # every image from the mirror, at the bundle's tags: kubeadm's own defaults for this
        # release, stated so that a kubeadm of another patch cannot ask for others
        configuration["imageRepository"] = mirror.registry
        configuration["etcd"]["local"]["imageTag"] = mirror.release.etcd_image_tag
        configuration["dns"] = {"imageTag": mirror.release.coredns}
    return configuration


def kubelet_configuration(plan: KubernetesPlan) -> dict[str, Any]:
    """Cluster-wide kubelet settings: the systemd cgroup driver (as containerd's runc),
    containerd's socket, and eviction before the node runs out of memory."""
    settings = {
        "apiVersion": KUBELET_API,
        "kind": "KubeletConfiguration",
        "cgroupDriver": "systemd",
        "containerRuntimeEndpoint": CRI_SOCKET,
        "failSwapOn": True,
        "rotateCertificates": True,
        "serializeImagePulls": False,
        "systemReserved": dict(SYSTEM_RESERVED),
        "evictionHard": {
            "memory.available": EVICTION_HARD_MEMORY,
            "nodefs.available": "10%",
            "nodefs.inodesFree": "5%",
            "imagefs.available": "15%",
        },
        "enforceNodeAllocatable": ["pods"],
    }
    if plan.lab:
        from cluster_plan.lab.kubernetes import kubelet_settings

        return kubelet_settings(settings)
    return settings


def kube_proxy_configuration(plan: KubernetesPlan) -> list[dict[str, Any]]:
    """kube-proxy's settings where the plan has any (kubeadm's defaults otherwise)."""
    if not plan.lab:
        return []
    from cluster_plan.lab.kubernetes import KUBE_PROXY

    return [{"apiVersion": KUBE_PROXY_API, "kind": "KubeProxyConfiguration", **KUBE_PROXY}]


def kubelet_patch(plan: KubernetesPlan, name: str) -> dict[str, Any]:
    host = plan.host(name)
    return {
        "apiVersion": KUBELET_API,
        "kind": "KubeletConfiguration",
        "kubeReserved": kube_reserved(float(host["cpu_cores"]), float(host["memory_gb"])),
    }


def node_configuration(plan: KubernetesPlan, name: str) -> list[dict[str, Any]]:
    """The documents of the file `kubeadm init|join --config` reads on this node."""
    patches = {"directory": PATCH_DIR}
    if name == plan.first_control_plane:
        return [
            {
                "apiVersion": KUBEADM_API,
                "kind": "InitConfiguration",
                "localAPIEndpoint": _local_endpoint(plan, name),
                "nodeRegistration": _registration(plan, name),
                "patches": patches,
            },
            cluster_configuration(plan),
            kubelet_configuration(plan),
            *kube_proxy_configuration(plan),
        ]
    join: dict[str, Any] = {
        "apiVersion": KUBEADM_API,
        "kind": "JoinConfiguration",
        "nodeRegistration": _registration(plan, name),
        "discovery": {"file": {"kubeConfigPath": DISCOVERY_FILE}},
        "patches": patches,
    }
    if name in plan.control_planes:
        join["controlPlane"] = {"localAPIEndpoint": _local_endpoint(plan, name)}
    return [join]
