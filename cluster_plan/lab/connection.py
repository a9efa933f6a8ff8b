"""How Ansible (and `lab ssh`) reach lab nodes: SSH through the admin namespace only."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from cluster_plan.lab.names import LabNames, for_plan
from cluster_plan.lab.proc import run
from cluster_plan.plan.contract import ExpandedPlan

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def proxy_command(admin_ns: str) -> str:
    """A ProxyCommand that fails fast with a clear message when the lab is down."""
    return (
        f"env PYTHONPATH={shlex.quote(str(PACKAGE_ROOT))} {shlex.quote(sys.executable)}"
        f" -m cluster_plan.lab.proxycommand {admin_ns} %h %p"
    )


def ssh_options(expanded: ExpandedPlan) -> list[str]:
    names = for_plan(expanded)
    return [
        "-o",
        f"ProxyCommand={proxy_command(names.admin_ns)}",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "LogLevel=ERROR",
        "-o",
        "ConnectTimeout=10",
    ]


def connection_vars(expanded: ExpandedPlan, plan_path: str) -> dict[str, str]:
    """Ansible connection variables for group `all` of a lab plan.

    plan_path is accepted for symmetry with the inventory plugin; the names depend only on
    the plan's cluster name (or $CLUSTER_PLAN_LAB_ID).
    """
    del plan_path
    names = for_plan(expanded)
    # Labs of one plan share addresses: without a per-lab ControlPath, ansible.cfg's
    # ControlPersist would reuse a master connection to another lab's node of that address.
    control = ["-o", f"ControlPath={names.control_dir}/%C"]
    return {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(names.ssh_key),
        "ansible_ssh_common_args": " ".join(
            shlex.quote(o) for o in [*ssh_options(expanded), *control]
        ),
    }


def close_master(names: LabNames, address: str) -> None:
    """End the master connection ssh keeps to a node's address (ControlPersist, through the
    lab's ControlPath): it outlives a node powered off, and the next node at that address (a
    re-provisioned or re-added host) would be asked through it and time out. `-O exit` talks
    to the local socket only; no packet is sent. Nothing to do without a master."""
    if not names.control_dir.is_dir():
        return
    control = f"ControlPath={names.control_dir}/%C"
    run(["ssh", "-o", control, "-O", "exit", "-l", "root", address], check=False, timeout=10)
