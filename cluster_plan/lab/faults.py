"""Fault injection on a node's links, all applied in the fabric namespace (or on the
node's own NIC queue for rate), so nothing a role does inside a node can undo it:

- rate:  tbf on both ends of each of the node's links (lower of plan speed and fault);
- loss:  nftables bridge table, `numgen random` drops that share of the frames the node
         sends (so a ping round trip loses about that share);
- delay: iptables NFQUEUE (br_netfilter) on the frames the node sends, held by the
         user-space stage in cluster_plan.lab.delay; with --queue-bypass, traffic flows
         undelayed whenever that stage is not running;
- down:  the switch port is set down (the node sees NO-CARRIER);
- freeze: a hung node: every process of it frozen (cgroup freezer) and every frame it sends
         dropped (the loss table at 100 %), links up. A frozen node whose kernel still
         answered ARP and TCP handshakes would be a different fault: Slurm's clients connect
         to such a primary, wait out MessageTimeout and never try the backup.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass

from cluster_plan.lab import fabric, node, state
from cluster_plan.lab.connection import PACKAGE_ROOT
from cluster_plan.lab.names import RUN_ROOT, LabError, LabNames
from cluster_plan.lab.proc import ProcRef, netns_exec, run, spawn
from cluster_plan.lab.topology import Port, wiring
from cluster_plan.plan.contract import ExpandedPlan

NFT_TABLE = "cluster_plan_lab_faults"


@dataclass(frozen=True)
class Fault:
    rate_mbit: int | None = None
    loss_pct: float | None = None
    delay_ms: float | None = None
    down: bool = False
    freeze: bool = False

    def describe(self) -> str:
        parts = []
        if self.rate_mbit is not None:
            parts.append(f"rate {self.rate_mbit}mbit")
        if self.loss_pct is not None:
            parts.append(f"loss {self.loss_pct:g}%")
        if self.delay_ms is not None:
            parts.append(f"delay {self.delay_ms:g}ms")
        if self.down:
            parts.append("link down")
        if self.freeze:
            parts.append("hung (processes frozen, nothing sent)")
        return ", ".join(parts) or "none"


_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*(k|m|g)?(bit|bps)?$", re.IGNORECASE)


def parse_rate(text: str) -> int:
    """'100mbit' / '1gbit' / '500kbit' -> Mbit/s (at least 1)."""
    match = _RATE.match(text.strip())
    if not match:
        raise LabError(f"rate {text!r} is not like 100mbit or 1gbit")
    value = (
        float(match.group(1)) * {"k": 0.001, "m": 1.0, "g": 1000.0}[(match.group(2) or "m").lower()]
    )
    if match.group(3) and match.group(3).lower() == "bps":
        value *= 8
    return max(1, round(value))


def parse_pct(text: str) -> float:
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        raise LabError(f"loss {text!r} is not a percentage like 2%") from None
    if not 0 <= value <= 100:
        raise LabError(f"loss {text!r} must be between 0% and 100%")
    return value


def parse_ms(text: str) -> float:
    raw = text.strip().lower()
    scale = 1.0
    if raw.endswith("ms"):
        raw = raw[:-2]
    elif raw.endswith("s"):
        raw, scale = raw[:-1], 1000.0
    try:
        value = float(raw) * scale
    except ValueError:
        raise LabError(f"delay {text!r} is not a duration like 5ms") from None
    if not 0 < value <= 10_000:
        raise LabError(f"delay {text!r} must be above 0 and at most 10s")
    return value


def node_ports(expanded: ExpandedPlan, host: str, network: str | None) -> list[Port]:
    if host not in expanded["hosts"]:
        raise LabError(f"no node {host!r} in the plan (nodes: {', '.join(expanded['hosts'])})")
    ports = [p for p in wiring(expanded).ports if p.host == host]
    if network is not None:
        ports = [p for p in ports if p.network == network]
        if not ports:
            raise LabError(f"node {host} has no interface on network {network!r}")
    return ports


def apply(
    names: LabNames, expanded: ExpandedPlan, host: str, fault: Fault, network: str | None = None
) -> None:
    """Replace the node's current fault (on the chosen links) with `fault`."""
    with state.locked(RUN_ROOT, names.lab):
        _apply(names, expanded, host, fault, network)


def _apply(
    names: LabNames, expanded: ExpandedPlan, host: str, fault: Fault, network: str | None
) -> None:
    st = state.load(names.state_file)
    if st is None or not fabric.netns_exists(names.fabric_ns):
        raise LabError(f"the lab {names.lab} is not up")
    ports = node_ports(expanded, host, network)
    _clear(names, expanded, host, st)
    fab = names.fabric_ns
    for port in ports:
        mbit = min(port.mbit, fault.rate_mbit or port.mbit)
        fabric.shape(fab, port.switch_port, mbit, port.mtu, port.bypasses)
        fabric.shape(names.node_ns(host), port.device, mbit, port.mtu, port.bypasses)
        if fault.down:
            fabric.ip(fab, "link", "set", port.switch_port, "down")
    if fault.freeze and not node.set_frozen(names, host, True):
        raise LabError(f"cannot freeze {host}: this kernel has no cgroup freezer for the node")
    loss_pct = 100.0 if fault.freeze else fault.loss_pct
    if loss_pct:
        _nft_loss(fab, ports, loss_pct)
    if fault.delay_ms:
        queue = list(expanded["hosts"]).index(host)
        for port in ports:
            run(
                netns_exec(
                    fab,
                    [
                        "iptables",
                        "-A",
                        "FORWARD",
                        "-m",
                        "physdev",
                        "--physdev-in",
                        port.switch_port,
                        "-j",
                        "NFQUEUE",
                        "--queue-num",
                        str(queue),
                        "--queue-bypass",
                    ],
                )
            )
        st.delays[host] = spawn(
            [
                "ip",
                "netns",
                "exec",
                fab,
                "env",
                f"PYTHONPATH={PACKAGE_ROOT}",
                sys.executable,
                "-m",
                "cluster_plan.lab.delay",
                str(queue),
                f"{fault.delay_ms:g}",
                fab,
            ],
            names.run_dir / "logs" / f"delay-{host}.log",
        )
        _wait_bound(fab, queue, st.delays[host])
    st.faults[host] = {
        "rate_mbit": fault.rate_mbit,
        "loss_pct": loss_pct,
        "delay_ms": fault.delay_ms,
        "down": fault.down,
        "freeze": fault.freeze,
        "ports": [p.switch_port for p in ports],
    }
    state.save(names.state_file, st)


def _wait_bound(fab: str, queue: int, stage: ProcRef, within_s: float = 15) -> None:
    """Until the stage holds its queue, --queue-bypass lets packets through undelayed."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        table = run(
            netns_exec(fab, ["cat", "/proc/net/netfilter/nfnetlink_queue"]), check=False
        ).stdout
        if any(line.split()[:1] == [str(queue)] for line in table.splitlines()):
            return
        if not stage.alive():
            break
        time.sleep(0.05)
    raise LabError(f"the delay stage for queue {queue} did not start (see its log)")


def loss_table(ports: list[Port], pct: float) -> str:
    """The nftables bridge table that drops that share of the frames the ports' nodes send."""
    per_10k = round(pct * 100)
    # numgen's range is 0-9999: "< 10000" is refused, so all is an unconditional drop
    share = f"numgen random mod 10000 < {per_10k} " if per_10k < 10000 else ""
    rules = "".join(f'    iifname "{p.switch_port}" {share}counter drop\n' for p in ports)
    return (
        f"table bridge {NFT_TABLE} {{\n  chain loss {{\n"
        f"    type filter hook forward priority 0; policy accept;\n{rules}  }}\n}}\n"
    )


def _nft_loss(fab: str, ports: list[Port], pct: float) -> None:
    run(netns_exec(fab, ["nft", "-f", "-"]), input_text=loss_table(ports, pct))


def loss_counters(names: LabNames) -> dict[str, int]:
    """Frames dropped by the loss fault, per switch port."""
    out = run(
        netns_exec(names.fabric_ns, ["nft", "list", "table", "bridge", NFT_TABLE]), check=False
    ).stdout
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r'iifname "([^"]+)".*?counter packets (\d+)', out)
    }


def clear(names: LabNames, expanded: ExpandedPlan, host: str) -> bool:
    """Remove every fault from the node; returns whether there was one."""
    with state.locked(RUN_ROOT, names.lab):
        return _clear(names, expanded, host, None)


def _clear(names: LabNames, expanded: ExpandedPlan, host: str, st: state.LabState | None) -> bool:
    st = st or state.load(names.state_file)
    if st is None:
        raise LabError(f"the lab {names.lab} is not up")
    had = host in st.faults
    fab = names.fabric_ns
    delay = st.delays.pop(host, None)
    if delay:
        delay.stop()
    for port in node_ports(expanded, host, None):
        fabric.shape(fab, port.switch_port, port.mbit, port.mtu, port.bypasses)
        fabric.shape(names.node_ns(host), port.device, port.mbit, port.mtu, port.bypasses)
        fabric.ip(fab, "link", "set", port.switch_port, "up")
        while (
            run(
                netns_exec(
                    fab,
                    [
                        "iptables",
                        "-D",
                        "FORWARD",
                        "-m",
                        "physdev",
                        "--physdev-in",
                        port.switch_port,
                        "-j",
                        "NFQUEUE",
                        "--queue-num",
                        str(list(expanded["hosts"]).index(host)),
                        "--queue-bypass",
                    ],
                ),
                check=False,
            ).returncode
            == 0
        ):
            pass
    st.faults.pop(host, None)
    _rewrite_loss(names, expanded, st)
    node.set_frozen(names, host, False)  # thawed once its frames flow: it wakes up connected
    state.save(names.state_file, st)
    return had


def _rewrite_loss(names: LabNames, expanded: ExpandedPlan, st: state.LabState) -> None:
    """Rebuild the loss table from the faults still active on other nodes."""
    fab = names.fabric_ns
    run(netns_exec(fab, ["nft", "delete", "table", "bridge", NFT_TABLE]), check=False)
    for host, spec in st.faults.items():
        if spec.get("loss_pct"):
            ports = [
                p
                for p in node_ports(expanded, host, None)
                if p.switch_port in spec.get("ports", [])
            ]
            _nft_loss(fab, ports, float(spec["loss_pct"]))
