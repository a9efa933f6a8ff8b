"""What a role left on a host at its last converge, read back from the live host.

A role's record (/var/lib/cluster-plan/manifest/ROLE.json, written by the module
role_manifest) names what the role manages: files (content, owner, mode), other paths,
packages, services and units started at boot, held packages, nftables tables and probes
(read-only commands whose output the role settles, such as a user's passwd entry or the
cluster's pools). `live_state` reads each of them now; the module role_converged
compares that with the record, and `cluster-plan drift` reads the same records.
"""

from __future__ import annotations

import contextlib
import grp
import hashlib
import json
import os
import pwd
import stat
import subprocess
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

# argv -> (rc, stdout, stderr); a test passes recorded outputs instead of running commands.
Runner = Callable[[list[str]], tuple[int, str, str]]
PROBE_TIMEOUT_S = 30
TIMED_OUT = 124
# a probe asked twice, in the burst and alone, with no answer either time
UNANSWERED = f"no answer within {PROBE_TIMEOUT_S} s, twice"


def run(argv: list[str]) -> tuple[int, str, str]:
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, check=False, timeout=PROBE_TIMEOUT_S
        )
    except FileNotFoundError as exc:
        return 127, "", str(exc)
    except subprocess.TimeoutExpired:
        return TIMED_OUT, "", f"no answer within {PROBE_TIMEOUT_S} s"
    return done.returncode, done.stdout, done.stderr


def sha256_of(path: str) -> str | None:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        return None
    return digest.hexdigest()


def stat_summary(path: str) -> str | None:
    """Kind, owner, group and mode (a link: its target): what a role sets besides content."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return f"link -> {os.readlink(path)}"
    kind = (
        "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
    )
    return f"{kind} {_name(pwd.getpwuid, info.st_uid)}:{_name(grp.getgrgid, info.st_gid)} " + (
        f"{stat.S_IMODE(info.st_mode):04o}"
    )


def _name(lookup: Callable[[int], Any], number: int) -> str:
    try:
        return str(lookup(number)[0])
    except KeyError:
        return str(number)


def installed(names: list[str], runner: Runner) -> dict[str, bool]:
    """Whether each package is installed (dpkg, else rpm); versions do not count, since
    unattended upgrades move them and a role that installs a package does not."""
    if not names:
        return {}
    rc, out, _ = runner(["dpkg-query", "-W", "-f", r"${Package}\t${db:Status-Status}\n", *names])
    if rc in (0, 1) and (out or rc == 1):
        states = dict(line.split("\t", 1) for line in out.splitlines() if "\t" in line)
        return {name: states.get(name) == "installed" for name in names}
    rc, out, _ = runner(["rpm", "-q", "--qf", r"%{NAME}\n", *names])
    present = set(out.split())
    return {name: name in present for name in names}


def parse_dpkg_query(text: str) -> dict[str, dict[str, str]]:
    """`dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Want}\\n'` -> {name: {...}}."""
    packages = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0]:
            packages[parts[0]] = {"version": parts[1], "selection": parts[2]}
    return packages


def held_versions(names: list[str], runner: Runner) -> tuple[dict[str, str], list[str]]:
    """{package: installed version} for held packages, and the problems found."""
    if not names:
        return {}, []
    fmt = r"${Package}\t${Version}\t${db:Status-Want}\n"  # dpkg-query expands \t and \n
    rc, out, err = runner(["dpkg-query", "-W", "-f", fmt, *names])
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


def rulesets(tables: Iterable[str], runner: Runner) -> tuple[dict[str, str], list[str]]:
    found, problems = {}, []
    for table in tables:
        rc, out, err = runner(["nft", "-s", "list", "table", *table.split()])
        if rc != 0:
            problems.append(f"nft list table {table}: {err.strip() or rc}")
        found[table] = normalize_ruleset(out)
    return found, problems


def parse_unit_states(text: str) -> dict[str, dict[str, str]]:
    """`systemctl show -p Id,ActiveState,UnitFileState UNIT...` -> {unit: {active, enabled}}.

    systemctl prints one block per unit, in the order asked, separated by blank lines."""
    units: dict[str, dict[str, str]] = {}
    for block in text.strip().split("\n\n"):
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if fields.get("Id"):
            units[fields["Id"]] = {
                "active": fields.get("ActiveState", ""),
                "enabled": fields.get("UnitFileState", ""),
            }
    return units


def unit_states(units: list[str], runner: Runner) -> dict[str, dict[str, str]]:
    if not units:
        return {}
    rc, out, _ = runner(["systemctl", "show", "-p", "Id,ActiveState,UnitFileState", *units])
    shown = parse_unit_states(out) if rc == 0 else {}
    # systemctl names a unit asked for without its suffix by its full name ("ssh.service")
    by_name = {}
    for unit in units:
        full = unit if "." in unit else f"{unit}.service"
        by_name[unit] = shown.get(full) or shown.get(unit) or {"active": "unknown", "enabled": ""}
    return by_name


def probe_digest(command: str, keep: list[str] | None, runner: Runner) -> str:
    """SHA-256 of a read-only shell command's exit status and output. With `keep`, the
    output is JSON and only those keys count: what the role settles, not the counters and
    epochs beside it."""
    return probe_reading(command, keep, runner)[1]


def probe_reading(command: str, keep: list[str] | None, runner: Runner) -> tuple[int, str]:
    """The probe's exit status and its digest (probe_digest)."""
    rc, out, _ = runner(["/bin/sh", "-c", command])
    if keep and rc == 0:
        # not JSON: the raw output counts (a change of format reads as a change)
        with contextlib.suppress(ValueError):
            out = json.dumps(project(json.loads(out), keep), sort_keys=True)
    return rc, hashlib.sha256(f"{rc}\n{out}".encode()).hexdigest()


def read_probes(
    specs: list[tuple[str, dict[str, Any]]], runner: Runner
) -> tuple[list[str], list[str]]:
    """Each probe's digest, and the names of those that got no answer in time. Probes are
    separate commands (the ceph CLI takes a second to start): they run at once, and one
    that got no answer is asked again alone, since on a loaded host several CLIs starting
    together can each outlast the bound."""

    def read(spec: dict[str, Any]) -> tuple[int, str]:
        return probe_reading(spec["command"], spec.get("keep"), runner)

    with ThreadPoolExecutor(max_workers=8) as pool:
        readings = list(pool.map(lambda item: read(item[1]), specs))
    readings = [
        read(spec) if rc == TIMED_OUT else (rc, digest)
        for (_, spec), (rc, digest) in zip(specs, readings, strict=True)
    ]
    unanswered = [
        name for (name, _), (rc, _) in zip(specs, readings, strict=True) if rc == TIMED_OUT
    ]
    return [digest for _, digest in readings], unanswered


def project(data: Any, keep: list[str]) -> Any:
    """The parts of JSON data that `keep` names: dotted keys, applied to each item of a list
    ("osds.up" keeps the `up` of every item of `osds`)."""
    if isinstance(data, list):
        return [project(item, keep) for item in data]
    if not isinstance(data, dict):
        return data
    wanted: dict[str, list[str]] = {}
    for path in keep:
        head, _, rest = path.partition(".")
        wanted.setdefault(head, [])
        if rest:
            wanted[head].append(rest)
        else:
            wanted[head] = [""]  # the whole value, whatever else is asked of it
    return {
        key: data[key] if "" in subpaths or not subpaths else project(data[key], subpaths)
        for key, subpaths in wanted.items()
        if key in data
    }


def live_state(what: dict[str, Any], runner: Runner) -> tuple[dict[str, Any], list[str]]:
    """Read now what a record names: `what` holds files, paths, packages, services (units
    that must be active), boot_units (units that must only start at boot), held_packages,
    nftables_tables and probes ({name: {command, keep}}). Returns the record's
    state fields (plus `active`, each service's state, which a record does not keep: its
    services must all be active) and the problems met reading them."""
    files = sorted(set(what.get("files") or []))
    services = sorted(set(what.get("services") or []))
    boot_units = sorted(set(what.get("boot_units") or []) - set(services))
    units = unit_states(services + boot_units, runner)
    held, problems = held_versions(list(what.get("held_packages") or []), runner)
    tables, table_problems = rulesets(what.get("nftables_tables") or [], runner)
    specs = sorted((what.get("probes") or {}).items())
    digests, unanswered = read_probes(specs, runner)
    probes = {
        name: {
            "command": spec["command"],
            **({"keep": spec["keep"]} if spec.get("keep") else {}),
            "digest": digest,
        }
        for (name, spec), digest in zip(specs, digests, strict=True)
    }
    state = {
        "files": {path: sha256_of(path) for path in files},
        "paths": {
            path: stat_summary(path) for path in sorted({*files, *(what.get("paths") or [])})
        },
        "packages": installed(sorted(set(what.get("packages") or [])), runner),
        "services": services,
        "active": {unit: units[unit]["active"] for unit in services},
        "enabled": {unit: state["enabled"] for unit, state in units.items()},
        "held_packages": held,
        "nftables": tables,
        "probes": probes,
        "unanswered": unanswered,
    }
    return state, problems + table_problems


def what_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a stored record names, in live_state's terms."""
    return {
        "files": list(record.get("files") or {}),
        "paths": list(record.get("paths") or {}),
        "packages": list(record.get("packages") or {}),
        "services": list(record.get("services") or []),
        "boot_units": list(record.get("enabled") or {}),
        "held_packages": list(record.get("held_packages") or {}),
        "nftables_tables": list(record.get("nftables") or {}),
        "probes": record.get("probes") or {},
    }


def differences(record: dict[str, Any], runner: Runner) -> list[str]:
    """Why the host no longer is what the record says (empty: it still is)."""
    live, problems = live_state(what_of(record), runner)
    reasons = [*_file_differences(record, live), *_package_differences(record, live)]
    reasons += _unit_differences(record, live)
    for package, version in _recorded(record, "held_packages"):
        if live["held_packages"].get(package) != version:
            reasons.append(f"package {package} is no longer {version}")
    reasons += [f"package {problem}" for problem in problems if "held" in problem]
    for table, ruleset in _recorded(record, "nftables"):
        if live["nftables"].get(table) != ruleset:
            reasons.append(f"nftables table {table} changed")
    for name, probe in _recorded(record, "probes"):
        if name in live["unanswered"]:
            reasons.append(f"{name}: {UNANSWERED}")
        elif live["probes"][name]["digest"] != probe.get("digest"):
            reasons.append(f"{name} changed")
    return list(dict.fromkeys(reasons))


def _recorded(record: dict[str, Any], kind: str) -> list[tuple[str, Any]]:
    """The record's entries of one kind, sorted by name."""
    return sorted((record.get(kind) or {}).items())


def _file_differences(record: dict[str, Any], live: dict[str, Any]) -> list[str]:
    reasons = []
    for path, digest in _recorded(record, "files"):
        now = live["files"][path]
        if now != digest:
            reasons.append(f"file {path} " + ("is gone" if now is None else "changed"))
    for path, summary in _recorded(record, "paths"):
        if live["paths"][path] != summary:
            reasons.append(f"{path} is {live['paths'][path] or 'gone'}, was {summary or 'absent'}")
    return reasons


def _package_differences(record: dict[str, Any], live: dict[str, Any]) -> list[str]:
    return [
        f"package {package} is {'not ' if present else ''}installed"
        for package, present in _recorded(record, "packages")
        if live["packages"].get(package) != present
    ]


def _unit_differences(record: dict[str, Any], live: dict[str, Any]) -> list[str]:
    reasons = [
        f"service {unit} is {live['active'][unit] or 'unknown'}"
        for unit in live["services"]
        if live["active"][unit] != "active"
    ]
    for unit, enabled in sorted((record.get("enabled") or {}).items()):
        now = live["enabled"].get(unit)
        if now != enabled:
            reasons.append(f"service {unit} is {now or '?'} at boot, was {enabled}")
    return reasons
