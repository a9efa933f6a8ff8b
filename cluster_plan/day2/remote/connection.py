"""The SSH settings Ansible uses for a plan, turned into pyinfra's host data.

The inventory plugin gives group `all` `ansible_user` and `ansible_port` from the plan's
`access`, and a lab plan the lab's key and SSH options (a ProxyCommand through the admin
namespace); `connection_vars` computes the same here and a test keeps the two equal. The
`-o` options, and those of the user's `--ssh-*` (cluster_plan.transport's one set), become
an ssh_config file that pyinfra (paramiko) reads.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from cluster_plan.plan.contract import ExpandedPlan
from cluster_plan.transport.options import SshOptions

# ssh options paramiko cannot use (connection sharing) or that only tune ssh's own output
_IGNORED = {"controlmaster", "controlpath", "controlpersist", "loglevel"}


def connection_vars(expanded: ExpandedPlan, plan_path: str) -> dict[str, Any]:
    """What the inventory plugin sets on group `all` for connections."""
    access = expanded["access"]
    result: dict[str, Any] = {
        "ansible_user": access["ansible_user"],
        "ansible_port": access["ssh_port"],
    }
    if expanded["lab"] is not None:
        from cluster_plan.lab import connection_vars as lab_vars

        result.update({"ansible_port": 22, **lab_vars(expanded, plan_path)})
    return result


def ssh_config_options(common_args: str) -> dict[str, str]:
    """`-o Key=Value` pairs of ansible_ssh_common_args -> {Key: Value}."""
    words = shlex.split(common_args)
    options = {}
    for i, word in enumerate(words):
        if word == "-o" and i + 1 < len(words):
            key, sep, value = words[i + 1].partition("=")
            if not sep:
                key, _, value = words[i + 1].partition(" ")
            if key.lower() not in _IGNORED:
                options[key] = value
    return options


def write_ssh_config(options: dict[str, str], path: Path) -> Path:
    lines = ["Host *"] + [f"    {key} {value}" for key, value in options.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def pyinfra_hosts(
    expanded: ExpandedPlan,
    plan_path: str,
    workdir: Path,
    hosts: list[str] | None = None,
    ssh: SshOptions | None = None,
) -> dict[str, dict[str, Any]]:
    """pyinfra host data per plan host: address, port, user, key, and an ssh_config file
    (written into ``workdir``) with the inventory's SSH options, and over them the user's
    (`--ssh-*`, as acceptance and change take them: their `-o` options reach paramiko)."""
    conn = connection_vars(expanded, plan_path)
    ssh = ssh or SshOptions()
    if ssh.key:
        conn["ansible_ssh_private_key_file"] = ssh.key
    common = [str(conn.get("ansible_ssh_common_args", "")), shlex.join(ssh.arguments())]
    options = ssh_config_options(" ".join(common))
    data: dict[str, Any] = {
        "ssh_port": int(conn["ansible_port"]),
        "ssh_user": ssh.user or conn["ansible_user"],
        # a read-only audit: record a host key met the first time, refuse a changed one
        "ssh_strict_host_key_checking": options.pop("StrictHostKeyChecking", "accept-new"),
        "ssh_connect_retries": 0,
    }
    if known := options.pop("UserKnownHostsFile", None):
        data["ssh_known_hosts_file"] = known
    if conn.get("ansible_ssh_private_key_file"):
        data["ssh_key"] = str(conn["ansible_ssh_private_key_file"])
        data["ssh_look_for_keys"] = False
        data["ssh_allow_agent"] = False
    if options:
        data["ssh_config_file"] = str(write_ssh_config(options, workdir / "ssh_config"))
    chosen = hosts if hosts is not None else list(expanded["hosts"])
    return {name: {**data, "ssh_hostname": expanded["hosts"][name]["address"]} for name in chosen}
