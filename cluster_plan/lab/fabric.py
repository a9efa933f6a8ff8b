"""Namespaces, bridges and veths: the plan's switches and cables, all inside lab namespaces.

The root namespace never gets a plan address or a bridge: every bridge lives in the
fabric namespace, node ends live in the node namespaces.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from cluster_plan.lab.names import LabNames
from cluster_plan.lab.proc import run
from cluster_plan.lab.topology import Bypass, Port, Wiring

NETNS_DIR = Path("/run/netns")


def netns_exists(ns: str) -> bool:
    return (NETNS_DIR / ns).exists()


def lab_namespaces(names: LabNames, hosts: Iterable[str]) -> list[str]:
    """The lab's namespaces that exist, by exact name (a prefix could match another lab's:
    lab "acc" must never take lab "acc-2" down)."""
    wanted = dict.fromkeys([names.fabric_ns, names.admin_ns, *(names.node_ns(h) for h in hosts)])
    return [ns for ns in wanted if netns_exists(ns)]


def ensure_netns(ns: str) -> None:
    if not netns_exists(ns):
        run(["ip", "netns", "add", ns])
    ip(ns, "link", "set", "lo", "up")
    # Lab namespaces speak IPv4 only: no router solicitations or DAD noise on the bridges.
    sysctl(ns, "net.ipv6.conf.all.disable_ipv6", "1")
    sysctl(ns, "net.ipv6.conf.default.disable_ipv6", "1")


def sysctl(ns: str, key: str, value: str) -> None:
    run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", f"{key}={value}"])


def ip(ns: str, *args: str, check: bool = True) -> str:
    return run(["ip", "-n", ns, *args], check=check).stdout


def link_exists(ns: str, name: str) -> bool:
    return run(["ip", "-n", ns, "link", "show", "dev", name], check=False).returncode == 0


def shape(ns: str, dev: str, mbit: int, mtu: int, bypasses: Sequence[Bypass] = ()) -> None:
    """Token bucket on the egress of one link end: the link's speed, physically enforced.

    With bypasses, the root is an HTB with two classes too fast to limit anything: the
    second (the default) holds that same bucket, the first takes the bypasses' packets only
    (u32 on an address and port, either way) and is not shaped. Every other packet meets
    the bucket as it would alone. (This kernel has HTB, TBF and u32, not prio.) Where HTB
    cannot be had, the link keeps the bucket alone and the bypasses go at link speed."""
    rate_bytes = mbit * 1_000_000 // 8
    burst = max(rate_bytes // 250, 4 * mtu, 16_000)
    bucket = f"tbf rate {mbit}mbit burst {burst} latency 20ms"
    if bypasses:
        # HTB changes no root in place: a re-shape (a rate fault, its clearing) starts over
        run(["tc", "-n", ns, "qdisc", "del", "dev", dev, "root"], check=False)
        fast = "htb rate 10gbit quantum 200000"
        lines = [
            f"qdisc add dev {dev} root handle 1: htb default 2",
            f"class add dev {dev} parent 1: classid 1:1 {fast}",
            f"class add dev {dev} parent 1: classid 1:2 {fast}",
            f"qdisc add dev {dev} parent 1:2 handle 2: {bucket}",
        ]
        ways = [(b, w) for b in bypasses for w in (("src", "sport"), ("dst", "dport"))]
        for pref, (bypass, (way, port)) in enumerate(ways, start=1):
            lines.append(
                f"filter add dev {dev} parent 1: protocol ip pref {pref} u32 match ip {way} "
                f"{bypass.address}/32 match ip {port} {bypass.port} 0xffff flowid 1:1"
            )
        done = run(["tc", "-n", ns, "-batch", "-"], check=False, input_text="\n".join(lines))
        if done.returncode == 0:
            return
    run(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", *bucket.split()])


def build_fabric(names: LabNames, wiring: Wiring) -> None:
    ns = names.fabric_ns
    ensure_netns(ns)
    # The delay stage queues bridged IPv4 frames through iptables (br_netfilter).
    sysctl(ns, "net.bridge.bridge-nf-call-iptables", "1")
    sysctl(ns, "net.bridge.bridge-nf-call-ip6tables", "0")
    sysctl(ns, "net.bridge.bridge-nf-call-arptables", "0")
    for bridge in wiring.bridges:
        if not link_exists(ns, bridge.name):
            stp = ["stp_state", "1", "forward_delay", "200"] if wiring.loops else []
            ip(ns, "link", "add", bridge.name, "type", "bridge", *stp)
        ip(ns, "link", "set", bridge.name, "mtu", str(bridge.mtu), "up")
    for up in wiring.uplinks:
        if not link_exists(ns, up.lower):
            ip(ns, "link", "add", up.lower, "type", "veth", "peer", "name", up.upper)
        for end, master in ((up.lower, up.lower_bridge), (up.upper, up.upper_bridge)):
            ip(ns, "link", "set", end, "mtu", str(up.mtu), "master", master, "up")
            shape(ns, end, up.mbit, up.mtu, up.bypasses)


def wire_port(names: LabNames, port: Port) -> None:
    """Cable one node interface to its access switch, with the plan's address and MTU."""
    fab, node = names.fabric_ns, names.node_ns(port.host)
    if not link_exists(fab, port.switch_port):
        if link_exists(node, port.device):
            ip(node, "link", "del", port.device)
        ip(
            fab,
            "link",
            "add",
            port.switch_port,
            "type",
            "veth",
            "peer",
            "name",
            port.device,
            "netns",
            node,
        )
    ip(fab, "link", "set", port.switch_port, "mtu", str(port.mtu), "master", port.bridge, "up")
    shape(fab, port.switch_port, port.mbit, port.mtu, port.bypasses)
    # A node at an address another had (a host removed and added again) has a new MAC: its
    # interface comes up addressed and announces itself (gratuitous ARP), or its neighbours
    # would send to the old MAC until their entries expire (a new SSH connection timed out).
    sysctl(node, "net.ipv4.conf.all.arp_notify", "1")
    ip(node, "link", "set", port.device, "mtu", str(port.mtu))
    ip(node, "addr", "replace", f"{port.address}/{port.prefixlen}", "dev", port.device)
    ip(node, "link", "set", port.device, "up")
    shape(node, port.device, port.mbit, port.mtu, port.bypasses)


def wire_admin(
    names: LabNames, bridge: str, addresses: list[str], prefixlen: int, mtu: int
) -> None:
    """The admin namespace's one cable: to a core bridge of the first network; no route out."""
    fab, admin = names.fabric_ns, names.admin_ns
    ensure_netns(admin)
    if not link_exists(fab, "admin"):
        if link_exists(admin, "mgmt"):
            ip(admin, "link", "del", "mgmt")
        ip(fab, "link", "add", "admin", "type", "veth", "peer", "name", "mgmt", "netns", admin)
    ip(fab, "link", "set", "admin", "mtu", str(mtu), "master", bridge, "up")
    ip(admin, "link", "set", "mgmt", "mtu", str(mtu), "up")
    for address in addresses:
        ip(admin, "addr", "replace", f"{address}/{prefixlen}", "dev", "mgmt")


def delete_netns(ns: str) -> None:
    if netns_exists(ns):
        run(["ip", "netns", "del", ns])
