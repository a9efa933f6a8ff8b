"""One API address for several control planes: kube-vip as a static pod on each of them,
holding the plan's `api_vip` by ARP on the interface of the network it belongs to, with
leader election so that exactly one control plane answers for it."""

from __future__ import annotations

from typing import Any

import netaddr

from cluster_plan.kubernetes import names
from cluster_plan.kubernetes.cluster import API_PORT, KubernetesPlan

KUBE_VIP_IMAGE = "ghcr.io/kube-vip/kube-vip:v0.8.0"
STATIC_POD_FILE = "/etc/kubernetes/manifests/kube-vip.yaml"


def vip_interface(plan: KubernetesPlan, name: str) -> str:
    assert plan.api_vip is not None
    address = netaddr.IPAddress(plan.api_vip)
    for iface in plan.host(name)["interfaces"].values():
        if address in netaddr.IPNetwork(iface["cidr"]):
            return str(iface["device"])
    raise ValueError(f"{name} has no interface on the network of {plan.api_vip}")


def kube_vip_pod(plan: KubernetesPlan, name: str) -> dict[str, Any]:
    # kubeadm init grants admin.conf its rights only once the API is up, which needs the
    # VIP: on the first control plane kube-vip starts with super-admin.conf (kubeadm >= 1.29)
    kubeconfig = (
        "/etc/kubernetes/super-admin.conf"
        if name == plan.first_control_plane
        else "/etc/kubernetes/admin.conf"
    )
    env = {
        "address": str(plan.api_vip),
        "port": str(API_PORT),
        "vip_interface": vip_interface(plan, name),
        "vip_arp": "true",
        "vip_cidr": "32",
        "cp_enable": "true",
        "cp_namespace": "kube-system",
        "vip_leaderelection": "true",
        "vip_leasename": "plndr-cp-lock",
        "vip_leaseduration": "5",
        "vip_renewdeadline": "3",
        "vip_retryperiod": "1",
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "kube-vip",
            "namespace": "kube-system",
            "labels": dict(names.MANAGED_BY),
        },
        "spec": {
            "hostNetwork": True,
            "hostAliases": [{"ip": "127.0.0.1", "hostnames": ["kubernetes"]}],
            "containers": [
                {
                    "name": "kube-vip",
                    "image": KUBE_VIP_IMAGE,
                    "args": ["manager"],
                    "env": [{"name": k, "value": v} for k, v in env.items()],
                    "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_RAW"]}},
                    "volumeMounts": [
                        {"name": "kubeconfig", "mountPath": "/etc/kubernetes/admin.conf"}
                    ],
                }
            ],
            "volumes": [{"name": "kubeconfig", "hostPath": {"path": kubeconfig, "type": "File"}}],
        },
    }


def static_pods(plan: KubernetesPlan) -> dict[str, list[dict[str, Any]]]:
    if not plan.api_vip:
        return {}
    return {name: [kube_vip_pod(plan, name)] for name in plan.control_planes}
