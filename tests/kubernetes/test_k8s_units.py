"""The renderer's arithmetic and refusals: pod MTU, kubelet reservations, versions, the
Calico manifest edit, what a kubelet may label itself with, and the plans it refuses."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml
from k8s_plans import expanded_plan

from cluster_plan import cli
from cluster_plan.kubernetes import files, render, write
from cluster_plan.kubernetes.cni import (
    MIN_MTU,
    CalicoManifestError,
    customize_calico,
    network_settings,
    pod_mtu,
)
from cluster_plan.kubernetes.devices import device_plugin_config
from cluster_plan.kubernetes.nodes import kubelet_labels
from cluster_plan.kubernetes.reserved import kube_reserved
from cluster_plan.kubernetes.versions import (
    BUNDLE_RELEASES,
    SUPPORTED,
    UnsupportedVersion,
    bundle_release,
    release,
)
from cluster_plan.plan.findings import PlanError

LAB_K8S = Path(__file__).resolve().parents[2] / "inventory" / "lab" / "k8s.yml"

# --- pod MTU: the network's MTU less the encapsulation's outer headers ---


@pytest.mark.parametrize(
    ("network", "encapsulation", "expected"),
    [
        (1500, "ipip", 1480),  # 20-byte outer IPv4 header
        (1500, "vxlan", 1450),  # 20 IPv4 + 8 UDP + 8 VXLAN + 14 inner Ethernet
        (1500, "none", 1500),
        (9000, "ipip", 8980),
        (9000, "vxlan", 8950),
        (1300, "ipip", 1280),
    ],
)
def test_pod_mtu(network, encapsulation, expected):
    assert pod_mtu(network, encapsulation) == expected


def test_pod_mtu_refuses_what_cannot_work():
    with pytest.raises(ValueError, match="at least 1280"):
        pod_mtu(MIN_MTU + 49, "vxlan")
    with pytest.raises(ValueError, match="unknown encapsulation"):
        pod_mtu(1500, "gre")


def test_pod_mtu_follows_the_smallest_node_interface():
    expanded = expanded_plan("lab-as-kubernetes")  # Calico, IP-in-IP
    assert network_settings(render(expanded).plan)["pod_mtu"] == 9000 - 20
    expanded["hosts"]["cpu01"]["interfaces"]["compute"]["mtu"] = 1500
    settings = network_settings(render(expanded).plan)
    assert (settings["node_network_mtu"], settings["pod_mtu"]) == (1500, 1480)


def test_host_routes_wrap_nothing_so_pods_get_the_node_network_mtu():
    expanded = expanded_plan("lab-k8s")
    assert expanded["scheduler"]["kubernetes"]["encapsulation"] == "ipip"  # Calico's default
    settings = network_settings(render(expanded).plan)
    assert settings["plugin"] == "host-routes"
    assert (settings["encapsulation"], settings["pod_mtu"]) == ("none", 9000)


# --- the Calico manifest, edited structurally ---


def manifest() -> list[dict]:
    """The two documents of Calico's manifest the plan's settings go into, in its shape."""
    return [
        {
            "kind": "ConfigMap",
            "apiVersion": "v1",
            "metadata": {"name": "calico-config", "namespace": "kube-system"},
            "data": {"calico_backend": "bird", "veth_mtu": "0"},
        },
        {
            "kind": "DaemonSet",
            "apiVersion": "apps/v1",
            "metadata": {"name": "calico-node", "namespace": "kube-system"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "calico-node",
                                "env": [
                                    {"name": "CALICO_IPV4POOL_IPIP", "value": "Always"},
                                    {"name": "CALICO_IPV4POOL_VXLAN", "value": "Never"},
                                    {
                                        "name": "FELIX_IPINIPMTU",
                                        "valueFrom": {
                                            "configMapKeyRef": {
                                                "name": "calico-config",
                                                "key": "veth_mtu",
                                            }
                                        },
                                    },
                                ],
                                "livenessProbe": {
                                    "exec": {
                                        "command": ["/bin/calico-node", "-felix-live", "-bird-live"]
                                    }
                                },
                            }
                        ]
                    }
                }
            },
        },
    ]


def env_of(docs: list[dict]) -> dict[str, str]:
    container = docs[1]["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


def test_calico_gets_the_plan_mtu_and_pool():
    original = manifest()
    settings = {"encapsulation": "ipip", "pod_mtu": 8980, "pod_cidr": "10.244.0.0/16"}
    docs = customize_calico(original, settings)
    assert docs[0]["data"] == {"calico_backend": "bird", "veth_mtu": "8980"}
    env = env_of(docs)
    assert env["CALICO_IPV4POOL_CIDR"] == "10.244.0.0/16"
    assert (env["CALICO_IPV4POOL_IPIP"], env["CALICO_IPV4POOL_VXLAN"]) == ("Always", "Never")
    assert env["FELIX_IPINIPMTU"] is None  # still read from the ConfigMap
    assert original == manifest()  # the input is left alone


def test_calico_vxlan_turns_bgp_off():
    docs = customize_calico(
        manifest(), {"encapsulation": "vxlan", "pod_mtu": 1450, "pod_cidr": "10.244.0.0/16"}
    )
    assert docs[0]["data"]["calico_backend"] == "vxlan"
    assert (env_of(docs)["CALICO_IPV4POOL_IPIP"], env_of(docs)["CALICO_IPV4POOL_VXLAN"]) == (
        "Never",
        "Always",
    )
    probe = docs[1]["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
    assert probe["exec"]["command"] == ["/bin/calico-node", "-felix-live"]


def test_a_manifest_without_calico_config_is_refused():
    with pytest.raises(CalicoManifestError, match="ConfigMap calico-config"):
        customize_calico(manifest()[1:], {"encapsulation": "ipip", "pod_mtu": 1, "pod_cidr": ""})


# --- kubelet reservations by node size ---


@pytest.mark.parametrize(
    ("cores", "gib", "cpu", "memory"),
    [
        (1, 1, "60m", "256Mi"),  # 6% of a core; 25% of 1 GiB
        (2, 4, "70m", "1024Mi"),  # 60 + 10; 25% of 4 GiB
        (4, 8, "80m", "1843Mi"),  # 60 + 10 + 2 x 5; 1024 + 20% of 4 GiB
        (8, 16, "90m", "2662Mi"),  # ... + 4 x 2.5; ... + 10% of 8 GiB
        (64, 512, "230m", "17408Mi"),  # 80 + 60 x 2.5; ... + 6% of 112 GiB + 2% of 384 GiB
    ],
)
def test_kube_reserved_tiers(cores, gib, cpu, memory):
    assert kube_reserved(cores, gib) == {"cpu": cpu, "memory": memory}


def test_kube_reserved_needs_a_real_node():
    with pytest.raises(ValueError):
        kube_reserved(0, 8)


# --- versions ---


def test_versions():
    assert release("1.36").version == "1.36.3"  # the pinned patch release of the minor
    assert release("1.36.4").version == "1.36.4"
    assert release("1.36").mutating_policy_api == "admissionregistration.k8s.io/v1"
    assert release("1.36").api_server_args == []
    beta = release("1.34")
    assert beta.mutating_policy_api == "admissionregistration.k8s.io/v1beta1"
    assert {a["name"] for a in beta.api_server_args} == {"feature-gates", "runtime-config"}
    with pytest.raises(UnsupportedVersion, match=f"{SUPPORTED[0]} to {SUPPORTED[-1]}"):
        release("1.30")
    with pytest.raises(UnsupportedVersion, match="not a Kubernetes version"):
        release("v1.36")


@pytest.mark.parametrize("minor", SUPPORTED)
def test_every_minor_names_one_patch_release_and_its_pause_image(minor):
    pinned = release(minor)
    assert pinned.version.startswith(f"{minor}.")
    assert pinned.pause_image == f"registry.k8s.io/pause:{pinned.pause}"


@pytest.mark.parametrize("minor", sorted(BUNDLE_RELEASES))
def test_the_bundle_builds_the_release_the_renderer_installs(minor):
    """One table: a plan's "1.36" renders the version the bundle builds, with its pause."""
    assert BUNDLE_RELEASES[minor].kubernetes == release(minor).version
    assert BUNDLE_RELEASES[minor].pause == release(minor).pause
    assert bundle_release(minor) == BUNDLE_RELEASES[minor]


def test_kubelets_register_only_labels_they_may_set():
    labels = {
        "cluster-plan.io/pool": "gpu",
        "topology.kubernetes.io/zone": "r1",
        "node.kubernetes.io/instance-type": "gpu8",
        "node-role.kubernetes.io/control-plane": "",
        "nvidia.com/gpu.present": "true",
        "kubernetes.io/whatever": "x",
    }
    assert kubelet_labels(labels) == {
        "cluster-plan.io/pool": "gpu",
        "topology.kubernetes.io/zone": "r1",
        "node.kubernetes.io/instance-type": "gpu8",
        "nvidia.com/gpu.present": "true",
    }


def test_gpu_sharing_config():
    plain = {"mode": "none", "mig_strategy": "single"}
    assert device_plugin_config(plain) == {"version": "v1", "flags": {"migStrategy": "none"}}
    sliced = device_plugin_config({**plain, "mode": "time-slicing", "replicas": 4})
    assert sliced["sharing"]["timeSlicing"]["resources"] == [
        {"name": "nvidia.com/gpu", "replicas": 4}
    ]
    assert device_plugin_config({"mode": "mig", "mig_strategy": "mixed"})["flags"] == {
        "migStrategy": "mixed"
    }


# --- plans that cannot be a Kubernetes cluster ---


def refusal(expanded: dict) -> set[str]:
    with pytest.raises(PlanError) as info:
        render(expanded)
    return {f"{f.code} {f.json_path}" for f in info.value.findings}


def test_refusals():
    base = expanded_plan("lab-k8s")
    k8s = base["scheduler"]["kubernetes"]

    plan = copy.deepcopy(base)
    plan["scheduler"]["kubernetes"]["version"] = "1.30"
    assert refusal(plan) == {"unsupported-version $.scheduler.kubernetes.version"}

    plan = copy.deepcopy(base)
    plan["scheduler"]["kubernetes"] = {**k8s, "container_runtime": "cri-o", "node_network": "x"}
    assert refusal(plan) == {
        "unsupported-runtime $.scheduler.kubernetes.container_runtime",
        "unknown-network $.scheduler.kubernetes.node_network",
    }

    plan = copy.deepcopy(base)
    plan["hosts"]["gpu01"]["roles"] = ["k8s_control_plane"]  # two control planes, no VIP
    assert refusal(plan) == {"missing-key $.scheduler.kubernetes"}

    for vip, code in (
        ("10.44.0.11", "address-in-use"),  # gpu01's address
        ("10.44.0.2", "address-in-use"),  # the DNS server
        ("192.0.2.1", "network-address"),
        ("10.44.0.200", "address-not-reserved"),  # mgmt reserves .1-.9 only
    ):
        plan = copy.deepcopy(base)
        plan["scheduler"]["kubernetes"]["api_vip"] = vip
        assert refusal(plan) == {f"{code} $.scheduler.kubernetes.api_vip"}, vip

    plan = copy.deepcopy(base)
    plan["scheduler"]["workload_classes"]["gpu_"] = {"pool": "gpu"}
    assert refusal(plan) == {"kubernetes-name $.scheduler.workload_classes.gpu_"}


def test_a_plan_with_a_vip_gets_kube_vip_on_each_control_plane():
    rendering = render(expanded_plan("k8s-inference"))
    assert sorted(rendering.static_pods) == ["cp1", "cp2", "cp3"]
    cluster = next(d for d in rendering.kubeadm["cp1"] if d["kind"] == "ClusterConfiguration")
    assert cluster["controlPlaneEndpoint"] == "10.60.0.10:6443"
    join = rendering.kubeadm["cp2"][0]
    assert join["kind"] == "JoinConfiguration" and "controlPlane" in join
    worker = rendering.kubeadm["cpu-01"][0]
    assert worker["kind"] == "JoinConfiguration" and "controlPlane" not in worker


# --- the files and the command ---


def test_write_replaces_an_earlier_rendering(tmp_path):
    write(render(expanded_plan("k8s-inference")), tmp_path)
    assert (tmp_path / "kubeadm" / "cp2.yaml").is_file()
    rendering = render(expanded_plan("lab-k8s"))
    write(rendering, tmp_path)  # the earlier plan's nodes' files go
    on_disk = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*.yaml"))
    assert on_disk == sorted(files(rendering))


def test_cli_render(tmp_path, capsys):
    assert cli.main(["k8s", "render", "inventory/lab/k8s.yml", "-o", str(tmp_path)]) == 0
    assert (tmp_path / "objects" / "30-admission.yaml").is_file()
    assert cli.main(["k8s", "render", "inventory/lab/k8s.yml"]) == 0
    out = capsys.readouterr().out
    kinds = {d["kind"] for d in yaml.safe_load_all(out)}
    assert {"PriorityClass", "MutatingAdmissionPolicy", "Node"} <= kinds


def test_cli_render_refuses_a_slurm_plan_with_where_and_why(capsys):
    assert cli.main(["k8s", "render", "inventory/lab/cluster.yml"]) == 1
    err = capsys.readouterr().err
    assert "inventory/lab/cluster.yml:" in err and "error[not-kubernetes]" in err
    assert "Traceback" not in err


def test_cli_render_unreadable_plan_is_a_usage_error(tmp_path, capsys):
    assert cli.main(["k8s", "render", str(tmp_path / "missing.yml")]) == 2
    assert "Traceback" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["k8s", "render"])
    assert exit_info.value.code == 2


def test_rendering_is_deterministic():
    first = files(render(expanded_plan("k8s-inference")))
    second = files(render(expanded_plan("k8s-inference")))
    assert json.dumps(first) == json.dumps(second)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"pod_cidr": "10.45.0.0/16"}, "$.scheduler.kubernetes.pod_cidr"),  # the compute network
        ({"pod_cidr": None, "service_cidr": "10.44.0.0/20"}, "$.scheduler.kubernetes.service_cidr"),
    ],
)
def test_validate_refuses_cluster_cidrs_on_a_plan_network(tmp_path, capsys, change, path):
    """Written or defaulted, the pod and service networks may not overlap a plan network."""
    plan = yaml.safe_load(LAB_K8S.read_text())
    for key, value in change.items():
        if value is None:
            plan["scheduler"]["kubernetes"].pop(key)
        else:
            plan["scheduler"]["kubernetes"][key] = value
    target = tmp_path / "k8s.yml"
    target.write_text(yaml.safe_dump(plan, sort_keys=False))
    (tmp_path / "k8s.lock.json").write_text(LAB_K8S.with_name("k8s.lock.json").read_text())
    assert cli.main(["validate", str(target)]) == 1
    err = capsys.readouterr().err
    assert "network-overlap" in err and path in err


def test_validate_checks_the_default_pod_cidr(tmp_path, capsys):
    plan = yaml.safe_load(LAB_K8S.read_text())
    plan["scheduler"]["kubernetes"].pop("pod_cidr")
    plan["networks"]["compute"]["cidr"] = "10.244.0.0/24"  # inside the default 10.244.0.0/16
    target = tmp_path / "k8s.yml"
    target.write_text(yaml.safe_dump(plan, sort_keys=False))
    assert cli.main(["lock", str(target)]) == 1
    err = capsys.readouterr().err
    assert "network-overlap" in err and "pod_cidr" in err
