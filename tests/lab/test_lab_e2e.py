"""The lab, up for real: nodes, wiring, safety, Ansible reach, the proxy, and each fault
proven by measurement. Every fault is cleared in a finally; the session fixture takes
the whole lab down even when a test fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab_measure import iperf_mbit, ping, wait_reachable
from support.cli_output import result as command_result
from support.lab_session import REPO, Lab
from support.lab_state import class_bytes
from support.node_shell import lab_run

from cluster_plan.lab import faults, lifecycle, state, status
from cluster_plan.lab.names import CACHE_ROOT
from cluster_plan.lab.proc import ProcRef
from cluster_plan.lab.topology import wiring

pytestmark = pytest.mark.lab
# Two nodes on different racks: their traffic crosses tor1 -> agg1 -> tor2.
SRC, DST = "gpu01", "gpu02"


@pytest.fixture
def clean_faults(lab: Lab) -> Iterator[Lab]:
    try:
        yield lab
    finally:
        for host in lab.expanded["hosts"]:
            faults.clear(lab.names, lab.expanded, host)


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cluster_plan.cli", "lab", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd=REPO,
    )


def test_up_on_a_running_lab_is_a_noop(lab: Lab) -> None:
    before = {h: lab.init(h) for h in lab.expanded["hosts"]}
    assert lifecycle.up(lab.expanded, str(lab.plan)) is False
    assert {h: lab.init(h) for h in lab.expanded["hosts"]} == before
    result = cli("up", str(lab.plan))
    assert result.returncode == 0 and "already up" in result.stdout


def test_status_tells_every_node_runs(lab: Lab) -> None:
    report = status.collect(lab.names, lab.expanded)
    assert report["up"], status.render(report)
    for host, info in report["nodes"].items():
        assert info["state"] == "running", (host, info)
        assert info["sshd"]
    result = cli("status", str(lab.plan), "--format", "json")
    assert result.returncode == 0
    assert command_result(result.stdout)["running"] == len(lab.expanded["hosts"])


def test_root_namespace_never_routes_to_the_plan(lab: Lab) -> None:
    default = subprocess.run(
        ["ip", "-j", "route", "show", "default"], capture_output=True, text=True, check=True
    ).stdout
    gateways = {r.get("gateway") for r in json.loads(default or "[]")} - {None}
    root_addrs = subprocess.run(
        ["ip", "-4", "-o", "addr"], capture_output=True, text=True, check=True
    ).stdout
    root_links = subprocess.run(
        ["ip", "-o", "link"], capture_output=True, text=True, check=True
    ).stdout
    for host, spec in lab.expanded["hosts"].items():
        for iface in spec["interfaces"].values():
            address = iface["address"]
            # `ip route get` only asks the routing table; it sends nothing.
            got = subprocess.run(
                ["ip", "route", "get", address], capture_output=True, text=True, check=False
            )
            assert got.returncode != 0 or not any(f"via {g} " in got.stdout for g in gateways), (
                host,
                address,
                got.stdout,
            )
            assert f" {address}/" not in root_addrs
    for bridge in ("tor1-mgmt", "agg1-comp", "core1-stor"):
        assert f" {bridge}:" not in root_links
    admin_routes = subprocess.run(
        ["ip", "-n", lab.names.admin_ns, "route"], capture_output=True, text=True, check=True
    ).stdout
    assert "default" not in admin_routes


def test_nodes_match_the_plan(lab: Lab) -> None:
    for host, spec in lab.expanded["hosts"].items():
        assert lab.in_node(host, ["hostname"]).stdout.strip() == spec["hostname"]
        assert lab.in_node(host, ["cat", "/proc/1/comm"]).stdout.strip() == "systemd"
        links = json.loads(lab.in_node(host, ["ip", "-j", "addr"]).stdout)
        by_name = {link["ifname"]: link for link in links}
        for iface in spec["interfaces"].values():
            link = by_name[iface["device"]]
            assert link["mtu"] == iface["mtu"]
            assert iface["address"] in [a["local"] for a in link["addr_info"]]
        mounts = lab.in_node(host, ["cat", "/proc/mounts"]).stdout
        assert any(line.split()[1:3] == ["/dev", "tmpfs"] for line in mounts.splitlines())
        devices = set(lab.in_node(host, ["ls", "/dev"]).stdout.split())
        accel = spec.get("accelerators") or {}
        if accel.get("kind") == "gpu":
            assert {f"nvidia{i}" for i in range(accel["count"])} <= devices
        else:
            assert not any(d.startswith("nvidia") for d in devices)
        osd = [d["name"] for d in spec.get("disks") or [] if d.get("use") == "osd"]
        for disk in osd:
            found = lab.in_node(host, ["test", "-b", f"/dev/disk/by-id/lab-{disk}"], check=False)
            assert found.returncode == 0, (host, disk)


def test_ansible_ping_reaches_every_node(lab: Lab) -> None:
    ansible = Path(sys.executable).with_name("ansible")
    result = subprocess.run(
        [str(ansible), "-i", str(lab.plan), "all", "-m", "ping"],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        cwd=REPO,
        env={**os.environ, "ANSIBLE_FORCE_COLOR": "0"},
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for host in lab.expanded["hosts"]:
        assert f"{host} | SUCCESS" in result.stdout


def test_apt_proxy_carries_the_archive_and_nothing_else(lab: Lab) -> None:
    probe = (
        "import urllib.request, urllib.error, sys\n"
        "opener = urllib.request.build_opener(urllib.request.ProxyHandler("
        "{'http': 'http://10.40.0.2:3142'}))\n"
        "for url in sys.argv[1:]:\n"
        "    try:\n"
        "        print(opener.open(url, timeout=30).status)\n"
        "    except urllib.error.HTTPError as err:\n"
        "        print(err.code)\n"
    )
    result = lab.in_node(
        "head01",
        [
            "python3",
            "-c",
            probe,
            "http://deb.debian.org/debian/dists/bookworm/Release",
            "http://example.com/",
        ],
        timeout=90,
    )
    assert result.stdout.split() == ["200", "403"], result.stderr


def test_the_package_proxy_bypasses_the_scaled_links_and_nothing_else_does(lab: Lab) -> None:
    """A package fetched through the proxy crosses the node's management port outside the
    link's token bucket (tbf stays on every other packet: iperf3 between two nodes on that
    network still measures the scaled 10 Gb/s). The package is one the test puts in the
    proxy's cache, so that no archive is asked and the size is known."""
    ports = wiring(lab.expanded).ports
    port = next(p for p in ports if p.host == DST and p.bypasses)
    (bypass,) = port.bypasses
    assert port.network == lab.expanded["cluster"]["management_network"]
    assert all(not p.bypasses for p in ports if p.network != port.network)
    if "1:2" not in class_bytes(lab.names.fabric_ns, port.switch_port):
        pytest.skip("this kernel has no HTB: the proxy's traffic is shaped like any other")
    size = 8 * 1024 * 1024
    path = f"debian/pool/main/z/zz-lab-bypass/zz-lab-bypass_{os.getpid()}_all.deb"
    cached = CACHE_ROOT / "apt" / "deb.debian.org" / path
    cached.parent.mkdir(parents=True, exist_ok=True)
    cached.write_bytes(os.urandom(size))
    fetch = (
        "import urllib.request, sys, time\n"
        "opener = urllib.request.build_opener(urllib.request.ProxyHandler("
        f"{{'http': 'http://{bypass.address}:{bypass.port}'}}))\n"
        "started = time.monotonic(); body = opener.open(sys.argv[1], timeout=60).read()\n"
        "print(len(body), time.monotonic() - started)\n"
    )
    try:
        before = class_bytes(lab.names.fabric_ns, port.switch_port)
        got = lab.in_node(DST, ["python3", "-c", fetch, f"http://deb.debian.org/{path}"])
        after = class_bytes(lab.names.fabric_ns, port.switch_port)
    finally:
        cached.unlink(missing_ok=True)
    length, seconds = got.stdout.split()
    assert int(length) == size, got.stdout
    bypassed = after["1:1"] - before["1:1"]
    bucketed = after["1:2"] - before["1:2"]
    assert bypassed >= size and bucketed < size // 10, (before, after)
    print(f"\n{size * 8 / float(seconds) / 1e6:.0f} Mbit/s through the proxy", end="")
    shaped = iperf_mbit(lab, SRC, DST, port.address)
    assert 70 < shaped < 110, shaped  # the management network's 10 Gb/s at rate_scale 0.01


def test_fault_rate_is_measured_by_iperf3(clean_faults: Lab) -> None:
    lab = clean_faults
    dst = lab.address(DST, "compute")
    baseline = iperf_mbit(lab, SRC, DST, dst)
    assert 70 < baseline < 110, baseline  # the plan's 10 Gb/s link at rate_scale 0.01
    result = cli("fault", str(lab.plan), SRC, "--rate", "20mbit")
    assert result.returncode == 0, result.stderr
    limited = iperf_mbit(lab, SRC, DST, dst)
    assert 12 < limited < 22, limited
    assert cli("fault", str(lab.plan), SRC, "--clear").returncode == 0
    assert iperf_mbit(lab, SRC, DST, dst) > 70


def test_fault_loss_is_counted(clean_faults: Lab) -> None:
    lab = clean_faults
    dst = lab.address(DST, "compute")
    wait_reachable(lab, SRC, dst)
    faults.apply(lab.names, lab.expanded, SRC, faults.Fault(loss_pct=5), "compute")
    pings = ping(lab, SRC, dst, count=1000, interval_ms=2)
    dropped = sum(faults.loss_counters(lab.names).values())
    # 5% of 1000 echo requests: far outside 15..100 only with odds below one in a million
    assert 15 <= pings.lost <= 100, pings
    # every lost ping is a frame the fault counted (plus the odd ARP frame)
    assert pings.lost <= dropped <= pings.lost + 10, (pings, dropped)
    faults.clear(lab.names, lab.expanded, SRC)
    assert faults.loss_counters(lab.names) == {}
    assert ping(lab, SRC, dst, count=200, interval_ms=2).lost == 0


def test_fault_delay_is_seen_by_ping(clean_faults: Lab) -> None:
    lab = clean_faults
    dst = lab.address(DST, "compute")
    wait_reachable(lab, SRC, dst)
    before = ping(lab, SRC, dst, count=20)
    assert before.avg_ms is not None and before.avg_ms < 2
    faults.apply(lab.names, lab.expanded, SRC, faults.Fault(delay_ms=5))
    delayed = ping(lab, SRC, dst, count=50)
    assert delayed.lost == 0 and delayed.avg_ms is not None
    assert 5 <= delayed.avg_ms < 10, delayed
    st = state.load(lab.names.state_file)
    assert st is not None
    stage: ProcRef = st.delays[SRC]
    assert stage.alive()
    faults.clear(lab.names, lab.expanded, SRC)
    assert not stage.alive()  # the user-space stage stops with the fault
    after = ping(lab, SRC, dst, count=20)
    assert after.avg_ms is not None and after.avg_ms < 2


def test_fault_down_cuts_the_node_off(clean_faults: Lab) -> None:
    lab = clean_faults
    dst = lab.address(DST, "compute")
    faults.apply(lab.names, lab.expanded, SRC, faults.Fault(down=True))
    assert ping(lab, SRC, dst, count=5, interval_ms=100).received == 0
    links = lab.in_node(SRC, ["ip", "-o", "link", "show", "compute"]).stdout
    assert "NO-CARRIER" in links
    faults.clear(lab.names, lab.expanded, SRC)
    wait_reachable(lab, SRC, dst)


def test_fault_duration_clears_by_itself(clean_faults: Lab) -> None:
    lab = clean_faults
    result = cli("fault", str(lab.plan), SRC, "--delay", "3ms", "--duration", "1")
    assert result.returncode == 0 and "cleared after 1s" in result.stdout, result.stderr
    st = state.load(lab.names.state_file)
    assert st is not None and SRC not in st.faults and SRC not in st.delays


def test_restart_keeps_the_node_disk(lab: Lab) -> None:
    lab.in_node(DST, ["sh", "-c", "echo kept > /root/marker"])
    old = lab.init(DST)
    result = cli("restart", str(lab.plan), DST)
    assert result.returncode == 0, result.stderr
    assert not old.alive() and lab.init(DST) != old
    assert lab.in_node(DST, ["cat", "/root/marker"]).stdout.strip() == "kept"
    assert status.collect(lab.names, lab.expanded)["up"]


def test_site_dns_and_ntp_answer_on_the_planned_address(lab: Lab) -> None:
    probe = (
        "import socket, struct, time\n"
        "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(5)\n"
        "q = struct.pack('!HHHHHH', 7, 0x100, 1, 0, 0, 0)"
        " + b'\\x05gpu02\\x03lab\\x08internal\\x00' + struct.pack('!HH', 1, 1)\n"
        "s.sendto(q, ('10.40.0.2', 53)); r = s.recv(512)\n"
        "print('.'.join(str(b) for b in r[-4:]))\n"
        "s.sendto(bytes([0x23]) + bytes(47), ('10.40.0.2', 123)); r = s.recv(512)\n"
        "print(abs(struct.unpack('!I', r[40:44])[0] - 2208988800 - time.time()) < 5)\n"
    )
    result = lab.in_node("cpu01", ["python3", "-c", probe], timeout=30)
    assert result.stdout.split() == [lab.expanded["hosts"]["gpu02"]["address"], "True"]


def test_lab_ssh_and_run_reach_nodes(lab: Lab) -> None:
    ssh = cli("ssh", str(lab.plan), "stor01", "--", "hostname", timeout=60)
    assert ssh.returncode == 0 and ssh.stdout.strip() == "stor01", ssh.stderr
    run = cli("run", str(lab.plan), "all", "--", "systemctl", "is-active", "ssh")
    assert run.returncode == 0
    assert run.stdout.count("active") == len(lab.expanded["hosts"])


def test_the_tests_node_shell_answers_as_lab_run_does(lab: Lab) -> None:
    """The lab tests run their commands in nodes through support.node_shell.lab_run, which
    enters the node itself instead of starting the CLI for each: same output, same exit
    status (0, or 1 for any failure), the CLI's own message where it falls back to it."""
    env = {**os.environ, "CLUSTER_PLAN_LAB_ID": lab.names.lab}
    cases = [  # host, script, what the CLI answers: exit status, output and errors
        ("cpu01", "hostname; echo $CLUSTER_PLAN_LAB_ID", 0, f"cpu01\n{lab.names.lab}\n"),
        ("stor01", "echo out; echo err >&2; exit 3", 1, "out\nerr\n"),
        ("no-such-node", "true", 1, "error: no node 'no-such-node' in the plan"),
    ]
    for host, script, code, said in cases:
        fast = lab_run(lab.plan, host, ["sh", "-c", script], env, 60)
        slow = subprocess.run(
            [sys.executable, "-m", "cluster_plan.cli", "lab", "run", str(lab.plan), host, "--",
             "sh", "-c", script],
            capture_output=True, text=True, timeout=60, check=False, cwd=REPO, env=env,
        )  # fmt: skip
        assert (fast.returncode, fast.stdout, fast.stderr) == (
            slow.returncode,
            slow.stdout,
            slow.stderr,
        ), host
        assert fast.returncode == code and said in fast.stdout + fast.stderr, (host, fast)
    assert lab_run(lab.plan, "cpu01", ["cat"], env, 60, stdin="in\n").stdout == "in\n"
