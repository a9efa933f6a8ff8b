#!/usr/bin/python
"""Record on a host what a role manages there: the files it rendered (with checksums), the
services that must run (and whether they start at boot), the packages it holds, the
firewall tables it loaded, the output of read-only probes of what else it settles (users,
addresses, cluster state), the inputs it converged from, and the state that is precious
(what backups must keep, and how to make it consistent first).

`cluster-plan drift` compares the live host with these records; the backup role backs up
every precious path they declare; a stage of site.yml whose records all still hold, from the
same inputs, is skipped (role_converged). One JSON file per role, rewritten only when it
changes; its modification time is the role's last converge.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cluster_plan.cluster.plugins.module_utils.role_record import (
    UNANSWERED,
    Runner,
    live_state,
    run,
)

DOCUMENTATION = r"""
module: role_manifest
short_description: Record what a role manages on a host (drift detection, backups)
description:
  - Writes DIR/ROLE.json with the SHA-256 of each file the role rendered, the services that
    must be active, the installed version of each package the role holds, the live ruleset
    of the nftables tables it loaded, and the role's precious state.
  - Call it last in a role, after C(meta: flush_handlers), so the records are what runs.
  - Idempotent (changed only when the record changes; an unchanged record's modification
    time is set to now, the role's last converge); in check mode nothing is written.
options:
  role: {description: The role's name (the file name)., type: str, required: true}
  files:
    description: Files the role owns; a missing file is recorded as null.
    type: list
    elements: path
    default: []
  paths:
    description:
      - Paths (directories, links, files) whose kind, owner, group and mode (a link's target)
        the role sets; the files of C(files) are recorded so too.
    type: list
    elements: path
    default: []
  packages:
    description: Packages the role installs (whether each is installed counts, not its version).
    type: list
    elements: str
    default: []
  services:
    description: Units that must be active; whether each starts at boot is recorded too.
    type: list
    elements: str
    default: []
  boot_units:
    description: Units the role only enables (targets); whether each starts at boot is recorded.
    type: list
    elements: str
    default: []
  held_packages:
    description: Packages the role holds (dpkg); their installed versions are recorded.
    type: list
    elements: str
    default: []
  nftables_tables:
    description: nftables tables (C(family name)) whose live ruleset is recorded.
    type: list
    elements: str
    default: []
  probes:
    description:
      - Read-only shell commands whose output the role settles (a user's passwd entry, a
        link's addresses, the cluster's pools). Each item has C(name), C(command) and,
        for JSON output, C(keep), the keys that count (of each item of a list).
      - The digest of each command's exit status and output is recorded; a later output
        that differs means the host drifted from this converge.
      - Probes run at once, each within 30 s. One that gets no answer is asked again alone;
        still none, it is recorded as unanswered with a warning, and the next run's stage
        gate runs the role again.
    type: list
    elements: dict
    default: []
  inputs:
    description:
      - Digest of what the role converged from (its code, variables, the plan, host facts;
        the lookup C(cluster_plan.cluster.converge_inputs)). Empty when not known.
    type: str
    default: ""
  precious:
    description:
      - State backups must keep. Each item has C(name) (unique on the host), C(paths)
        (absolute), and optional shell commands C(before_backup) (makes the state
        consistent; a failure fails the backup), C(restore_before) and C(restore_after)
        (stop and start what uses the state around a restore), and C(exclude) patterns.
    type: list
    elements: dict
    default: []
  partial:
    description:
      - The run carried out only some of the role's tasks (C(ansible-playbook --tags), as
        C(cluster-plan change) does to tell every host of an added or removed one). Give
        only what those tasks settle: the files, paths, nftables tables and probes given are
        read again over the last record, the rest of it is kept as it was, and its inputs
        are emptied, so that the next run of the stage runs in full instead of trusting a
        converge that did not happen. Without a last record nothing is written (a partial
        record would hide the rest from drift and from backups).
    type: bool
    default: false
  dir: {description: Where the records live., type: path, default: /var/lib/cluster-plan/manifest}
"""

RETURN = r"""
manifest:
  description: The record written (or that would be written).
  type: dict
  returned: always
path: {description: The record's file., type: str, returned: always}
"""

PRECIOUS_KEYS = {"name", "paths", "before_backup", "restore_before", "restore_after", "exclude"}


def check_precious(items: list[dict[str, Any]]) -> list[str]:
    problems = []
    names = [item.get("name") for item in items]
    for item in items:
        name = item.get("name")
        if not isinstance(name, str) or not name:
            problems.append(f"precious item without a name: {item!r}")
            continue
        if unknown := sorted(set(item) - PRECIOUS_KEYS):
            problems.append(f"precious {name}: unknown keys {', '.join(unknown)}")
        paths = item.get("paths")
        if not isinstance(paths, list) or not paths:
            problems.append(f"precious {name}: paths must be a non-empty list")
        elif bad := [p for p in paths if not (isinstance(p, str) and p.startswith("/"))]:
            problems.append(f"precious {name}: paths must be absolute: {bad}")
        if names.count(name) > 1:
            problems.append(f"precious {name}: declared twice")
    return sorted(set(problems))


def probe_specs(items: list[dict[str, Any]]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    specs, problems = {}, []
    for item in items:
        name, command = item.get("name"), item.get("command")
        if not isinstance(name, str) or not name or not isinstance(command, str) or not command:
            problems.append(f"a probe needs a name and a command: {item!r}")
        elif unknown := sorted(set(item) - {"name", "command", "keep"}):
            problems.append(f"probe {name}: unknown keys {', '.join(unknown)}")
        elif name in specs:
            problems.append(f"probe {name}: declared twice")
        else:
            specs[name] = {"command": command, "keep": list(item.get("keep") or [])}
    return specs, problems


Reading = tuple[dict[str, Any], list[str], list[str]]  # record, problems, warnings


def build_manifest(params: dict[str, Any], runner: Runner) -> Reading:
    problems = check_precious(params["precious"])
    probes, probe_problems = probe_specs(params["probes"])
    state, state_problems = live_state(
        {
            "files": params["files"],
            "paths": params["paths"],
            "packages": params["packages"],
            "services": params["services"],
            "boot_units": params["boot_units"],
            "held_packages": params["held_packages"],
            "nftables_tables": params["nftables_tables"],
            "probes": probes,
        },
        runner,
    )
    state.pop("active")  # every service listed must be active: nothing to keep
    # Recorded as it read (no answer), so the next run's stage gate runs the stage again.
    warnings = [
        f"probe {name}: {UNANSWERED}; recorded as unanswered" for name in state.pop("unanswered")
    ]
    manifest = {
        "role": params["role"],
        "inputs": params["inputs"],
        **state,
        "precious": [
            {key: item[key] for key in sorted(item) if item[key] not in (None, "", [])}
            for item in params["precious"]
        ],
    }
    return manifest, problems + probe_problems + state_problems, warnings


def merge_partial(last: dict[str, Any], fresh: dict[str, Any]) -> dict[str, Any]:
    """A partial run's record: what it read again (`fresh`: files, their paths, nftables
    tables, probes) over the last record, with no inputs (the stage gate then runs the
    stage)."""
    merged = {**last, "inputs": ""}
    for section in ("files", "paths", "nftables", "probes"):
        merged[section] = {**(last.get(section) or {}), **(fresh.get(section) or {})}
    return merged


def read_record(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as handle:
            record = json.load(handle)
    except (FileNotFoundError, ValueError):
        return None  # none yet, or unreadable: a partial run has nothing to update
    return record if isinstance(record, dict) else None


def record(
    params: dict[str, Any], path: str, runner: Runner
) -> tuple[dict[str, Any] | None, list[str], list[str]]:
    """The record to write at `path`: all of it, or after a partial run only what that run
    writes, read again, over the last record."""
    if not params["partial"]:
        return build_manifest(params, runner)
    last = read_record(path)
    if last is None:
        return None, [], []
    unread = ("packages", "services", "boot_units", "held_packages", "precious")
    fresh, problems, warnings = build_manifest({**params, **{key: [] for key in unread}}, runner)
    return merge_partial(last, fresh), problems, warnings


def write_if_changed(path: str, manifest: dict[str, Any], check_mode: bool) -> bool:
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    try:
        with open(path) as handle:
            if handle.read() == text:
                if not check_mode:
                    os.utime(path)  # the modification time is the role's last converge
                return False
    except FileNotFoundError:
        pass
    if check_mode:
        return True
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".manifest-")
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "role": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "path", "default": []},
            "paths": {"type": "list", "elements": "path", "default": []},
            "packages": {"type": "list", "elements": "str", "default": []},
            "services": {"type": "list", "elements": "str", "default": []},
            "boot_units": {"type": "list", "elements": "str", "default": []},
            "held_packages": {"type": "list", "elements": "str", "default": []},
            "nftables_tables": {"type": "list", "elements": "str", "default": []},
            "probes": {"type": "list", "elements": "dict", "default": []},
            "inputs": {"type": "str", "default": ""},
            "precious": {"type": "list", "elements": "dict", "default": []},
            "partial": {"type": "bool", "default": False},
            "dir": {"type": "path", "default": "/var/lib/cluster-plan/manifest"},
        },
        supports_check_mode=True,
    )
    path = os.path.join(module.params["dir"], f"{module.params['role']}.json")
    manifest, problems, warnings = record(module.params, path, run)
    if manifest is None:
        module.exit_json(changed=False, manifest={}, path=path, msg="no record to update")
        return
    if problems and not module.check_mode:
        module.fail_json(msg="; ".join(problems), manifest=manifest, path=path)
    for problem in problems:  # check mode: what is not installed yet is no failure
        module.warn(problem)
    for warning in warnings:
        module.warn(warning)
    changed = write_if_changed(path, manifest, module.check_mode)
    module.exit_json(changed=changed, manifest=manifest, path=path)


if __name__ == "__main__":
    main()
