"""What is actually running, read from the machine (never only from the state file)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster_plan.lab import fabric, images, node, state
from cluster_plan.lab.names import LabNames
from cluster_plan.lab.topology import plan_changes
from cluster_plan.plan.contract import ExpandedPlan


def collect(names: LabNames, expanded: ExpandedPlan) -> dict[str, Any]:
    st = state.load(names.state_file)
    nodes = {host: _node_status(names, st, host, spec) for host, spec in expanded["hosts"].items()}
    services = {
        name: ref.alive()
        for name, ref in (st.services.items() if st else [])
        if not name.startswith("boot-")
    }
    namespaces = fabric.lab_namespaces(names, expanded["hosts"])
    running = sum(1 for n in nodes.values() if n["sshd"])
    up = running == len(nodes) and all(services.values()) and bool(services)
    stale = bool(st and plan_changes(expanded, st.fabric_digest, st.host_digests)[0])
    return {
        "lab": names.lab,
        "up": up and not stale,
        "plan_changed": stale,
        "running": running,
        "total": len(nodes),
        "condition": _condition(up, stale, leftovers=bool(namespaces) or st is not None),
        "nodes": nodes,
        "services": services,
        "namespaces": namespaces,
    }


def _condition(up: bool, stale: bool, leftovers: bool) -> str:
    """up; outdated (up, but the plan changed since); degraded (something is left); down."""
    if up:
        return "outdated" if stale else "up"
    return "degraded" if leftovers else "down"


def _node_status(
    names: LabNames, st: state.LabState | None, host: str, spec: Mapping[str, Any]
) -> dict[str, Any]:
    init = st.nodes.get(host) if st else None
    if init is None or not init.alive():
        init = None
    return {
        "address": spec.get("address"),
        "netns": fabric.netns_exists(names.node_ns(host)),
        "init_pid": init.pid if init else None,
        "state": node.system_state(init) if init else "down",
        "sshd": bool(init and node.sshd_listening(init)),
        "fault": (st.faults.get(host) if st else None),
        "pss_mib": round(node.memory_mib(names, host)["pss_mib"], 1) if init else None,
        # what it boots on: `bare` (the base image) or its node image's top layer
        "image": images.describe(images.recorded(names.node_dir(host))),
    }


def render(report: dict[str, Any]) -> str:
    lines = [
        f"lab {report['lab']}: {report['condition']} "
        f"({report['running']}/{report['total']} nodes reachable)"
    ]
    if report["condition"] == "down":
        return lines[0]
    lines.append(
        f"{'NODE':<12} {'ADDRESS':<15} {'SYSTEMD':<12} {'SSHD':<5} {'PID':>7} {'PSS MiB':>8}  "
        f"{'IMAGE':<32} FAULT"
    )
    for host, info in report["nodes"].items():
        fault = info["fault"]
        fault_text = (
            "-"
            if not fault
            else ", ".join(
                f"{k}={v}" for k, v in fault.items() if v not in (None, False) and k != "ports"
            )
        )
        lines.append(
            f"{host:<12} {info['address'] or '-':<15} {info['state']:<12} "
            f"{'yes' if info['sshd'] else 'no':<5} {info['init_pid'] or '-':>7} "
            f"{info['pss_mib'] or '-':>8}  {info.get('image', '-'):<32} {fault_text}"
        )
    for name, alive in report["services"].items():
        lines.append(f"service {name}: {'running' if alive else 'DEAD'}")
    if report.get("plan_changed"):
        lines.append(
            "the plan changed since `lab up` (hosts, addresses or switches): "
            "`lab down` then `lab up`"
        )
    if report["condition"] == "degraded":
        lines.append("some of the lab is missing: `lab down` then `lab up` rebuilds it")
    return "\n".join(lines)
