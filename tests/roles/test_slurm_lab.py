"""The plan's scheduling policy, proven on the lab after `site.yml`.

The lab is the session lab of `support.lab_session` (id `test`, brought up fresh
and taken down at the end of the session; it skips with the reason when not root or a host
tool is missing), converged once per session by its `converged_lab` fixture, which every
lab test module shares. Every command runs inside lab namespaces: on a node through
`cluster-plan lab run` (nsenter), or in a namespace this module makes and removes, cabled to
the lab's own mgmt bridge. Nothing is sent from the machine's own namespace.

CLUSTER_PLAN_LAB_CONVERGED=1 uses the lab already running under $CLUSTER_PLAN_LAB_ID as it is
(no session lab, no converge, the tests reading converge output skip): quick iterations.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import lab_helpers
import pytest
from lab_helpers import (
    OUTSIDE,
    on_node,
    ssh_reachable,
)

# The shared session fixtures (`lab`, `converged_lab`), requested by `slurm` below.
from support.lab_session import FULL_RUN, Converged, converged_lab, lab  # noqa: F401
from support.playbooks import changed_lines, recap

pytestmark = pytest.mark.lab


@dataclass
class SlurmLab:
    expanded: dict[str, Any]
    converged: Converged

    def sh(self, host: str, script: str, timeout: float = 180) -> str:
        result = on_node(host, script, timeout=timeout)
        assert result.returncode == 0, f"{host}: {script}\n{result.stdout}\n{result.stderr}"
        return result.stdout

    def group(self, name: str) -> list[str]:
        return list(self.expanded["groups"].get(name, []))


@pytest.fixture
def slurm(converged_lab: Converged) -> SlurmLab:  # noqa: F811
    converged_lab.require_converged()
    return SlurmLab(converged_lab.expanded, converged_lab)


def job_env(cluster: SlurmLab, options: str, command: str = "true") -> dict[str, str]:
    """srun OPTIONS on the controller; returns the job's host, partition and GPUs."""
    out = cluster.sh(
        cluster.group("slurm_controller")[0],
        f"cd /tmp && timeout 120 srun -t 1 {options} sh -c "
        "'echo host=$(hostname) partition=$SLURM_JOB_PARTITION "
        f"gpus=$CUDA_VISIBLE_DEVICES; {command}'",
    )
    line = next(ln for ln in out.splitlines() if ln.startswith("host="))
    return dict(part.split("=", 1) for part in line.split())


def squeue(cluster: SlurmLab, job: str) -> dict[str, str]:
    out = cluster.sh(cluster.group("slurm_controller")[0], f"squeue -h -j {job} -o '%T|%N|%P'")
    state, nodes, partition = ([*out.strip().split("|"), "", "", ""])[:3]
    return {"state": state, "nodes": nodes, "partition": partition}


def wait_running(cluster: SlurmLab, job: str, timeout: float = 90) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        info = squeue(cluster, job)
        if info["state"] == "RUNNING" or time.monotonic() > deadline:
            return info
        time.sleep(2)


def sbatch(cluster: SlurmLab, options: str) -> str:
    controller = cluster.group("slurm_controller")[0]
    return lab_helpers.sbatch(controller, options, controller)


def scancel(cluster: SlurmLab, *jobs: str) -> None:
    on_node(cluster.group("slurm_controller")[0], "scancel " + " ".join(jobs))


def expand_nodes(text: str) -> list[str]:
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,]+)", text):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            names += [f"{prefix}{n:0{len(low)}d}" for n in range(int(low), int(high or low) + 1)]
    return names


# --- converge --------------------------------------------------------------------------


def test_site_converges_without_failures(slurm: SlurmLab):
    first, _ = slurm.converged.require_runs()
    rows = recap(first.result.stdout)
    assert rows, first.result.stdout[-3000:]
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in rows.values()), rows
    print(f"first converge {first.seconds:.0f}s")


def test_second_run_changes_nothing_on_any_host(slurm: SlurmLab):
    _, second = slurm.converged.require_runs()
    assert second.ok, second.result.stdout[-3000:]
    rows = recap(second.result.stdout)
    assert set(rows) >= set(slurm.expanded["hosts"])
    changed = {h: r["changed"] for h, r in rows.items() if r["changed"]}
    assert changed == {}, "\n".join(changed_lines(second.result.stdout))


def test_munge_key_is_shared_private_and_never_printed(slurm: SlurmLab):
    controller = slurm.group("slurm_controller")[0]
    key_b64 = slurm.sh(controller, "base64 -w0 /etc/munge/munge.key").strip()
    key = base64.b64decode(key_b64)
    assert len(key) >= 32
    slurm.converged.require_runs()
    for host in [*slurm.group("slurm_compute"), controller]:
        stat = slurm.sh(
            host, "stat -c '%a %U' /etc/munge/munge.key && sha256sum < /etc/munge/munge.key"
        ).split()
        assert stat[:2] == ["400", "munge"], host
        assert stat[2] == slurm.sh(controller, "sha256sum < /etc/munge/munge.key").split()[0]
    for output in slurm.converged.outputs:
        assert key_b64 not in output
        assert key.hex()[:32] not in output.replace(" ", "").lower()
        printable = key.decode("latin-1")
        assert printable[:24] not in output


# --- partitions and routing --------------------------------------------------------------


def test_one_partition_per_workload_class_and_every_node_idle(slurm: SlurmLab):
    out = slurm.sh(slurm.group("slurm_controller")[0], "sinfo -h -N -o '%N %R %t'")
    rows = [ln.split() for ln in out.splitlines() if ln.strip()]
    partitions = {p.rstrip("*") for _, p, _ in rows}
    classes = set(slurm.expanded["scheduler"]["workload_classes"])
    assert partitions - {"all"} == classes
    assert {n for n, _, _ in rows} == set(slurm.group("slurm_compute"))
    assert {s for _, _, s in rows} == {"idle"}, rows


def test_gpu_job_lands_in_the_gpu_pool_with_its_gpu_visible(slurm: SlurmLab):
    job = job_env(slurm, "--gres=gpu:1")
    assert job["host"] in slurm.group("pool_gpu")
    assert job["partition"] == "training"
    assert job["gpus"] in {"0", "1"}


def test_plain_job_lands_in_the_general_class_nodes(slurm: SlurmLab):
    job = job_env(slurm, "")
    general = slurm.expanded["scheduler"]["workload_classes"]["general"]["pool"]
    assert job["host"] in slurm.group(f"pool_{general}")
    assert job["partition"] == "general"


def test_inference_job_lands_in_the_accelerator_pool(slurm: SlurmLab):
    job = job_env(slurm, "--comment=class:inference")
    assert job["host"] in slurm.group("pool_accel")
    assert job["partition"] == "inference"


def test_unknown_class_is_rejected_with_the_known_ones(slurm: SlurmLab):
    result = on_node(
        slurm.group("slurm_controller")[0],
        "cd /tmp && timeout 60 srun -t 1 --comment=class:quantum true",
    )
    assert result.returncode != 0
    assert "unknown workload class 'quantum'" in result.stdout + result.stderr


# --- data locality -----------------------------------------------------------------------


def dataset_racks_hosts(cluster: SlurmLab, dataset: str, pool: str) -> tuple[list[str], list[str]]:
    racks = cluster.expanded["scheduler"]["datasets"][dataset]["racks"]
    hosts = cluster.expanded["hosts"]
    holders = [h for h in cluster.group(f"pool_{pool}") if hosts[h]["rack"] in racks]
    others = [h for h in cluster.group(f"pool_{pool}") if h not in holders]
    return holders, others


def test_dataset_job_prefers_the_racks_holding_the_data(slurm: SlurmLab):
    holders, others = dataset_racks_hosts(slurm, "imagenet", "gpu")
    assert holders and others
    # Control: a preference does steer placement here (the other rack when asked for it).
    other_rack = slurm.expanded["hosts"][others[0]]["rack"]
    control = job_env(slurm, f"-p training --prefer=rack_{other_rack}")
    assert control["host"] in others
    job = job_env(slurm, "--comment='class:training dataset:imagenet'")
    assert job["host"] in holders


def test_dataset_job_runs_elsewhere_when_the_data_racks_are_busy(slurm: SlurmLab):
    holders, others = dataset_racks_hosts(slurm, "imagenet", "gpu")
    blockers = [
        sbatch(slurm, f"-p training -w {h} --exclusive -t 5 --wrap 'sleep 300'") for h in holders
    ]
    try:
        for blocker in blockers:
            assert wait_running(slurm, blocker)["state"] == "RUNNING"
        job = job_env(slurm, "--comment='class:training dataset:imagenet'")
        assert job["host"] in others
    finally:
        scancel(slurm, *blockers)


# --- topology ------------------------------------------------------------------------------


def test_two_node_job_with_switches_1_stays_under_one_access_switch(slurm: SlurmLab):
    """Weight, then node order alone would take the two lightest nodes, which sit under two
    access switches in the lab plan; --switches=1 must keep the job under one."""
    import slurm_policy

    hosts = [slurm.expanded["hosts"][h] for h in slurm.group("slurm_compute")]
    by_weight = sorted(
        slurm_policy.slurm_node_records(hosts), key=lambda n: (n["weight"], n["name"])
    )
    naive = {slurm.expanded["hosts"][n["name"]]["access_switch"] for n in by_weight[:2]}
    assert len(naive) == 2, "the lab plan no longer makes this test discriminate"
    job = sbatch(slurm, "-p all -N2 --switches=1 -t 2 --wrap 'sleep 30'")
    try:
        info = wait_running(slurm, job)
    finally:
        scancel(slurm, job)
    assert info["state"] == "RUNNING", info
    nodes = expand_nodes(info["nodes"])
    switches = {slurm.expanded["hosts"][n]["access_switch"] for n in nodes}
    assert len(nodes) == 2 and len(switches) == 1, info


# --- firewall ------------------------------------------------------------------------------


# Each service's port, the network of the address it answers on, and the plan's group of the
# hosts that run it: from inside the plan's networks it is open on exactly those hosts.
SERVICE_PORTS = [
    ("ssh", 22, "mgmt", "all"),
    ("slurmctld", 6817, "mgmt", "slurm_controller"),
    ("slurmd", 6818, "mgmt", "slurm_compute"),
    ("slurmdbd", 6819, "mgmt", "slurmdbd"),
    ("ceph mon v2", 3300, "storage", "ceph_mon"),
    ("ceph mon v1", 6789, "storage", "ceph_mon"),
    ("nfs", 2049, "compute", "nfs_server"),
]


@pytest.fixture
def outside_all_networks(slurm: SlurmLab) -> Iterator[str]:
    legs = tuple(n for n in ("compute", "storage") if n in slurm.expanded["networks"])
    with lab_helpers.outside_namespace(slurm.expanded, legs=legs) as ns:
        yield ns


def _address(slurm: SlurmLab, host: str, network: str) -> str | None:
    iface = slurm.expanded["hosts"][host]["interfaces"].get(network)
    return str(iface["address"]) if iface else None


def _scan_inside(slurm: SlurmLab) -> dict[tuple[str, int], str]:
    """Every (node, port) of SERVICE_PORTS, from another node on the port's network."""
    by_scanner: dict[str, list[tuple[str, int]]] = {}
    hosts = list(slurm.expanded["hosts"])
    for _, port, network, _ in SERVICE_PORTS:
        on_net = [h for h in hosts if _address(slurm, h, network)]
        for host in on_net:
            scanner = next(h for h in on_net if h != host)
            by_scanner.setdefault(scanner, []).append((_address(slurm, host, network), port))
    found: dict[tuple[str, int], str] = {}
    for scanner, targets in by_scanner.items():
        found |= lab_helpers.scan_from_node(scanner, targets)
    return found


def test_every_node_scanned_from_outside_shows_only_ssh_and_from_inside_the_plans_ports(
    slurm: SlurmLab, outside_all_networks: str
):
    ns = outside_all_networks
    hosts = list(slurm.expanded["hosts"])
    groups = slurm.expanded["groups"]
    # SSH answers from outside: the path works, so a closed port is the firewall's doing.
    # (Retried: a node may still hold the gateway's MAC from an earlier outside namespace.)
    for host in hosts:
        assert ssh_reachable(ns, slurm.expanded["hosts"][host]["address"], OUTSIDE), host
    outside_targets = [
        (address, port, OUTSIDE if network == "mgmt" else "198.51.100.8")
        for host in hosts
        for _, port, network, _ in SERVICE_PORTS
        if (address := _address(slurm, host, network))
    ]
    outside = lab_helpers.scan_from_namespace(ns, outside_targets)
    inside = _scan_inside(slurm)
    header = f"{'node':<8} " + " ".join(
        f"{f'{name}/{port}':>16}" for name, port, *_ in SERVICE_PORTS
    )
    table, wrong = [header], []
    for host in hosts:
        cells = []
        for name, port, network, group in SERVICE_PORTS:
            address = _address(slurm, host, network)
            if address is None:
                cells.append(f"{'-':>16}")
                continue
            planned = group == "all" or host in groups.get(group, [])
            got_in, got_out = inside[(address, port)], outside[(address, port)]
            if (got_in == "open") != planned:
                wrong.append(f"{host} {name}/{port} from inside: {got_in}, plan: {planned}")
            if (got_out == "open") != (port == 22):
                wrong.append(f"{host} {name}/{port} from outside: {got_out}")
            cells.append(f"{got_in + '/' + got_out:>16}")
        table.append(f"{host:<8} " + " ".join(cells))
    print(
        "\nport scan of every node (inside the plan's networks / outside them; "
        "- no address on that network):\n" + "\n".join(table)
    )
    assert wrong == []
    # munge listens on a local socket only: it has no network port to open or close.
    controller = slurm.group("slurm_controller")[0]
    assert "munged" not in slurm.sh(controller, "ss -Hltnp")


def test_ssh_on_every_node_is_key_only_for_the_plans_users(slurm: SlurmLab):
    # `sshd -T` prints what the running daemon's configuration resolves to, on the node.
    wanted = {
        "passwordauthentication no",
        "kbdinteractiveauthentication no",
        "permitemptypasswords no",
        "pubkeyauthentication yes",
    }
    # Ansible's user (root in the lab) and the plan's team users; the lab plan has no admins.
    team_users = [u["name"] for t in (slurm.expanded["teams"] or {}).values() for u in t["users"]]
    backups = slurm.expanded["backups"]
    backup_hosts = {backups["target"]["host"], (backups["offsite"] or {}).get("host")}
    table = []
    for host in slurm.expanded["hosts"]:
        settings = set(slurm.sh(host, "sshd -T").splitlines())
        # The lab's Ansible logs in as root, by key (older sshd prints the old name).
        root = {"permitrootlogin without-password", "permitrootlogin prohibit-password"}
        missing = (wanted - settings) | (set() if root & settings else {"permitrootlogin"})
        users = {u for line in settings if line.startswith("allowusers ") for u in line.split()[1:]}
        # the backup host also lets every node's backup in, as the repositories' owner
        allowed = {"root", *team_users, *(["borg"] if host in backup_hosts else [])}
        if users != allowed:
            missing.add(f"allowusers {sorted(users)} != {sorted(allowed)}")
        table.append(f"{host:<8} {'ok' if not missing else 'MISSING ' + ', '.join(missing)}")
        assert not missing, f"{host}: {sorted(missing)}"
    print("\nsshd -T per node:\n" + "\n".join(table))
