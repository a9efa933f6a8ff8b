"""Lab logic that needs neither root nor a running lab."""

from __future__ import annotations

import concurrent.futures
import contextlib
import http.client
import os
import socket
import socketserver
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.api import load_expanded
from cluster_plan.lab import (
    connection,
    connection_vars,
    delay,
    faults,
    hardware,
    node,
    rootfs,
    sitesvc,
    topology,
)
from cluster_plan.lab import names as lab_names
from cluster_plan.lab.command import load_plan
from cluster_plan.lab.names import LabError, LabNames, ifname
from cluster_plan.lab.proxy import ArchiveProxy, UnixProxyServer

REPO = Path(__file__).resolve().parents[2]
PLAN = REPO / "inventory" / "lab" / "cluster.yml"


@pytest.fixture(scope="module")
def expanded() -> dict[str, Any]:
    return load_expanded(str(PLAN))


def test_one_bridge_per_switch_and_network(expanded: dict[str, Any]) -> None:
    wires = topology.wiring(expanded)
    switches = {"core1", "agg1", "tor1", "tor2"}
    assert {(b.switch, b.network) for b in wires.bridges} == {
        (s, n) for s in switches for n in ("mgmt", "compute", "storage")
    }
    assert not wires.loops


def test_uplinks_follow_the_tree_at_scaled_speed(expanded: dict[str, Any]) -> None:
    wires = topology.wiring(expanded)
    pairs = {(u.lower_bridge, u.upper_bridge, u.mbit) for u in wires.uplinks}
    # access uplinks 40 Gb/s and the aggregation uplink 100 Gb/s, times rate_scale 0.01
    assert ("tor1-comp", "agg1-comp", 400) in pairs
    assert ("tor2-mgmt", "agg1-mgmt", 400) in pairs
    assert ("agg1-stor", "core1-stor", 1000) in pairs
    assert len(wires.uplinks) == 3 * 3


def test_every_node_interface_carries_its_locked_address(expanded: dict[str, Any]) -> None:
    wires = topology.wiring(expanded)
    for host, spec in expanded["hosts"].items():
        ports = {p.network: p for p in wires.ports if p.host == host}
        assert set(ports) == set(spec["interfaces"])
        for net, iface in spec["interfaces"].items():
            port = ports[net]
            assert (port.device, port.address, port.mtu) == (
                iface["device"],
                iface["address"],
                iface["mtu"],
            )
            assert port.bridge == topology.bridge_name(spec["access_switch"], net)
            assert port.mbit == 100  # 10 Gb/s access links at rate_scale 0.01


def test_interface_names_fit_the_kernel_and_are_unique(expanded: dict[str, Any]) -> None:
    wires = topology.wiring(expanded)
    names = (
        [p.switch_port for p in wires.ports]
        + [b.name for b in wires.bridges]
        + [n for u in wires.uplinks for n in (u.lower, u.upper)]
    )
    assert all(len(n) <= 15 for n in names)
    assert len(names) == len(set(names))
    long = ifname("a-very-long-switch-name", "compute")
    assert len(long) <= 15 and long != ifname("a-very-long-switch-name", "storage")


def test_networks_sharing_a_prefix_get_their_own_bridges() -> None:
    tags = topology.network_tags(["mgmt", "storage", "storage-b"])
    assert tags == {"mgmt": "mgmt", "storage": "storage", "storage-b": "storage-b"}
    names = {topology.bridge_name("tor1", net, tags) for net in tags}
    assert len(names) == 3 and all(len(n) <= 15 for n in names)


def test_a_running_lab_may_grow_but_not_change(expanded: dict[str, Any]) -> None:
    import copy

    fabric, hosts = topology.fabric_digest(expanded), topology.host_digests(expanded)
    assert topology.plan_changes(copy.deepcopy(expanded), fabric, hosts) == ([], [])
    changed = copy.deepcopy(expanded)
    changed["hosts"]["gpu01"]["interfaces"]["compute"]["address"] = "10.41.0.99"
    assert topology.plan_changes(changed, fabric, hosts) == (["host gpu01"], [])
    grown = copy.deepcopy(expanded)
    hosts_in_order = list(grown["hosts"].items())
    extra = copy.deepcopy(grown["hosts"]["gpu02"]) | {"hostname": "gpu03"}
    grown["hosts"] = dict([*hosts_in_order[:3], ("gpu03", extra), *hosts_in_order[3:]])
    assert topology.plan_changes(grown, fabric, hosts) == ([], ["gpu03"])  # no cable renamed
    shrunk = copy.deepcopy(expanded)
    del shrunk["hosts"]["stor03"]
    assert topology.plan_changes(shrunk, fabric, hosts)[0] == ["host stor03"]
    moved = copy.deepcopy(expanded)
    moved["topology"]["access"]["tor2"]["uplink_gbps"] = 100
    assert topology.plan_changes(moved, fabric, hosts)[0]


def test_admin_namespace_stands_in_for_the_planned_services(expanded: dict[str, Any]) -> None:
    assert topology.admin_addresses(expanded) == ("mgmt", ["10.40.0.2"], 24)


def test_only_the_management_links_let_the_package_proxy_past_their_rate(
    expanded: dict[str, Any],
) -> None:
    wires = topology.wiring(expanded)
    proxy = topology.Bypass("10.40.0.2", 3142)  # the lab plan's packages.proxy
    on_mgmt = {b.name for b in wires.bridges if b.network == "mgmt"}
    assert {p.bypasses for p in wires.ports if p.network == "mgmt"} == {(proxy,)}
    assert {p.bypasses for p in wires.ports if p.network != "mgmt"} == {()}
    assert {u.bypasses for u in wires.uplinks if u.lower_bridge in on_mgmt} == {(proxy,)}
    assert {u.bypasses for u in wires.uplinks if u.lower_bridge not in on_mgmt} == {()}
    # no proxy in the plan: the lab's own, on the admin address, at apt-cacher's port
    bare = {**expanded, "packages": {**expanded["packages"], "proxy": None}}
    assert topology.proxy_bypass(bare) == topology.Bypass("10.40.0.2", 3142)
    moved = {**expanded, "packages": {**expanded["packages"], "proxy": "http://10.40.0.2:8000"}}
    assert topology.proxy_bypass(moved).port == 8000


def test_a_kubernetes_mirror_s_registry_and_files_pass_the_node_network_s_rate() -> None:
    k8s = load_expanded(str(PLAN.with_name("k8s.yml")))
    wires = topology.wiring(k8s)
    mirror = k8s["hosts"]["cp01"]["interfaces"]["compute"]["address"]  # cp01 serves it
    served = (topology.Bypass(mirror, 5000), topology.Bypass(mirror, 8080))
    assert {p.bypasses for p in wires.ports if p.network == "compute"} == {served}
    assert {p.bypasses for p in wires.ports if p.network == "mgmt"} == {
        (topology.Bypass("10.44.0.2", 3142),)
    }
    on_compute = {b.name for b in wires.bridges if b.network == "compute"}
    assert {u.bypasses for u in wires.uplinks if u.lower_bridge in on_compute} == {served}


def test_loop_topology_enables_stp(expanded: dict[str, Any]) -> None:
    looped = {
        **expanded,
        "topology": {
            "core": {"core1": {}, "core2": {}},
            "aggregation": {
                "agg1": {"uplinks": ["core1", "core2"], "uplink_gbps": None},
                "agg2": {"uplinks": ["core1", "core2"], "uplink_gbps": None},
            },
            "access": {
                name: {**switch, "uplink": agg}
                for (name, switch), agg in zip(
                    expanded["topology"]["access"].items(), ("agg1", "agg2"), strict=True
                )
            },
        },
    }
    assert topology.wiring(looped).loops


@pytest.mark.parametrize(
    ("text", "mbit"),
    [("100mbit", 100), ("1gbit", 1000), ("500kbit", 1), ("25", 25), ("10mbps", 80)],
)
def test_parse_rate(text: str, mbit: int) -> None:
    assert faults.parse_rate(text) == mbit


@pytest.mark.parametrize("bad", ["fast", "-1mbit", "10 tbit"])
def test_parse_rate_rejects_nonsense(bad: str) -> None:
    with pytest.raises(LabError):
        faults.parse_rate(bad)


def test_parse_loss_and_delay() -> None:
    assert faults.parse_pct("2%") == 2.0
    assert faults.parse_ms("5ms") == 5.0
    assert faults.parse_ms("0.2s") == 200.0
    for bad in ("101%", "x"):
        with pytest.raises(LabError):
            faults.parse_pct(bad)
    for bad in ("0ms", "1h", "-3ms"):
        with pytest.raises(LabError):
            faults.parse_ms(bad)


def test_a_frozen_node_is_frozen_through_its_own_cgroup_and_thawed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = LabNames("t1")
    monkeypatch.setattr(node, "CGROUP_ROOT", tmp_path)
    assert not node.set_frozen(names, "head01", True)  # no freezer: said, not ignored
    v1 = tmp_path / "freezer" / names.cgroup_rel("head01") / "freezer.state"
    v1.parent.mkdir(parents=True)
    v1.write_text("THAWED\n")
    assert node.set_frozen(names, "head01", True)
    assert v1.read_text() == "FROZEN"
    assert node.set_frozen(names, "head01", False)
    assert v1.read_text() == "THAWED"
    assert faults.Fault(freeze=True, down=True).describe() == (
        "link down, hung (processes frozen, nothing sent)"
    )


@pytest.mark.parametrize("pct", [2.0, 99.99, 100.0])
def test_the_loss_table_is_valid_nftables_up_to_all_frames(
    expanded: dict[str, Any], pct: float
) -> None:
    ports = faults.node_ports(expanded, "head01", None)
    table = faults.loss_table(ports, pct)
    assert table.count("counter drop") == len(ports)
    assert ("numgen" in table) == (pct < 100)
    # nft's own parser, check only (-c): nothing is applied to this machine
    checked = subprocess.run(
        ["nft", "-c", "-f", "-"], input=table, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr


def test_gpu_hosts_get_nvidia_stand_ins(expanded: dict[str, Any]) -> None:
    nodes = hardware.device_nodes(expanded["hosts"]["gpu01"], {})
    assert ("nvidia0", "c", 195, 0) in nodes and ("nvidia1", "c", 195, 1) in nodes
    assert ("nvidiactl", "c", 195, 255) in nodes
    assert not any(
        n[0].startswith("nvidia") for n in hardware.device_nodes(expanded["hosts"]["infer01"], {})
    )
    accel = hardware.device_nodes(expanded["hosts"]["infer01"], {})
    assert [n[0] for n in accel] == [f"accel/accel{i}" for i in range(4)]
    assert hardware.device_nodes(expanded["hosts"]["head01"], {}) == []


def test_osd_disks_are_loop_backed(expanded: dict[str, Any]) -> None:
    spec = expanded["hosts"]["stor01"]
    assert hardware.osd_disks(spec) == ["osd0"]
    loops = {"stor01/osd0": "/dev/loop7"}
    assert ("loop7", "b", 7, 7) in hardware.device_nodes(spec, loops)
    assert hardware.device_links(spec, loops) == [("disk/by-id/lab-osd0", "../../loop7")]


def test_boot_script_gives_the_node_its_own_dev(expanded: dict[str, Any]) -> None:
    script = node.boot_script(
        LabNames("unit"), "gpu01", expanded["hosts"]["gpu01"], [Path("/base")], {}
    )
    assert 'mount -t tmpfs -o mode=755,size=8m,nosuid dev "$R/dev"' in script
    assert "/dev " not in script.replace('"$R/dev', "")  # never the host's /dev
    assert 'mknod -m 666 "$R/dev/nvidia1" c 195 1' in script
    assert script.rstrip().endswith('exec chroot "$R" /lib/systemd/systemd --system')
    assert "hostname gpu01" in script


def test_rootfs_cache_key_follows_the_package_list(monkeypatch: pytest.MonkeyPatch) -> None:
    key = rootfs.cache_key()
    assert key == rootfs.cache_key()
    monkeypatch.setattr(rootfs, "PACKAGES", (*rootfs.PACKAGES, "vim"))
    assert rootfs.cache_key() != key


def test_connection_vars_go_through_the_admin_namespace(
    expanded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLUSTER_PLAN_LAB_ID", raising=False)
    found = connection_vars(expanded, str(PLAN))
    assert found["ansible_user"] == "root"
    assert found["ansible_ssh_private_key_file"].endswith("/id_ed25519")
    args = found["ansible_ssh_common_args"]
    assert "cluster_plan.lab.proxycommand cpl-lab-admin %h %p" in args
    assert "UserKnownHostsFile=/dev/null" in args and "StrictHostKeyChecking=no" in args
    assert "ControlPath=/run/cluster-plan/lab/lab/c/%C" in args
    monkeypatch.setenv("CLUSTER_PLAN_LAB_ID", "other")
    other = connection_vars(expanded, str(PLAN))["ansible_ssh_common_args"]
    assert "cpl-other-admin" in other and "/lab/other/c/%C" in other  # labs never share


def test_proxycommand_fails_fast_when_the_lab_is_down() -> None:
    # "fast": it refuses on the missing namespace without trying to connect (the message
    # says so); the timeout only stops a hang, and the time is a figure in bench_limits.py
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "cluster_plan.lab.proxycommand",
            "cpl-no-such-lab-admin",
            "10.40.0.10",
            "22",
        ],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    assert result.returncode == 255
    assert "is not up" in result.stderr


def _packet_message(packet_id: int) -> bytes:
    hdr = struct.pack("!IHB", packet_id, 0x0800, 3)
    attr = struct.pack("=HH", 4 + len(hdr), delay.NFQA_PACKET_HDR) + hdr + b"\0"
    body = struct.pack("=BBH", 2, 0, 0) + attr
    kind = (delay.NFNL_SUBSYS_QUEUE << 8) | delay.NFQNL_MSG_PACKET
    return delay.NLMSG_HDR.pack(delay.NLMSG_HDR.size + len(body), kind, 0, 0, 0) + body


def test_delay_stage_reads_packet_ids() -> None:
    assert delay.packet_ids(_packet_message(7) + _packet_message(4242)) == [7, 4242]
    assert delay.packet_ids(b"") == []


def test_archive_proxy_refuses_other_hosts(tmp_path: Path) -> None:
    sock_path = tmp_path / "proxy.sock"
    handler = type("Handler", (ArchiveProxy,), {"cache": tmp_path / "cache"})
    server = UnixProxyServer(str(sock_path), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        for method, target in (
            ("GET", "http://example.com/"),
            ("CONNECT", "pypi.org:443"),
            ("GET", "http://deb.debian.org:8080/debian/"),
            ("GET", "http://deb.debian.org/debian/pool/../../etc/x.deb"),
        ):
            with socket.socket(socket.AF_UNIX) as client:
                client.connect(str(sock_path))
                client.sendall(f"{method} {target} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                response = http.client.HTTPResponse(client)
                response.begin()
                assert response.status == 403, (method, target)
                response.close()
    finally:
        server.shutdown()
        server.server_close()


# Ten of the proxy's 64 KiB reads, with no run of zeros (a hole in a cached copy shows).
PACKAGE = bytes(range(256)) * 2560


class _Archive(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A stand-in archive on a unix socket. Every answer claims all of PACKAGE; a path with
        `short` in it stops after 40,000 bytes (a CDN dropping the connection mid-body), one with
        `slow` comes in ten pieces, 20 ms apart the first time and 100 ms apart after that (so a
    second fetch of it overlaps the first and lags behind it)."""

    daemon_threads = True
    slow_fetches = 0

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            request_line = self.rfile.readline().decode()
            while self.rfile.readline() not in (b"\r\n", b""):
                pass
            self.wfile.write(f"HTTP/1.1 200 OK\r\nContent-Length: {len(PACKAGE)}\r\n\r\n".encode())
            body = PACKAGE[:40000] if "short" in request_line else PACKAGE
            step, pause = len(body), 0.0
            if "slow" in request_line:
                step, pause = len(body) // 10, 0.1 if _Archive.slow_fetches else 0.02
                _Archive.slow_fetches += 1
            for offset in range(0, len(body), step):
                self.wfile.write(body[offset : offset + step])
                self.wfile.flush()
                time.sleep(pause)


@contextlib.contextmanager
def _proxy_over_archive(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """The lab's archive proxy, fetching from _Archive: (its socket, its cache)."""
    archive = _Archive(str(tmp_path / "archive.sock"), _Archive.Handler)
    _Archive.slow_fetches = 0

    def connect(host: str) -> http.client.HTTPConnection:
        connection = http.client.HTTPConnection(host, 80, timeout=10)
        connection.sock = socket.socket(socket.AF_UNIX)
        connection.sock.connect(str(tmp_path / "archive.sock"))
        return connection

    cache = tmp_path / "cache"
    handler = type("Handler", (ArchiveProxy,), {"cache": cache, "connect": staticmethod(connect)})
    proxy = UnixProxyServer(str(tmp_path / "proxy.sock"), handler)
    for server in (archive, proxy):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield str(tmp_path / "proxy.sock"), cache / "deb.debian.org/debian/pool/main/x"
    finally:
        for server in (archive, proxy):
            server.shutdown()
            server.server_close()


def _fetch(proxy: str, name: str) -> tuple[bytes, bytes]:
    """GET a package through the proxy, as apt does (keep-alive): (head, body). Reads until
    the body is whole or the proxy ends the connection."""
    with socket.socket(socket.AF_UNIX) as client:
        client.settimeout(10)  # a proxy that leaves the node waiting fails here, not hangs
        client.connect(proxy)
        url = f"http://deb.debian.org/debian/pool/main/x/{name}"
        client.sendall(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        received = b""
        while chunk := client.recv(65536):
            received += chunk
            if received.endswith(PACKAGE[-1024:]) and len(received) > len(PACKAGE):
                break
    head, _, body = received.partition(b"\r\n\r\n")
    return head, body


def _cached(directory: Path, name: str) -> bytes | None:
    """The cached copy, once the proxy has put it in place (just after the last byte)."""
    deadline = time.monotonic() + 5
    while not (directory / name).is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    return (directory / name).read_bytes() if (directory / name).is_file() else None


def _parts_left(directory: Path) -> list[Path]:
    """Part files still in the cache once the proxy's request threads have finished: a
    client can read the last byte before the thread that sent it renames its part file, so
    wait a little for them to settle before judging."""
    deadline = time.monotonic() + 5
    while (parts := list(directory.rglob("*.part"))) and time.monotonic() < deadline:
        time.sleep(0.05)
    return parts


def test_archive_proxy_never_leaves_a_node_waiting_on_a_short_body(tmp_path: Path) -> None:
    with _proxy_over_archive(tmp_path) as (proxy, cache):
        head, body = _fetch(proxy, "short.deb")
        assert f"Content-Length: {len(PACKAGE)}".encode() in head
        assert body == PACKAGE[:40000]  # and then the proxy closed the connection
        assert not (cache / "short.deb").exists()
        assert not _parts_left(cache)
        assert _fetch(proxy, "whole.deb")[1] == PACKAGE
        assert _cached(cache, "whole.deb") == PACKAGE


def test_archive_proxy_serves_and_caches_a_package_fetched_twice_at_once_intact(
    tmp_path: Path,
) -> None:
    with _proxy_over_archive(tmp_path) as (proxy, cache):
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(_fetch, proxy, "slow.deb")
            time.sleep(0.05)  # the second starts while the first is mid-body
            second = pool.submit(_fetch, proxy, "slow.deb")
            bodies = [first.result()[1]]
            assert _cached(cache, "slow.deb") is not None  # the first's copy is in place...
            bodies.append(_fetch(proxy, "slow.deb")[1])  # ...and served, the second mid-body
            bodies.append(second.result()[1])
        assert [body == PACKAGE for body in bodies] == [True, True, True]
        assert _cached(cache, "slow.deb") == PACKAGE
        assert not _parts_left(cache)


def test_load_plan_reports_unreadable_input(tmp_path: Path) -> None:
    from cluster_plan.cli.policy import Exit, UsageError

    with pytest.raises(UsageError) as missing:
        load_plan(str(tmp_path / "nope.yml"))
    assert missing.value.exit == Exit.USAGE
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(UsageError):
        load_plan(str(bad))
    bad.write_text('{"hosts": {}, "cluster": {"name": "lab", "mtu": NaN}}')
    with pytest.raises(UsageError, match=r"bad\.json: .*\$\.cluster\.mtu is NaN"):
        load_plan(str(bad))
    bad.write_text("[1, 2]")
    with pytest.raises(UsageError, match=r"bad\.json: not an expanded plan \(a JSON object\)"):
        load_plan(str(bad))


def test_cli_errors_are_messages_not_tracebacks(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cluster_plan.cli", "lab", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    missing = cli("status", str(tmp_path / "nope.yml"))
    assert missing.returncode == 2 and "no such plan file" in missing.stderr
    usage = cli("fault", str(PLAN))
    assert usage.returncode == 2 and "Traceback" not in usage.stderr
    for args in (("fault", str(PLAN), "gpu01"), ("fault", str(PLAN), "gpu01", "--rate", "x")):
        result = cli(*args)
        assert result.returncode in (1, 2) and "Traceback" not in result.stderr, result.stderr


def _dns_query(name: str, qtype: int = 1) -> bytes:
    labels = b"".join(bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\0"
    return (
        struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0) + labels + struct.pack("!HH", qtype, 1)
    )


def test_site_dns_answers_plan_hosts_only(expanded: dict[str, Any]) -> None:
    spec = sitesvc.zone_of(expanded)
    reply = sitesvc.dns_reply(_dns_query("gpu01.lab.internal"), spec["zone"], spec["domain"])
    assert reply is not None
    ident, flags, _qd, answers = struct.unpack_from("!HHHH", reply)
    assert (ident, flags & 0xF, answers) == (0x1234, 0, 1)
    assert reply[-4:] == bytes([10, 40, 0, 11])
    short = sitesvc.dns_reply(_dns_query("head01"), spec["zone"], spec["domain"])
    assert short is not None and short[-4:] == bytes([10, 40, 0, 10])
    missing = sitesvc.dns_reply(_dns_query("nope.lab.internal"), spec["zone"], spec["domain"])
    assert missing is not None and struct.unpack_from("!H", missing, 2)[0] & 0xF == 3
    outside = sitesvc.dns_reply(_dns_query("deb.debian.org"), spec["zone"], spec["domain"])
    assert outside is not None and struct.unpack_from("!H", outside, 2)[0] & 0xF == 5


def test_site_ntp_answers_clients_with_this_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    request = bytes([0x23]) + bytes(39) + b"ORIGINTS"  # v4, client mode
    now = 1_780_000_000.5  # this machine's clock, held still: the reply must carry it exactly
    monkeypatch.setattr(sitesvc.time, "time", lambda: now)
    reply = sitesvc.ntp_reply(request, now - 1)
    assert reply is not None and len(reply) == 48
    assert reply[0] & 0x07 == 4 and reply[1] == 1
    assert reply[24:32] == b"ORIGINTS"  # our transmit time echoed as their origin
    seconds = struct.unpack_from("!I", reply, 40)[0] - sitesvc.NTP_EPOCH_OFFSET
    assert seconds == int(now)  # transmitted at this clock's time
    received = struct.unpack_from("!I", reply, 32)[0] - sitesvc.NTP_EPOCH_OFFSET
    assert received == int(now - 1)  # and received when the caller said
    assert sitesvc.ntp_reply(bytes([0x24]) + bytes(47), now) is None  # not a client


def test_ansible_fails_fast_when_the_lab_is_down() -> None:
    ansible = Path(sys.executable).with_name("ansible")
    # the inventory plugin refuses at once, naming the lab (no SSH attempt and its timeouts);
    # the timeout only stops a hang, and the time is a figure in bench_limits.py
    result = subprocess.run(
        [str(ansible), "-i", str(PLAN), "head01", "-m", "ping"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=REPO,
        env={**os.environ, "CLUSTER_PLAN_LAB_ID": "never-up", "ANSIBLE_FORCE_COLOR": "0"},
    )
    assert result.returncode != 0
    assert "the lab 'never-up' is not up" in result.stdout + result.stderr, result.stdout


def test_guard_refuses_plans_that_overlap_this_machine(
    expanded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import netaddr

    from cluster_plan.lab import guard

    monkeypatch.setattr(guard, "_root_addresses", lambda: [netaddr.IPNetwork("192.0.2.2/24")])
    monkeypatch.setattr(
        guard,
        "_root_routes",
        lambda: [
            {"dst": "default", "gateway": "192.0.2.1"},
            {"dst": "192.0.2.0/24"},
            {"dst": "10.40.0.0/24", "type": "unreachable", "protocol": "250"},
        ],
    )
    guard.check_no_overlap(expanded)  # our own guard routes are no overlap
    monkeypatch.setattr(guard, "_root_routes", lambda: [{"dst": "10.41.0.0/16"}])
    with pytest.raises(LabError, match=r"10\.41\.0\.0/24 overlaps this machine.s route"):
        guard.check_no_overlap(expanded)
    monkeypatch.setattr(guard, "_root_addresses", lambda: [netaddr.IPNetwork("10.42.0.5/24")])
    monkeypatch.setattr(guard, "_root_routes", list)
    with pytest.raises(LabError, match=r"10\.42\.0\.0/24 overlaps"):
        guard.check_no_overlap(expanded)


def test_machine_changes_are_undone_by_the_last_lab(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cluster_plan.lab import hostchanges

    sysctl = tmp_path / "sys"
    (sysctl / "fs/inotify").mkdir(parents=True)
    (sysctl / "fs/inotify/max_user_instances").write_text("128\n")
    (sysctl / "fs/inotify/max_user_watches").write_text("9999999\n")
    monkeypatch.setattr(hostchanges, "SYSCTL", sysctl)
    monkeypatch.setattr(hostchanges, "netns_mounted", lambda: True)
    runs = tmp_path / "run"
    assert hostchanges.prepare(runs) == ["fs.inotify.max_user_instances"]
    assert (sysctl / "fs/inotify/max_user_instances").read_text() == "8192"
    (runs / "other").mkdir()
    (runs / "other/state.json").write_text("{}")
    hostchanges.undo_when_last(runs)  # another lab still runs: keep
    assert (sysctl / "fs/inotify/max_user_instances").read_text() == "8192"
    (runs / "other/state.json").unlink()
    hostchanges.undo_when_last(runs)
    assert (sysctl / "fs/inotify/max_user_instances").read_text() == "128"
    assert (sysctl / "fs/inotify/max_user_watches").read_text() == "9999999\n"


def test_state_round_trip_and_other_labs(tmp_path: Path) -> None:
    from cluster_plan.lab import state
    from cluster_plan.lab.proc import ProcRef

    mine = state.LabState(
        lab="a",
        plan="/p.yml",
        nodes={"n1": ProcRef(10, 20)},
        faults={"n1": {"loss_pct": 2.0}},
        cidrs=["10.40.0.0/24"],
    )
    state.save(tmp_path / "a" / "state.json", mine)
    assert state.load(tmp_path / "a" / "state.json") == mine
    state.save(
        tmp_path / "b" / "state.json",
        state.LabState(lab="b", plan="/p.yml", cidrs=["10.41.0.0/24"]),
    )
    assert state.other_labs_cidrs(tmp_path, "a") == {"10.41.0.0/24"}
    assert state.load(tmp_path / "missing.json") is None
    (tmp_path / "torn.json").write_text('{"lab": "a", "pl')  # a write cut short
    assert state.load(tmp_path / "torn.json") is None
    assert state.load(tmp_path / "a") is None  # not a file


FORKS = """
import os, sys, time
if os.fork() == 0:
    os.setsid()  # as Mitogen's connection processes do
    if os.fork() == 0:
        time.sleep(300)
    time.sleep(300)
print("forked", flush=True)
time.sleep(300)
"""


def _gone(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith(("Z", "X"))
    except OSError:
        return True


def test_kill_tree_takes_the_forked_workers_with_the_run() -> None:
    """A killed ansible-playbook left its forked workers under init, for 40 minutes, holding
    their connections; kill_tree kills what is below the run too, by process id."""
    from cluster_plan.lab.proc import descendants, kill_tree

    with subprocess.Popen([sys.executable, "-c", FORKS], stdout=subprocess.PIPE, text=True) as run:
        assert run.stdout is not None and run.stdout.readline().strip() == "forked"
        deadline = time.monotonic() + 10
        while len(below := descendants(run.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(below) == 2, below
        kill_tree(run.pid)
        run.wait(timeout=10)
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in below if not _gone(pid)] == []


def test_a_node_powered_off_takes_its_ssh_master_connection_with_it(
    expanded: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lab_names, "RUN_ROOT", tmp_path)  # no lab's real sockets
    names = LabNames("t-units")
    ran: list[list[str]] = []
    monkeypatch.setattr(connection, "run", lambda argv, **kw: ran.append(list(argv)))
    connection.close_master(names, "10.40.0.12")  # no master was ever made: nothing to end
    assert ran == []
    names.control_dir.mkdir(parents=True)
    connection.close_master(names, "10.40.0.12")
    (argv,) = ran
    # the socket Ansible's ssh uses for that address (the lab's ControlPath, its user)
    control = f"ControlPath={names.control_dir}/%C"
    assert argv == ["ssh", "-o", control, "-O", "exit", "-l", "root", "10.40.0.12"]
    monkeypatch.setattr(connection, "for_plan", lambda _: names)
    assert control in connection.connection_vars(expanded, "")["ansible_ssh_common_args"]
    assert connection.connection_vars(expanded, "")["ansible_user"] == "root"
