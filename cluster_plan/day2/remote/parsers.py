"""Parsers for what the facts of cluster_plan.day2.remote.facts print on a host.

Each takes the command's standard output as text and returns plain data (JSON types), so
that it can be tested against recorded outputs (tests/remote/fixtures) without a host.
Malformed output raises FactParseError naming what was wrong, never anything else. JSON is
read with cluster_plan.plan.input_files' rules: NaN and Infinity are refused with their key.
"""

from __future__ import annotations

import math
import re
from typing import Any

from cluster_plan.plan.input_files import InputError, parse_json
from cluster_plan.slurm.commands import UnexpectedLine, node_records, node_state

# The marker a multi-part fact prints before each part: "==> NAME <==" (as `tail` does).
PART = re.compile(r"^==> (.+) <==$")


class FactParseError(ValueError):
    """A command printed something its parser cannot read."""


def _json(text: str, what: str) -> Any:
    try:
        return parse_json(text or "null", what)
    except InputError as exc:
        raise FactParseError(str(exc)) from None


def parts(text: str) -> dict[str, str]:
    """Split output of `echo "==> NAME <=="; COMMAND` sections into {NAME: output}."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        marker = PART.match(line)
        if marker:
            current = found.setdefault(marker.group(1), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines).strip("\n") for name, lines in found.items()}


def parse_hostname(text: str) -> str:
    name = text.strip()
    if not name or len(name.split()) != 1:
        raise FactParseError(f"hostname: unexpected output {text!r}")
    return name


def parse_links(text: str) -> dict[str, dict[str, Any]]:
    """`ip -j addr show` -> {device: {mtu, up, addresses: ["a.b.c.d/len", ...]}} (IPv4)."""
    data = _json(text, "ip -j addr")
    if not isinstance(data, list):
        raise FactParseError("ip -j addr: expected a list of links")
    links = {}
    for link in data:
        if not isinstance(link, dict) or "ifname" not in link:
            raise FactParseError(f"ip -j addr: a link without a name: {link!r}")
        addresses = [
            f"{a['local']}/{a['prefixlen']}"
            for a in link.get("addr_info", [])
            if a.get("family") == "inet" and "local" in a
        ]
        links[link["ifname"]] = {
            "mtu": int(link.get("mtu", 0)),
            "up": "UP" in link.get("flags", []),
            "addresses": sorted(addresses),
        }
    return links


def parse_default_routes(text: str) -> list[dict[str, str | None]]:
    """`ip -j -4 route show default` -> [{gateway, device}]."""
    data = _json(text, "ip -j route")
    if not isinstance(data, list):
        raise FactParseError("ip -j route: expected a list of routes")
    return [{"gateway": r.get("gateway"), "device": r.get("dev")} for r in data]


def parse_packages(text: str) -> dict[str, dict[str, str]]:
    """`dpkg-query -W -f '${Package}\\t${Version}\\t${db:Status-Want}\\t${db:Status-Status}\\n'`
    -> {package: {version, selection, status}}; packages dpkg does not know are absent."""
    packages = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) != 4:
            raise FactParseError(f"dpkg-query: unexpected line {line!r}")
        name, version, selection, status = fields
        packages[name] = {"version": version, "selection": selection, "status": status}
    return packages


def parse_units(text: str) -> dict[str, dict[str, str]]:
    """`systemctl show -p Id,LoadState,ActiveState,SubState` per unit under `==> UNIT <==`
    -> {unit as asked: {id, load, active, sub}}."""
    result = {}
    for unit, block in parts(text).items():
        fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
        if "ActiveState" not in fields:
            raise FactParseError(f"systemctl show {unit}: no ActiveState in {block[:80]!r}")
        result[unit] = {
            "id": fields.get("Id", unit),
            "load": fields.get("LoadState", ""),
            "active": fields["ActiveState"],
            "sub": fields.get("SubState", ""),
        }
    return result


def parse_manifests(text: str) -> dict[str, dict[str, Any]]:
    """The role manifests, printed as `==> PATH <==` then the file -> {role: manifest}; an
    unreadable one becomes {"error": why}."""
    manifests: dict[str, dict[str, Any]] = {}
    for path, body in parts(text).items():
        role = path.rsplit("/", 1)[-1].removesuffix(".json")
        try:
            data = parse_json(body, path)
        except InputError as exc:
            manifests[role] = {"error": str(exc)}
            continue
        if not isinstance(data, dict):
            manifests[role] = {"error": f"{path}: not a JSON object"}
            continue
        manifests[role] = data
    return manifests


def parse_checksums(text: str) -> dict[str, str | None]:
    """`sha256sum` lines, or `missing  PATH` for a path that does not exist."""
    sums: dict[str, str | None] = {}
    for line in text.splitlines():
        digest, sep, path = line.partition("  ")
        if not sep:
            raise FactParseError(f"sha256sum: unexpected line {line!r}")
        if digest == "missing":
            sums[path] = None
        elif re.fullmatch(r"[0-9a-f]{64}", digest):
            sums[path] = digest
        else:
            raise FactParseError(f"sha256sum: unexpected line {line!r}")
    return sums


def normalize_ruleset(text: str) -> str:
    """As role_manifest records it: no blank lines, no trailing spaces."""
    return "\n".join(line.rstrip() for line in text.splitlines() if line.strip())


def parse_nft_tables(text: str) -> dict[str, str | None]:
    """`nft -s list table FAMILY NAME` per table under `==> FAMILY NAME <==`; None when the
    table does not exist."""
    tables: dict[str, str | None] = {}
    for table, body in parts(text).items():
        missing = "No such file or directory" in body or body.startswith("Error:")
        tables[table] = None if missing else normalize_ruleset(body)
    return tables


def _listing(value: str | None) -> list[str]:
    return [] if value in (None, "", "(null)") else sorted(str(value).split(","))


def parse_scontrol_nodes(text: str) -> dict[str, dict[str, Any]]:
    """`scontrol show node --oneliner` -> {node: {state, flags, features, active_features,
    gres, reason}}. `state` is the base state (IDLE, ALLOCATED, MIXED, DOWN, ...); `flags`
    the rest (DRAIN, NOT_RESPONDING, ...)."""
    try:
        records = node_records(text)
    except UnexpectedLine as exc:
        raise FactParseError(f"scontrol show node: unexpected line {exc.line[:80]!r}") from None
    nodes = {}
    for name, fields in records.items():
        state = node_state(fields.get("State", "UNKNOWN"))
        nodes[name] = {
            "state": state.base,
            "flags": sorted(state.flags),
            "features": _listing(fields.get("AvailableFeatures")),
            "active_features": _listing(fields.get("ActiveFeatures")),
            "gres": "" if fields.get("Gres") in (None, "(null)") else fields["Gres"],
            "reason": fields.get("Reason"),
        }
    return nodes


def parse_backup_status(text: str) -> dict[str, Any]:
    """`cluster-plan-backup status` (one JSON object); {} when the program is missing."""
    if not text.strip() or text.startswith("missing"):
        return {}
    data = _json(text, "cluster-plan-backup status")
    if not isinstance(data, dict):
        raise FactParseError("cluster-plan-backup status: not a JSON object")
    problem = _backup_status_problem(data)
    if problem is not None:
        raise FactParseError(f"cluster-plan-backup status: {problem}")
    return data


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


# key -> (test, what it should be); None passes for each but `now`
_REPOSITORY = {
    "time": (_is_number, "a number"),
    "archive": (lambda v: isinstance(v, str), "text"),
    "ok": (lambda v: isinstance(v, bool), "true or false"),
    "error": (lambda v: isinstance(v, str), "text"),
    "original_size": (_is_number, "a number"),
    "deduplicated_size": (_is_number, "a number"),
}
_DRILL = {"ok": _REPOSITORY["ok"], "message": _REPOSITORY["error"]}


def _backup_status_problem(data: dict[str, Any]) -> str | None:
    """What in a node's status document is not of its type (the judge does arithmetic and
    comparisons on it), as `$.key is not ...`; None when all is."""
    if not _is_number(data.get("now")):
        return f"$.now is not a number: {data.get('now')!r}"
    if data.get("max_age_s") is not None and not _is_number(data["max_age_s"]):
        return f"$.max_age_s is not a number: {data['max_age_s']!r}"
    expected = data.get("expected", [])
    if not isinstance(expected, list) or not all(isinstance(e, str) for e in expected):
        return f"$.expected is not a list of names: {expected!r}"
    for section, fields in (("repositories", _REPOSITORY), ("drills", _DRILL)):
        problem = _entries_problem(data.get(section) or {}, f"$.{section}", fields)
        if problem is not None:
            return problem
    return None


def _entries_problem(entries: Any, where: str, fields: dict[str, Any]) -> str | None:
    if not isinstance(entries, dict):
        return f"{where} is not an object"
    for name, entry in entries.items():
        if not isinstance(entry, dict):
            return f"{where}.{name} is not an object"
        for key, (test, words) in fields.items():
            value = entry.get(key)
            if value is not None and not test(value):
                return f"{where}.{name}.{key} is not {words}: {value!r}"
    return None
