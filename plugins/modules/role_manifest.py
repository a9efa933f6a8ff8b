#!/usr/bin/python
"""Record on a host what a role manages there: the files it rendered (with checksums), the
services that must run, the packages it holds, the firewall tables it loaded, and the state
that is precious (what backups must keep, and how to make it consistent first).

`cluster-plan drift` compares the live host with these records; the backup role backs up
every precious path they declare. One JSON file per role, rewritten only when it changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: role_manifest
short_description: Record what a role manages on a host (drift detection, backups)
description:
  - Writes DIR/ROLE.json with the SHA-256 of each file the role rendered, the services that
    must be active, the installed version of each package the role holds, the live ruleset
    of the nftables tables it loaded, and the role's precious state.
  - Call it last in a role, after C(meta: flush_handlers), so the records are what runs.
  - Idempotent (changed only when the record changes); in check mode nothing is written.
options:
  role: {description: The role's name (the file name)., type: str, required: true}
  files:
    description: Files the role owns; a missing file is recorded as null.
    type: list
    elements: path
    default: []
  services: {description: Units that must be active., type: list, elements: str, default: []}
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
  precious:
    description:
      - State backups must keep. Each item has C(name) (unique on the host), C(paths)
        (absolute), and optional shell commands C(before_backup) (makes the state
        consistent; a failure fails the backup), C(restore_before) and C(restore_after)
        (stop and start what uses the state around a restore), and C(exclude) patterns.
    type: list
    elements: dict
    default: []
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
Runner = Callable[[list[str]], tuple[int, str, str]]


def sha256_of(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def parse_dpkg_query(text: str) -> dict[str, dict[str, str]]:
    """`dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Want}\\n'` -> {name: {...}}."""
    packages = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0]:
            packages[parts[0]] = {"version": parts[1], "selection": parts[2]}
    return packages


def held_versions(names: list[str], run: Runner) -> tuple[dict[str, str], list[str]]:
    """{package: installed version} for held packages, and the problems found."""
    if not names:
        return {}, []
    fmt = r"${Package}\t${Version}\t${db:Status-Want}\n"  # dpkg-query expands \t and \n
    rc, out, err = run(["dpkg-query", "-W", "-f", fmt, *names])
    found = parse_dpkg_query(out)
    problems = [f"{n} is not installed" for n in names if not found.get(n, {}).get("version")]
    problems += [
        f"{n} is not held (selection {found[n]['selection']})"
        for n in names
        if found.get(n, {}).get("version") and found[n]["selection"] != "hold"
    ]
    if rc not in (0, 1) and not problems:
        problems.append(f"dpkg-query failed: {err.strip()}")
    return {n: found[n]["version"] for n in names if found.get(n, {}).get("version")}, problems


def normalize_ruleset(text: str) -> str:
    """nft's listing without blank lines or trailing spaces (stable between nft versions)."""
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


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


def build_manifest(params: dict[str, Any], run: Runner) -> tuple[dict[str, Any], list[str]]:
    problems = check_precious(params["precious"])
    held, held_problems = held_versions(params["held_packages"], run)
    problems += held_problems
    rulesets = {}
    for table in params["nftables_tables"]:
        rc, out, err = run(["nft", "-s", "list", "table", *table.split()])
        if rc != 0:
            problems.append(f"nft list table {table}: {err.strip() or rc}")
        rulesets[table] = normalize_ruleset(out)
    manifest = {
        "role": params["role"],
        "files": {path: sha256_of(path) for path in sorted(set(params["files"]))},
        "services": sorted(set(params["services"])),
        "held_packages": held,
        "nftables": rulesets,
        "precious": [
            {key: item[key] for key in sorted(item) if item[key] not in (None, "", [])}
            for item in params["precious"]
        ],
    }
    return manifest, problems


def write_if_changed(path: str, manifest: dict[str, Any], check_mode: bool) -> bool:
    text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
    try:
        with open(path) as handle:
            if handle.read() == text:
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


def _run(argv: list[str]) -> tuple[int, str, str]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        return 127, "", str(exc)
    return done.returncode, done.stdout, done.stderr


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "role": {"type": "str", "required": True},
            "files": {"type": "list", "elements": "path", "default": []},
            "services": {"type": "list", "elements": "str", "default": []},
            "held_packages": {"type": "list", "elements": "str", "default": []},
            "nftables_tables": {"type": "list", "elements": "str", "default": []},
            "precious": {"type": "list", "elements": "dict", "default": []},
            "dir": {"type": "path", "default": "/var/lib/cluster-plan/manifest"},
        },
        supports_check_mode=True,
    )
    manifest, problems = build_manifest(module.params, _run)
    path = os.path.join(module.params["dir"], f"{module.params['role']}.json")
    if problems and not module.check_mode:
        module.fail_json(msg="; ".join(problems), manifest=manifest, path=path)
    for problem in problems:  # check mode: what is not installed yet is no failure
        module.warn(problem)
    changed = write_if_changed(path, manifest, module.check_mode)
    module.exit_json(changed=changed, manifest=manifest, path=path)


if __name__ == "__main__":
    main()
