"""Helpers the lab test modules share: commands in nodes, and a namespace outside the plan's
networks cabled to the lab's own bridges (never the machine's own namespace)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from support.node_shell import lab_run
from support.playbooks import ansible_env

ROOT = Path(__file__).resolve().parents[2]
PLAN = ROOT / "inventory" / "lab" / "cluster.yml"
BIN = Path(sys.executable).parent
OUTSIDE = "198.51.100.7"  # TEST-NET-2: in no plan network

CONNECT = """
import socket, sys
host, port, source = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket()
s.settimeout(3)
if source:
    s.bind((source, 0))
try:
    s.connect((host, port))
    print("open")
except OSError as err:
    print("closed", err)
"""


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "cluster-plan"), *args],
        cwd=ROOT,
        env=ansible_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def on_node(
    host: str, script: str, plan: Path = PLAN, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """Run a shell script inside a lab node (nsenter), as root: `cluster-plan lab run`."""
    return lab_run(plan, host, ["sh", "-c", script], ansible_env(), timeout)


SLURMCTLD_LOG = "/var/log/slurm/slurmctld.log"  # the slurm role's slurm_log_dir


def sbatch(host: str, options: str, controller: str, timeout: float = 180) -> str:
    """`sbatch --parsable OPTIONS` run on `host`: the job id. A refused submission fails the
    test with the tail of `controller`'s slurmctld log: what it was doing meanwhile says why
    (a slow state write, a restart)."""
    result = on_node(host, f"cd /tmp && sbatch --parsable {options}", timeout=timeout)
    if result.returncode != 0:
        log = on_node(controller, f"tail -n 40 {SLURMCTLD_LOG}")
        pytest.fail(
            f"{host}: sbatch {options}: {result.stderr.strip()}\n"
            f"slurmctld on {controller}:\n{log.stdout}"
        )
    return result.stdout.strip().split(";")[0]


# Files of 128 KiB from /dev/urandom written through a client's mount, then their checksums
# (sha256sum's lines, on standard output).
WRITE_FILES = """
set -e
mkdir -p {directory}
for i in $(seq 1 {count}); do head -c 131072 /dev/urandom > {directory}/f$i; done
sync
sha256sum {directory}/f*
"""


def ceph_json(host: str, command: str, timeout: float = 300, plan: Path = PLAN) -> Any:
    """`ceph COMMAND --format json` on `host` (a monitor holds the admin key), parsed."""
    done = on_node(host, f"ceph --connect-timeout 30 {command} --format json", plan, timeout)
    assert done.returncode == 0, f"{host}: ceph {command}\n{done.stdout}\n{done.stderr}"
    return json.loads(done.stdout)


def osd_hosts(tree: dict[str, Any]) -> dict[int, str]:
    """OSD id -> host, from `ceph osd tree`'s JSON."""
    by_id = {n["id"]: n for n in tree["nodes"]}
    return {
        child: node["name"]
        for node in tree["nodes"]
        if node["type"] == "host"
        for child in node.get("children", [])
        if by_id[child]["type"] == "osd"
    }


def connect_script(host: str, port: int, source: str = "") -> str:
    """A shell command that, run in a node, prints 'open' or 'closed ...' for host:port."""
    return f"python3 -c '{CONNECT}' {host} {port} '{source}'"


# Many probes at once, each "address,port,source" -> "address,port,source open|closed"; no
# single quote in it, so that it travels inside a node's `sh -c '...'`.
SCAN = """
import socket, sys
from concurrent.futures import ThreadPoolExecutor
def probe(item):
    host, port, source = item.split(",")
    s = socket.socket()
    s.settimeout(3)
    try:
        if source:
            s.bind((source, 0))
        s.connect((host, int(port)))
        return item, "open"
    except OSError:
        return item, "closed"
    finally:
        s.close()
with ThreadPoolExecutor(64) as pool:
    for item, state in pool.map(probe, sys.argv[1:]):
        print(item, state)
"""


def _scanned(out: str) -> dict[tuple[str, int], str]:
    found = {}
    for line in out.splitlines():
        item, _, state = line.partition(" ")
        host, port, _ = item.split(",")
        found[(host, int(port))] = state
    return found


def scan_from_node(node: str, targets: list[tuple[str, int]]) -> dict[tuple[str, int], str]:
    """Probe each (address, port) at once from inside a node: {(address, port): state}."""
    args = " ".join(f"{host},{port}," for host, port in targets)
    result = on_node(node, f"python3 -c '{SCAN}' {args}")
    assert result.returncode == 0, result.stdout + result.stderr
    return _scanned(result.stdout)


def scan_from_namespace(ns: str, targets: list[tuple[str, int, str]]) -> dict[tuple[str, int], str]:
    """Probe each (address, port, source) at once from a namespace of ours."""
    result = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", SCAN]
        + [f"{host},{port},{source}" for host, port, source in targets],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return _scanned(result.stdout)


def _ip(*argv: str) -> None:
    subprocess.run(["ip", *argv], check=True, capture_output=True, timeout=30)


@contextmanager
def outside_namespace(expanded: dict[str, Any], legs: tuple[str, ...] = ()) -> Iterator[str]:
    """A namespace of our own on the lab's management bridge, speaking from 198.51.100.7
    (in no plan network). It also holds the management gateway address, so the nodes'
    replies (default route via the plan's gateway) come back to it. Each network in `legs`
    gets a second cable into that network's core bridge, with 198.51.100.8 and a route to
    the network, so the namespace can reach the nodes' addresses there too."""
    from cluster_plan.lab.names import for_plan
    from cluster_plan.lab.topology import bridge_name

    names = for_plan(expanded)
    mgmt = next(iter(expanded["networks"]))
    gateway = expanded["networks"][mgmt]["gateway"]
    prefixlen = expanded["networks"][mgmt]["prefixlen"]
    core = next(iter(expanded["topology"]["core"]))
    admin = subprocess.run(
        ["ip", "-n", names.admin_ns, "-o", "addr"], capture_output=True, text=True, check=False
    ).stdout
    # the lab never puts the gateway in its admin namespace (this namespace holds it): fail
    # loudly if that changes, rather than leave the firewall scans unrun
    assert f" {gateway}/" not in admin, f"the lab's admin namespace holds {gateway}"
    ns = f"cpt-{names.lab}-outside"[:30]
    ports = [("cptout", "eth0", mgmt)] + [
        (f"cptout{i}", f"eth{i}", net) for i, net in enumerate(legs, start=1)
    ]
    try:
        _ip("netns", "add", ns)
        for port, inside, net in ports:
            peer = ["peer", "name", inside, "netns", ns]
            _ip("-n", names.fabric_ns, "link", "add", port, "type", "veth", *peer)
            _ip("-n", names.fabric_ns, "link", "set", port, "master", bridge_name(core, net), "up")
            _ip("-n", ns, "link", "set", inside, "up")
        _ip("-n", ns, "addr", "add", f"{gateway}/{prefixlen}", "dev", "eth0")
        _ip("-n", ns, "addr", "add", f"{OUTSIDE}/32", "dev", "eth0")
        for i, net in enumerate(legs, start=1):
            _ip("-n", ns, "addr", "add", "198.51.100.8/32", "dev", f"eth{i}")
            cidr = expanded["networks"][net]["cidr"]
            _ip("-n", ns, "route", "add", cidr, "dev", f"eth{i}", "src", "198.51.100.8")
        _ip("-n", ns, "link", "set", "lo", "up")
        yield ns
    finally:
        for port, _, _ in ports:
            subprocess.run(
                ["ip", "-n", names.fabric_ns, "link", "del", port],
                check=False,
                capture_output=True,
                timeout=30,
            )
        subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True, timeout=30)


def probe_from_namespace(ns: str, host: str, port: int, source: str) -> str:
    result = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", CONNECT, host, str(port), source],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    return result.stdout.strip()


def ssh_reachable(ns: str, host: str, source: str, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe_from_namespace(ns, host, 22, source) == "open":
            return True
        # From the gateway address: the node's ARP reply refreshes its entry for it.
        probe_from_namespace(ns, host, 22, "")
        time.sleep(1)
    return False
