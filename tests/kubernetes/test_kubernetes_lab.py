"""A real Kubernetes cluster in the lab, air-gapped, from the plan's own mirror.

The module brings up the Kubernetes lab plan (inventory/lab/k8s.yml) under its own lab id
(`$CLUSTER_PLAN_LAB_ID-k8s`, beside the session's Slurm lab, on its own subnets), converges
`site.yml` on it, converges it again with every stage in full, and takes the lab down. The
lab's nodes have no route out: everything comes from the offline bundle (built on this
machine: `cluster-plan k8s bundle`, which the mirror role runs first), served by cp01.
What must hold:

- the first run converges kubeadm init, the joins, the host-routes pod network, kube-proxy
  and CoreDNS, and the second run changes nothing on any host;
- every node is Ready with the plan's labels and taints;
- a pod on a worker in rack r1 reaches a pod on a worker in rack r2 at its pod address, and
  a Service's name resolves through CoreDNS;
- every image every node has, and every container it runs, came from the mirror with the
  bundle's digest; a registry a node is asked for (registry.k8s.io, docker.io) is the mirror;
- the nodes offer the plan's accelerators (the project's device plugin on the lab's stand-in
  devices), a pod asking for one GPU runs on gpu01 under RuntimeClass `nvidia` (the lab's
  stand-in runtime) and sees exactly one, two get different ones, one asking for more than the
  node has waits with the scheduler's reason;
- a team's user creates pods in its namespace only, and not over its GPU quota;
- the maintenance reservation's units, on their timers moved a few seconds ahead, taint its
  nodes (a pod for them waits) and release them (the pod runs);
- the plan's monitoring watches the cluster: a kubelet stopped makes its node NotReady, and
  KubernetesNodeNotReady fires, reaches Alertmanager's receiver, and resolves once the
  kubelet is back;
- day 2, last (it ends where it began): `cluster-plan change` adds gpu02 (bare, joined with
  a token the role makes), acceptance runs the plan's training Job through the API server on
  gpu01 and gpu02 (DDP over gloo from the bundle's image: the loss falls, both ranks end with
  the same weights), a replacement of gpu02 stops at a PodDisruptionBudget within its bound
  and goes through with --force, and the removal drains, deletes and powers it off.

CLUSTER_PLAN_LAB_CONVERGED=1 runs the tests on the lab already running under this module's
id, as it is (no bring-up, no converge, no take-down): a developer's quick iteration.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.change_plans import grow_gpu, write_plan
from support.lab_session import session_claim, skip_unless_lab_machine
from support.lab_state import class_bytes, running_hosts
from support.node_shell import lab_run
from support.waiting import wait_until

from cluster_plan.api import load_expanded
from cluster_plan.kubernetes import files, render
from cluster_plan.kubernetes.bundle import Bundle, built_bundle
from cluster_plan.kubernetes.bundle.command import plan_needs
from cluster_plan.kubernetes.bundle.project import TRAINING
from cluster_plan.kubernetes.devices import served_classes
from cluster_plan.kubernetes.mirror import plan_mirror
from cluster_plan.kubernetes.nodes import node_capacity
from cluster_plan.lab import lifecycle
from cluster_plan.lab.names import for_plan
from cluster_plan.lab.topology import wiring

pytestmark = pytest.mark.lab

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "inventory" / "lab" / "k8s.yml"
BIN = Path(sys.executable).parent
IMAGE_BUILDER = Path(__file__).with_name("oci_image.py")
KUBECTL = "kubectl --kubeconfig /etc/kubernetes/admin.conf"
TEST_NAMESPACE = "lab-network"
RECAP = re.compile(
    r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M
)


def recap(output: str) -> dict[str, dict[str, int]]:
    hosts: dict[str, dict[str, int]] = {}
    for host, ok, changed, unreachable, failed in RECAP.findall(output):
        row = hosts.setdefault(host, {"ok": 0, "changed": 0, "unreachable": 0, "failed": 0})
        for key, value in zip(row, (ok, changed, unreachable, failed), strict=True):
            row[key] += int(value)
    return hosts


@dataclass
class K8sLab:
    lab_id: str
    expanded: dict[str, Any]
    runs: list[subprocess.CompletedProcess[str]] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)
    ready_s: float | None = None

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "CLUSTER_PLAN_LAB_ID": self.lab_id,
            "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
        }

    def converge(self, *arguments: str) -> None:
        started = time.monotonic()
        self.runs.append(
            subprocess.run(
                [str(BIN / "ansible-playbook"), "-i", str(PLAN), "site.yml", *arguments],
                cwd=ROOT,
                env=self.env(),
                capture_output=True,
                text=True,
                timeout=3600,
                check=False,
            )
        )
        self.seconds.append(time.monotonic() - started)

    def sh(
        self, host: str, script: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = lab_run(PLAN, host, ["sh", "-c", script], self.env(), 300, stdin)
        if check:
            assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
        return result

    def kubectl(self, arguments: str, stdin: str | None = None) -> str:
        return self.sh("cp01", f"{KUBECTL} {arguments}", stdin=stdin).stdout

    def json(self, arguments: str) -> Any:
        return json.loads(self.kubectl(f"{arguments} --output json"))

    @property
    def nodes(self) -> list[str]:
        return list(self.expanded["hosts"])


def first_ready_seconds(lab: K8sLab, started: float) -> float | None:
    """How long after the start of the first run the last node turned Ready, from the nodes'
    own Ready conditions (lastTransitionTime) and the run's start."""
    nodes = lab.json("get nodes")["items"]
    times = []
    for node in nodes:
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        stamp = time.strptime(ready["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
        times.append(calendar.timegm(stamp))
    return max(times) - started if times else None


@pytest.fixture(scope="module")
def k8s_lab() -> Iterator[K8sLab]:
    skip_unless_lab_machine()
    needs = plan_needs(render(load_expanded(PLAN)).plan)
    if (
        built_bundle("1.36", needs=needs) is None
        and os.environ.get("CLUSTER_PLAN_K8S_BUILD") != "1"
    ):
        # the mirror role builds it, but a cold build is tens of minutes: say so, loudly
        print("\nthe 1.36 offline bundle is not built yet: the first converge builds it")
    lab_id = f"{os.environ.get('CLUSTER_PLAN_LAB_ID', 'test')}-k8s"
    patch = pytest.MonkeyPatch()
    patch.setenv("CLUSTER_PLAN_LAB_ID", lab_id)  # the lab's names come from it
    try:
        expanded = load_expanded(PLAN)
        if os.environ.get("CLUSTER_PLAN_LAB_CONVERGED") == "1":
            # a developer's quick iteration: the lab running under this id, as it is
            yield K8sLab(lab_id, expanded)
            return
        with session_claim(lab_id):
            try:
                lifecycle.down(expanded)  # whatever an interrupted run left behind
                lifecycle.up(expanded, str(PLAN))
                lab = K8sLab(lab_id, expanded)
                started = time.time()
                lab.converge()
                if lab.runs[0].returncode == 0:
                    lab.ready_s = first_ready_seconds(lab, started)
                    lab.converge("-e", "site_converge_when=always")
                first_s, *again = lab.seconds
                print(
                    f"\nKubernetes lab converge: {first_s:.0f} s (nodes Ready after "
                    f"{lab.ready_s or 0:.0f} s), again in full "
                    + (f"{again[0]:.0f} s" if again else "not run")
                )
                yield lab
            finally:
                lifecycle.down(expanded)
    finally:
        patch.undo()


def fatal_lines(run: subprocess.CompletedProcess[str]) -> str:
    return "\n".join(
        line for line in run.stdout.splitlines() if line.startswith(("fatal: ", "failed: "))
    )


def test_site_converges_the_cluster_and_a_second_run_changes_nothing(k8s_lab):
    if not k8s_lab.runs:
        pytest.skip("CLUSTER_PLAN_LAB_CONVERGED=1: the lab was converged before this session")
    first = k8s_lab.runs[0]
    assert first.returncode == 0, fatal_lines(first) or first.stdout[-3000:]
    assert set(recap(first.stdout)) == set(k8s_lab.nodes)
    (second,) = k8s_lab.runs[1:]
    assert second.returncode == 0, fatal_lines(second) or second.stdout[-3000:]
    rows = recap(second.stdout)
    assert {h: r["changed"] for h, r in rows.items()} == dict.fromkeys(k8s_lab.nodes, 0)


def test_every_node_is_ready_with_the_plans_labels_and_taints(k8s_lab):
    rendering = render(k8s_lab.expanded)
    planned = {o["metadata"]["name"]: o for o in rendering.objects["40-nodes"]}
    nodes = {n["metadata"]["name"]: n for n in k8s_lab.json("get nodes")["items"]}
    assert set(nodes) == set(planned) == set(k8s_lab.nodes)
    for name, node in nodes.items():
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", (name, ready)
        labels = node["metadata"]["labels"]
        assert planned[name]["metadata"]["labels"].items() <= labels.items(), name
        taints = [
            {k: v for k, v in t.items() if k != "timeAdded"}
            for t in node["spec"].get("taints") or []
        ]
        assert sorted(taints, key=str) == sorted(planned[name]["spec"]["taints"], key=str), name
        assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.36.3"
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"] == "containerd://2.4.2"


def test_kubeadm_and_kubelet_configuration_are_the_rendered_ones(k8s_lab):
    rendered = files(render(k8s_lab.expanded))
    for host in k8s_lab.nodes:
        kubeadm = k8s_lab.sh(host, "cat /etc/kubernetes/cluster-plan/kubeadm.yaml").stdout
        assert kubeadm == rendered[f"kubeadm/{host}.yaml"]
        patch = k8s_lab.sh(
            host, "cat '/etc/kubernetes/cluster-plan/patches/kubeletconfiguration+merge.yaml'"
        ).stdout
        assert patch == rendered[f"kubelet/{host}.yaml"]
    config = yaml.safe_load(
        k8s_lab.json("--namespace kube-system get configmap kubeadm-config")["data"][
            "ClusterConfiguration"
        ]
    )
    assert config["imageRepository"] == "10.45.0.1:5000"
    on_cp = k8s_lab.sh("cp01", "cd /etc/kubernetes/cluster-plan/rendered && find . -type f")
    assert sorted(p[2:] for p in on_cp.stdout.split()) == sorted(rendered)


def test_reservation_timers_are_set_for_the_window(k8s_lab):
    timers = k8s_lab.sh(
        "cp01", "systemctl list-timers --all --no-pager 'cluster-plan-reservation-*'"
    ).stdout
    assert "2027-01-05 02:00:00 UTC" in timers and "maintenance-start" in timers
    assert "2027-01-05 04:00:00 UTC" in timers and "maintenance-end" in timers


# --- pods across racks, and a Service by name ----------------------------------------------

BUSYBOX = "lab/busybox:1"


@pytest.fixture(scope="module")
def test_image(k8s_lab) -> str:
    """The node's busybox as an image in the mirror's registry (the registry is read-only:
    its storage is written as the k8s_mirror role writes the bundle's images)."""
    mirror = plan_mirror(render(k8s_lab.expanded).plan)
    assert mirror is not None
    k8s_lab.sh("cp01", "apt-get install -y -q busybox-static >/dev/null")
    k8s_lab.sh("cp01", "python3 - /tmp/busybox.tar", stdin=IMAGE_BUILDER.read_text())
    layout = "/srv/cluster-plan/k8s-mirror/images/lab-busybox"
    k8s_lab.sh(
        "cp01", f"rm -rf {layout} && mkdir -p {layout} && tar -xf /tmp/busybox.tar -C {layout}"
    )
    digest = json.loads(k8s_lab.sh("cp01", f"cat {layout}/index.json").stdout)["manifests"][0][
        "digest"
    ]
    repository, tag = BUSYBOX.split(":")
    images = [
        {"layout": layout, "digest": digest, "places": [{"repository": repository, "tag": tag}]}
    ]
    served = subprocess.run(
        [str(BIN / "ansible"), "-i", str(PLAN), "cp01", "-m",
         "cluster_plan.cluster.k8s_registry_images", "-a",
         json.dumps({"root": "/srv/cluster-plan/k8s-mirror/registry", "images": images})],
        cwd=ROOT, env=k8s_lab.env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert served.returncode == 0, served.stdout + served.stderr
    return f"{mirror.registry}/{BUSYBOX}@{digest}"


def pod(name: str, image: str, labels: dict[str, str], command: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": TEST_NAMESPACE, "labels": labels},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "main", "image": image, "command": ["/bin/busybox", "sh", "-c", command]}
            ],
        },
    }


@pytest.fixture(scope="module")
def pods(k8s_lab, test_image) -> dict[str, dict[str, Any]]:
    """A web server routed by the plan's policy to the training pool (gpu01, rack r1) and a
    client of the default class (cpu01, rack r2), with a Service in front of the server."""
    serve = (
        "mkdir -p /www && hostname > /www/index.html && exec /bin/busybox httpd -f -p 8080 -h /www"
    )
    documents = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEST_NAMESPACE}},
        pod("web", test_image,
            {"app": "web", "cluster-plan.io/workload-class": "training"}, serve),
        pod("client", test_image, {"app": "client"}, "exec /bin/busybox sleep 3600"),
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "web", "namespace": TEST_NAMESPACE},
         "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}},
    ]  # fmt: skip
    k8s_lab.kubectl("apply -f -", stdin=yaml.safe_dump_all(documents))
    k8s_lab.kubectl(
        f"--namespace {TEST_NAMESPACE} wait --for=condition=Ready --timeout=300s pod/web pod/client"
    )
    listed = k8s_lab.json(f"--namespace {TEST_NAMESPACE} get pods")["items"]
    return {p["metadata"]["name"]: p for p in listed}


def rack(lab: K8sLab, node: str) -> str:
    return str(lab.expanded["hosts"][node]["rack"])


def test_a_pod_in_rack_r1_and_one_in_rack_r2_reach_each_other_at_their_pod_addresses(k8s_lab, pods):
    web, client = pods["web"], pods["client"]
    assert (rack(k8s_lab, web["spec"]["nodeName"]), rack(k8s_lab, client["spec"]["nodeName"])) == (
        "r1",
        "r2",
    )
    assert web["spec"]["nodeName"] != client["spec"]["nodeName"]
    web_ip, client_ip = web["status"]["podIP"], client["status"]["podIP"]
    for ip in (web_ip, client_ip):
        assert ip.startswith("10.244."), ip  # the plan's pod network
    got = k8s_lab.kubectl(
        f"--namespace {TEST_NAMESPACE} exec client -- /bin/busybox wget -q -O - http://{web_ip}:8080/"
    )
    assert got.strip() == "web"
    # the other way, and the source address the server sees is the client pod's own
    k8s_lab.kubectl(
        f"--namespace {TEST_NAMESPACE} exec web -- /bin/busybox ping -c 2 -W 5 {client_ip}"
    )
    seen = k8s_lab.kubectl(f"--namespace {TEST_NAMESPACE} logs web")
    assert client_ip in seen or seen == "", seen  # busybox httpd logs nothing without -v


def test_a_service_name_resolves_through_coredns_and_answers(k8s_lab, pods):
    service = k8s_lab.json(f"--namespace {TEST_NAMESPACE} get service web")
    cluster_ip = service["spec"]["clusterIP"]
    name = f"web.{TEST_NAMESPACE}.svc.cluster.local"
    looked_up = k8s_lab.kubectl(
        f"--namespace {TEST_NAMESPACE} exec client -- /bin/busybox nslookup {name}"
    )
    assert cluster_ip in looked_up, looked_up
    got = k8s_lab.kubectl(
        f"--namespace {TEST_NAMESPACE} exec client -- /bin/busybox wget -q -O - http://web/"
    )
    assert got.strip() == "web"


# --- nothing from anywhere but the mirror --------------------------------------------------


def plan_bundle(expanded: dict[str, Any]) -> Bundle:
    """The bundle the plan's mirror serves: its release and what the plan needs besides (the
    device plugin, the training image), as the k8s_mirror role builds it."""
    rendering = render(expanded)
    bundle = built_bundle("1.36", needs=plan_needs(rendering.plan))
    assert bundle is not None, "the converge built the plan's bundle"
    return bundle


def served_digests(lab: K8sLab, test_image: str) -> dict[str, str]:
    """Every image the mirror serves the nodes, by repository (`<mirror>/kube-proxy`): its
    manifest digest, from the bundle's manifest (and the test's own busybox)."""
    bundle = plan_bundle(lab.expanded)
    mirror = plan_mirror(render(lab.expanded).plan)
    assert mirror is not None
    digests = {
        f"{mirror.registry}/{a['mirror_path'].rsplit(':', 1)[0]}": f"sha256:{a['sha256']}"
        for a in bundle.manifest["artifacts"]
        if a["kind"] == "image"
    }
    reference, digest = test_image.split("@")
    digests[reference.rsplit(":", 1)[0]] = digest
    return digests


def repository(reference: str) -> str:
    """`<registry>/<path>` of `<registry>/<path>:<tag>` or `<registry>/<path>@sha256:...`."""
    if "@" in reference:
        return reference.split("@", 1)[0]
    head, _, tail = reference.rpartition(":")
    return head if "/" not in tail else reference


def test_every_image_on_every_node_came_from_the_mirror_with_the_bundles_digest(
    k8s_lab, pods, test_image
):
    digests = served_digests(k8s_lab, test_image)
    registry = next(iter(digests)).split("/", 1)[0]
    for host in k8s_lab.nodes:
        listed = k8s_lab.sh(host, "ctr --namespace k8s.io images list").stdout.splitlines()[1:]
        # REF TYPE DIGEST ...: the CRI names each image by tag, by digest and by its config's
        # digest (`sha256:...`, no repository)
        named = [line.split()[:3:2] for line in listed if not line.startswith("sha256:")]
        assert named, host
        for reference, digest in named:
            assert reference.startswith(f"{registry}/"), (host, reference)
            assert digests.get(repository(reference)) == digest, (host, reference, digest)
        running = k8s_lab.sh(host, "ctr --namespace k8s.io containers list").stdout.splitlines()[1:]
        assert running, host
        for line in running:
            assert line.split()[1].startswith(f"{registry}/"), (host, line)


def test_a_node_asked_for_a_public_registry_asks_the_mirror(k8s_lab):
    node = "cpu01"
    # nothing outside the lab answers: the plan's gateway is no host of the lab
    reach = "import socket; socket.create_connection(('1.1.1.1', 443), timeout=3)"
    assert k8s_lab.sh(node, f'python3 -c "{reach}"', check=False).returncode != 0
    pulled = k8s_lab.sh(
        node,
        "ctr --namespace k8s.io images pull --hosts-dir /etc/containerd/certs.d "
        "registry.k8s.io/pause:3.10.2 2>&1",
    ).stdout
    assert "registry.k8s.io/pause:3.10.2" in pulled
    listed = k8s_lab.sh(
        node, "ctr --namespace k8s.io images list name==registry.k8s.io/pause:3.10.2"
    )
    bundle = plan_bundle(k8s_lab.expanded)
    assert f"sha256:{bundle.artifact('pause', 'image')['sha256']}" in listed.stdout
    k8s_lab.sh(node, "ctr --namespace k8s.io images remove registry.k8s.io/pause:3.10.2")
    tag = f"never-served-{os.getpid()}-{time.monotonic_ns()}"
    missing = k8s_lab.sh(
        node,
        "ctr --namespace k8s.io images pull --hosts-dir /etc/containerd/certs.d "
        f"docker.io/library/nginx:{tag} 2>&1",
        check=False,
    )
    assert missing.returncode != 0
    assert f"docker.io/library/nginx:{tag}: not found" in missing.stdout, missing.stdout
    # the "not found" is the mirror's: its registry logged the node asking for that tag
    address = k8s_lab.expanded["hosts"][node]["interfaces"]["compute"]["address"]
    logged = f"journalctl --unit docker-registry --no-pager --output cat | grep -F '/{tag}?'"
    asked = k8s_lab.sh(  # journald may take a moment to have the line
        "cp01", f"for i in 1 2 3 4 5 6 7 8 9 10; do {logged} && break; sleep 1; done"
    ).stdout
    assert f"{address} - - " in asked and 'ns=docker.io HTTP/1.1" 404' in asked, asked


# --- accelerators: the device plugin under the lab's kubelets ------------------------------

DEVICES_NAMESPACE = "lab-devices"
NVIDIA_DEVICE = re.compile(r"nvidia[0-9]+")


def until(what: str, probe: Any, timeout: float = 120, interval: float = 1) -> Any:
    """probe() once it is truthy; fails naming `what` and the last value after `timeout` s."""
    value = wait_until(probe, bool, timeout, interval)
    assert value, f"{what}: not after {timeout:.0f} s"
    return value


def device_pod(name: str, image: str, namespace: str, gpus: int) -> dict[str, Any]:
    """A pod asking for `gpus` NVIDIA GPUs and nothing else: the routing policy sends it to
    the class that needs GPUs and gives it RuntimeClass `nvidia`."""
    spec = pod(name, image, {}, "exec /bin/busybox sleep 3600")
    spec["metadata"]["namespace"] = namespace
    spec["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    return spec


def scheduling(lab: K8sLab, namespace: str, name: str) -> dict[str, Any] | None:
    """The pod's PodScheduled condition once the scheduler has decided it is unschedulable."""
    got = lab.json(f"--namespace {namespace} get pod {name}")
    conditions = got["status"].get("conditions") or []
    condition = next((c for c in conditions if c["type"] == "PodScheduled"), None)
    if condition and condition["status"] == "False" and condition.get("reason") == "Unschedulable":
        return {**condition, "phase": got["status"]["phase"]}
    return None


@pytest.fixture(scope="module")
def gpu_pods(k8s_lab, test_image) -> dict[str, dict[str, Any]]:
    """Two pods asking for one GPU each and one asking for more than the GPU node has."""
    started = time.monotonic()
    documents = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DEVICES_NAMESPACE}},
        device_pod("gpu-a", test_image, DEVICES_NAMESPACE, 1),
        device_pod("gpu-b", test_image, DEVICES_NAMESPACE, 1),
        device_pod("gpu-too-many", test_image, DEVICES_NAMESPACE, 3),
    ]
    k8s_lab.kubectl("apply -f -", stdin=yaml.safe_dump_all(documents))
    k8s_lab.kubectl(
        f"--namespace {DEVICES_NAMESPACE} wait --for=condition=Ready --timeout=300s "
        "pod/gpu-a pod/gpu-b"
    )
    listed = k8s_lab.json(f"--namespace {DEVICES_NAMESPACE} get pods")["items"]
    print(f"\nGPU pods running: {time.monotonic() - started:.0f} s")
    return {p["metadata"]["name"]: p for p in listed}


def test_the_nodes_offer_the_plans_accelerators(k8s_lab):
    plan = render(k8s_lab.expanded).plan
    replicas = {c.resource: c.replicas for c in served_classes(plan)}
    wanted = {
        node: {r: str(n * replicas.get(r, 1)) for r, n in node_capacity(plan.host(node)).items()}
        for node in k8s_lab.nodes
    }
    assert wanted["gpu01"] == {"nvidia.com/gpu": "2"}  # the plan has no gpu_sharing
    assert wanted["infer01"] == {"cluster-plan.io/tpu": "4"}

    def offered() -> dict[str, dict[str, str]] | None:
        nodes = k8s_lab.json("get nodes")["items"]
        got = {
            n["metadata"]["name"]: {
                r: v
                for r, v in n["status"]["allocatable"].items()
                if r.startswith(("nvidia.com/", "cluster-plan.io/"))
            }
            for n in nodes
        }
        return got if got == wanted else None

    # the plugin registers once its pod runs, which may be after its node turned Ready
    until(f"allocatable devices {wanted}", offered)


def visible_devices(lab: K8sLab, name: str) -> tuple[list[str], str]:
    """The NVIDIA device nodes in the pod's container and its NVIDIA_VISIBLE_DEVICES."""
    listed = lab.kubectl(f"--namespace {DEVICES_NAMESPACE} exec {name} -- /bin/busybox ls /dev")
    env = lab.kubectl(f"--namespace {DEVICES_NAMESPACE} exec {name} -- /bin/busybox env")
    visible = [v for v in env.splitlines() if v.startswith("NVIDIA_VISIBLE_DEVICES=")]
    return [d for d in listed.split() if NVIDIA_DEVICE.fullmatch(d)], ",".join(visible)


def test_a_pod_asking_for_a_gpu_runs_on_the_gpu_node_and_sees_exactly_one(k8s_lab, gpu_pods):
    plan = render(k8s_lab.expanded).plan
    assert plan.gpu_sharing.get("mode", "none") == "none"  # a GPU per pod
    seen = {}
    for name in ("gpu-a", "gpu-b"):
        spec = gpu_pods[name]["spec"]
        assert spec["nodeName"] == "gpu01", name
        assert spec["runtimeClassName"] == "nvidia", name  # the routing policy's, as on a cluster
        devices, env = visible_devices(k8s_lab, name)
        assert len(devices) == 1, (name, devices)
        assert env == f"NVIDIA_VISIBLE_DEVICES={devices[0].removeprefix('nvidia')}", (name, env)
        seen[name] = devices[0]
    assert seen["gpu-a"] != seen["gpu-b"], seen


def test_a_pod_asking_for_more_gpus_than_a_node_has_waits_with_the_schedulers_reason(
    k8s_lab, gpu_pods
):
    condition = until(
        "gpu-too-many unschedulable",
        lambda: scheduling(k8s_lab, DEVICES_NAMESPACE, "gpu-too-many"),
        timeout=60,
    )
    assert condition["phase"] == "Pending"
    assert "Insufficient nvidia.com/gpu" in condition["message"], condition


# --- teams: namespaces, RBAC and quotas, by the API server ---------------------------------


def as_user(lab: K8sLab, user: str, arguments: str, stdin: str) -> subprocess.CompletedProcess[str]:
    """kubectl as the team's user (admin.conf's identity may impersonate anyone)."""
    return lab.sh(
        "cp01",
        f"{KUBECTL} --as {user} --as-group system:authenticated {arguments} 2>&1",
        stdin=stdin,
        check=False,
    )


def team_members(lab: K8sLab, team: str) -> list[str]:
    return [u["name"] for u in lab.expanded["teams"][team]["users"]]


def test_a_team_member_creates_pods_in_its_teams_namespace_and_no_other(k8s_lab, test_image):
    (alice,) = team_members(k8s_lab, "vision")
    assert "serving" in k8s_lab.expanded["teams"] and alice not in team_members(k8s_lab, "serving")
    mine = pod("alice-own", test_image, {}, "exec /bin/busybox sleep 3600")
    mine["metadata"]["namespace"] = "vision"
    created = as_user(k8s_lab, alice, "create -f -", yaml.safe_dump(mine))
    assert created.returncode == 0, created.stdout
    assert k8s_lab.json("--namespace vision get pod alice-own")["metadata"]["name"] == "alice-own"
    theirs = {
        **mine,
        "metadata": {**mine["metadata"], "name": "alice-other", "namespace": "serving"},
    }
    refused = as_user(k8s_lab, alice, "create -f -", yaml.safe_dump(theirs))
    assert refused.returncode != 0
    assert "Forbidden" in refused.stdout and f'User "{alice}" cannot create' in refused.stdout, (
        refused.stdout
    )


def test_a_pod_over_the_teams_gpu_quota_is_refused_by_the_quota(k8s_lab, test_image):
    (alice,) = team_members(k8s_lab, "vision")
    quota = int(k8s_lab.expanded["teams"]["vision"]["limits"]["gpus"])
    over = device_pod("alice-gpus", test_image, "vision", quota + 1)
    refused = as_user(k8s_lab, alice, "create -f -", yaml.safe_dump(over))
    assert refused.returncode != 0
    assert "exceeded quota: team-devices" in refused.stdout, refused.stdout
    assert f"limited: requests.nvidia.com/gpu={quota}" in refused.stdout, refused.stdout


# --- a reservation's window, on the timers the role installed ------------------------------

RESERVATION = "maintenance"
RESERVATION_NAMESPACE = "lab-reservation"
TIMER_DROP_IN = "/run/systemd/system/cluster-plan-reservation-{name}-{action}.timer.d/lab.conf"


def fire_timer_soon(lab: K8sLab, action: str, seconds: int) -> None:
    """Move the role's timer of `action` (start, end) to `seconds` from now, with a drop-in
    under /run; the service it starts is the role's, unchanged."""
    timer = f"cluster-plan-reservation-{RESERVATION}-{action}.timer"
    drop_in = TIMER_DROP_IN.format(name=RESERVATION, action=action)
    at = lab.sh("cp01", f"date -u -d '+{seconds} seconds' '+%Y-%m-%d %H:%M:%S'").stdout.strip()
    lab.sh(
        "cp01",
        f"mkdir -p {os.path.dirname(drop_in)} && "
        f"printf '[Timer]\\nOnCalendar=\\nOnCalendar={at} UTC\\nAccuracySec=1s\\n' > {drop_in} && "
        f"systemctl daemon-reload && systemctl restart {timer}",
    )


def reservation_taints(lab: K8sLab, key: str) -> dict[str, list[dict[str, Any]]]:
    nodes = lab.json("get nodes")["items"]
    return {
        n["metadata"]["name"]: [
            {k: v for k, v in t.items() if k != "timeAdded"}
            for t in n["spec"].get("taints") or []
            if t["key"] == key
        ]
        for n in nodes
    }


def tainted_as(lab: K8sLab, key: str, wanted: dict[str, list[Any]]) -> Any:
    """A probe for `until`: whether the nodes carry the taints of `key` that `wanted` says."""
    return lambda: reservation_taints(lab, key) == wanted


def test_a_reservation_takes_its_nodes_out_for_its_window_and_gives_them_back(k8s_lab, test_image):
    started = time.monotonic()
    (window,) = render(k8s_lab.expanded).reservations
    assert window["name"] == RESERVATION and window["nodes"] == ["gpu01"]
    taint = window["taint"]
    untainted: dict[str, list[Any]] = {node: [] for node in k8s_lab.nodes}
    assert reservation_taints(k8s_lab, taint["key"]) == untainted
    waiting = pod("in-window", test_image, {"cluster-plan.io/workload-class": "training"},
                  "exec /bin/busybox sleep 3600")  # fmt: skip
    waiting["metadata"]["namespace"] = RESERVATION_NAMESPACE
    try:
        fire_timer_soon(k8s_lab, "start", 3)
        during = {n: [taint] if n in window["nodes"] else [] for n in k8s_lab.nodes}
        until("the window's taint", tainted_as(k8s_lab, taint["key"], during), 60)
        # a pod for the reserved pool's nodes, not of the reservation, waits out the window
        namespace = {"apiVersion": "v1", "kind": "Namespace",
                     "metadata": {"name": RESERVATION_NAMESPACE}}  # fmt: skip
        k8s_lab.kubectl("apply -f -", stdin=yaml.safe_dump_all([namespace, waiting]))
        condition = until(
            "in-window unschedulable",
            lambda: scheduling(k8s_lab, RESERVATION_NAMESPACE, "in-window"),
            timeout=60,
        )
        assert condition["phase"] == "Pending"
        # the scheduler (1.36) counts the nodes with untolerated taints without naming the
        # taints: the reservation's is the only one on its nodes that the pod, routed to their
        # pool and tolerating the pool's taint, does not tolerate
        assert "untolerated taint" in condition["message"], condition
        spec = k8s_lab.json(f"--namespace {RESERVATION_NAMESPACE} get pod in-window")["spec"]
        assert spec["nodeSelector"] == {"cluster-plan.io/pool": "gpu"}
        assert not [t for t in spec["tolerations"] if t.get("key") == taint["key"]]
        fire_timer_soon(k8s_lab, "end", 3)
        until("the taint lifted", tainted_as(k8s_lab, taint["key"], untainted), 60)
        k8s_lab.kubectl(
            f"--namespace {RESERVATION_NAMESPACE} wait --for=condition=Ready --timeout=120s "
            "pod/in-window"
        )
        placed = k8s_lab.json(f"--namespace {RESERVATION_NAMESPACE} get pod in-window")
        assert placed["spec"]["nodeName"] in window["nodes"]
        # the role's services did it, started by their timers
        for action, verb in (("start", "taint"), ("end", "untaint")):
            unit = f"cluster-plan-reservation-{RESERVATION}-{action}"
            shown = k8s_lab.sh(
                "cp01", f"systemctl show {unit}.service -p Result -p ExecMainStatus -p TriggeredBy"
            ).stdout
            assert "Result=success" in shown and f"TriggeredBy={unit}.timer" in shown, shown
            journal = k8s_lab.sh(
                "cp01", f"journalctl --unit {unit}.service --no-pager --output cat"
            ).stdout
            assert f"reservation {RESERVATION}: {verb} its nodes" in journal, journal
    finally:
        drop_ins = " ".join(
            TIMER_DROP_IN.format(name=RESERVATION, action=a) for a in ("start", "end")
        )
        units = f"cluster-plan-reservation-{RESERVATION}"
        k8s_lab.sh(  # and the window closed whatever failed: the role's end lifts the taint
            "cp01",
            f"rm -f {drop_ins} && systemctl daemon-reload && "
            f"systemctl restart {units}-start.timer {units}-end.timer && "
            f"systemctl start {units}-end.service",
        )
        k8s_lab.kubectl(
            f"--namespace {RESERVATION_NAMESPACE} delete pod in-window --ignore-not-found"
        )
    # the timers are the plan's window again
    test_reservation_timers_are_set_for_the_window(k8s_lab)
    print(f"\nreservation window in the lab: {time.monotonic() - started:.0f} s")


# --- monitoring: a kubelet stopped is a node NotReady, alerted, then resolved -------------

NOT_READY = "KubernetesNodeNotReady"


def monitoring_get(lab: K8sLab, url: str) -> Any:
    """A JSON answer of the lab's Prometheus or Alertmanager, asked from inside cp01."""
    script = (
        "import sys, urllib.request; "
        "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())"
    )
    return json.loads(lab.sh("cp01", f"python3 -c {shlex.quote(script)} {shlex.quote(url)}").stdout)


def not_ready_alerts(lab: K8sLab, node: str) -> list[dict[str, Any]]:
    """Prometheus's KubernetesNodeNotReady alerts of `node`, pending or firing."""
    (server,) = lab.expanded["groups"]["monitoring_server"]
    address = lab.expanded["hosts"][server]["address"]
    alerts = monitoring_get(lab, f"http://{address}:9090/api/v1/alerts")["data"]["alerts"]
    return [
        a for a in alerts
        if a["labels"].get("alertname") == NOT_READY and a["labels"].get("node") == node
    ]  # fmt: skip


def routed_alerts(lab: K8sLab, node: str) -> list[dict[str, Any]]:
    """Alertmanager's KubernetesNodeNotReady alerts of `node` (it listens on loopback)."""
    alerts = monitoring_get(lab, "http://127.0.0.1:9093/api/v2/alerts")
    return [
        a for a in alerts
        if a["labels"].get("alertname") == NOT_READY and a["labels"].get("node") == node
    ]  # fmt: skip


def test_a_stopped_kubelet_fires_node_not_ready_then_resolves(k8s_lab):
    victim = "cpu01"
    assert not_ready_alerts(k8s_lab, victim) == []
    started = time.monotonic()
    k8s_lab.sh(victim, "systemctl stop kubelet")
    try:
        alerts = wait_until(
            lambda: not_ready_alerts(k8s_lab, victim),
            lambda found: any(a["state"] == "firing" for a in found),
            300,
        )
        fired_s = time.monotonic() - started
        assert [a["state"] for a in alerts] == ["firing"], alerts
        routed = wait_until(lambda: routed_alerts(k8s_lab, victim), bool, 60)
        assert [r["name"] for a in routed for r in a["receivers"]] == ["ops"], routed
    finally:
        k8s_lab.sh(victim, "systemctl start kubelet")
    back = time.monotonic()
    left = wait_until(lambda: not_ready_alerts(k8s_lab, victim), lambda found: found == [], 300)
    assert left == [], left
    ready = k8s_lab.json(f"get node {victim}")["status"]["conditions"]
    assert next(c for c in ready if c["type"] == "Ready")["status"] == "True"
    print(
        f"\n{NOT_READY} on {victim}: firing {fired_s:.0f} s after its kubelet stopped, "
        f"resolved {time.monotonic() - back:.0f} s after it started again"
    )


# --- day 2: a worker added, trained on, replaced past a disruption budget, removed ---------

DAY2_NAMESPACE = "lab-day2"
TEAM = "vision"  # the team whose class is the training class
ADDED = "gpu02"


def change(
    lab: K8sLab, journal: Path, old: Path, new: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "cluster-plan"), "change", str(old), str(new), "--yes", "--transport", "lab",
         "--journal-dir", str(journal), "--check-timeout", "180", *extra],
        cwd=ROOT, env=lab.env(), capture_output=True, text=True, timeout=1800, check=False,
    )  # fmt: skip


def said(run: subprocess.CompletedProcess[str]) -> str:
    return run.stdout[-5000:] + run.stderr[-2000:]


def node_names(lab: K8sLab) -> set[str]:
    return {n["metadata"]["name"] for n in lab.json("get nodes")["items"]}


def training_acceptance(lab: K8sLab, plan: Path, output: Path) -> dict[str, Any]:
    """`cluster-plan acceptance --phases training` of the plan: its training Job through the
    API server, judged into the report as the Slurm job is."""
    run = subprocess.run(
        [str(BIN / "cluster-plan"), "acceptance", str(plan), "--transport", "lab",
         "--no-history", "--phases", "training", "--output-dir", str(output)],
        cwd=ROOT, env=lab.env(), capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert run.returncode == 0, said(run)
    report: dict[str, Any] = json.loads((output / "acceptance.json").read_text())
    return report


def training_image_bytes(expanded: dict[str, Any]) -> tuple[str, int]:
    """The training image's reference on the nodes and the size of its layers."""
    bundle = plan_bundle(expanded)
    layout = bundle.image_layout(TRAINING)
    index = json.loads((layout / "index.json").read_text())
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / index["manifests"][0]["digest"][7:]).read_text())
    (image,) = [o for o in render(expanded).examples["training-job"] if o["kind"] == "Job"]
    reference = image["spec"]["template"]["spec"]["containers"][0]["image"]
    return reference, sum(int(layer["size"]) for layer in manifest["layers"])


def held_workload(image: str) -> list[dict[str, Any]]:
    """One replica on gpu02 and a budget that allows no disruption of it."""
    labels = {"app": "held", "cluster-plan.io/workload-class": "training"}
    template = pod("held", image, labels, "exec /bin/busybox sleep 3600")
    template["spec"]["nodeSelector"] = {"kubernetes.io/hostname": ADDED}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": DAY2_NAMESPACE}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "held", "namespace": DAY2_NAMESPACE},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "held"}},
                  "template": {"metadata": {"labels": labels}, "spec": template["spec"]}}},
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
         "metadata": {"name": "held-budget", "namespace": DAY2_NAMESPACE},
         "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "held"}}}},
    ]  # fmt: skip


def test_a_worker_is_added_trained_on_replaced_past_its_budget_and_removed(
    k8s_lab, test_image, tmp_path
):
    grown = write_plan(tmp_path / "grown", grow_gpu, base=PLAN, name="k8s.yml")
    journal = tmp_path / "journal"
    seconds: dict[str, float] = {}
    assert ADDED not in node_names(k8s_lab)
    try:
        # -- add: gpu02 boots bare, converges, joins through a token the role makes on cp01
        started = time.monotonic()
        added = change(k8s_lab, journal, PLAN, grown)
        seconds["add (boot, converge, join)"] = time.monotonic() - started
        assert added.returncode == 0, said(added)
        assert f"1. add {ADDED}" in added.stdout, said(added)
        assert f"{ADDED}: healthy" in added.stdout, said(added)
        node = k8s_lab.json(f"get node {ADDED}")
        labels = render(load_expanded(grown)).objects["40-nodes"]
        (planned,) = [o for o in labels if o["metadata"]["name"] == ADDED]
        assert planned["metadata"]["labels"].items() <= node["metadata"]["labels"].items()
        assert not node["spec"].get("unschedulable"), node["spec"]
        until(f"{ADDED} offers its GPUs", lambda: k8s_lab.json(f"get node {ADDED}")["status"][
            "allocatable"].get("nvidia.com/gpu") == "2")  # fmt: skip
        # -- train: the plan's Job, one rank on each node of the training pool, through the
        # API server (acceptance's run); the team's user may submit it in the team's namespace
        objects = yaml.safe_dump_all(render(load_expanded(grown)).examples["training-job"])
        (alice,) = team_members(k8s_lab, TEAM)
        submitted = as_user(k8s_lab, alice, f"--namespace {TEAM} apply --dry-run=server -f -",
                            objects)  # fmt: skip
        assert submitted.returncode == 0 and "(server dry run)" in submitted.stdout, submitted
        # the image comes from the mirror, past the node network's scaled rate as the package
        # proxy's files do (gpu01 forgets it first, in case an earlier run left it there)
        reference, size = training_image_bytes(load_expanded(grown))
        k8s_lab.sh("gpu01", f"ctr --namespace k8s.io images rm {reference} >/dev/null 2>&1; true")
        (port,) = [p for p in wiring(k8s_lab.expanded).ports
                   if p.host == "gpu01" and p.network == "compute"]  # fmt: skip
        fabric_ns = for_plan(k8s_lab.expanded).fabric_ns
        before = class_bytes(fabric_ns, port.switch_port)
        started = time.monotonic()
        report = training_acceptance(k8s_lab, grown, tmp_path / "acceptance")
        seconds["training job"] = time.monotonic() - started
        after = class_bytes(fabric_ns, port.switch_port)
        bypassed, bucketed = (after[c] - before[c] for c in ("1:1", "1:2"))
        assert bypassed >= size > 10 * bucketed, (size, before, after)
        (trained,) = report["collectives"]["training"]
        assert trained["passed"] and trained["scheduler"] == "kubernetes", trained
        # the nodes its pods ran on, as the API server had them
        assert trained["ranks"] == 2 and trained["nodes"] == ["gpu01", ADDED], trained
        assert len(set(trained["hosts"])) == 2, trained  # one rank in each pod
        assert trained["last_loss"] < trained["first_loss"] / 10, trained["losses"]
        assert trained["identical_weights"] and len(set(trained["weights_sha256"])) == 1
        html = (tmp_path / "acceptance" / "acceptance.html").read_text()
        assert "Training through Kubernetes" in html and "training loss of pool gpu" in html
        # -- replace: the drain waits for the budget, within its bound, and says so; --force
        # deletes the pod; gpu02 is re-provisioned bare and joins again
        k8s_lab.kubectl("apply -f -", stdin=yaml.safe_dump_all(held_workload(test_image)))
        k8s_lab.kubectl(f"--namespace {DAY2_NAMESPACE} rollout status deployment/held "
                        "--timeout=180s")  # fmt: skip
        started = time.monotonic()
        held = change(k8s_lab, journal, grown, grown, "--replace", ADDED, "--drain-timeout", "15")
        seconds["drain refused by the budget"] = time.monotonic() - started
        assert held.returncode == 1, said(held)
        assert "held-budget" in held.stdout and "--force" in held.stdout, said(held)
        assert k8s_lab.json(f"get node {ADDED}")["spec"].get("unschedulable") is True
        started = time.monotonic()
        replaced = change(k8s_lab, journal, grown, grown, "--replace", ADDED, "--force")
        seconds["replace (forced drain, re-provision, join)"] = time.monotonic() - started
        assert replaced.returncode == 0, said(replaced)
        assert "done before: drain" in replaced.stdout and f"{ADDED}: healthy" in replaced.stdout
        node = k8s_lab.json(f"get node {ADDED}")
        assert not node["spec"].get("unschedulable"), node["spec"]
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True", ready
        k8s_lab.kubectl(f"--namespace {DAY2_NAMESPACE} rollout status deployment/held "
                        "--timeout=180s")  # fmt: skip
        k8s_lab.kubectl(f"delete namespace {DAY2_NAMESPACE} --wait=true --timeout=120s")
        # -- remove: drained, deleted from the API, powered off
        started = time.monotonic()
        removed = change(k8s_lab, journal, grown, PLAN)
        seconds["remove"] = time.monotonic() - started
        assert removed.returncode == 0, said(removed)
        assert f"remove {ADDED}" in removed.stdout, said(removed)
        assert node_names(k8s_lab) == set(k8s_lab.nodes)
        assert ADDED not in running_hosts(grown)
    finally:
        print("\nKubernetes day 2 in the lab: "
              + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items()))  # fmt: skip
