"""Collectors: which facts to read on one host, in order (run by cluster_plan.day2.remote.gather,
one greenlet per host). Each returns (facts, errors): a fact that could not be read is in
`errors` with the reason, never an exception."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyinfra.api import State
from pyinfra.api.facts import get_fact

from cluster_plan.day2.remote import facts as f
from cluster_plan.day2.remote.parsers import FactParseError

Facts = dict[str, Any]
Collector = Callable[[State, Any, dict[str, Any]], tuple[Facts, dict[str, str]]]
FACT_TIMEOUT_S = 60


class _Reader:
    def __init__(self, state: State, host: Any) -> None:
        self.state, self.host = state, host
        self.facts: Facts = {}
        self.errors: dict[str, str] = {}

    def read(self, key: str, fact: type[Any], **kwargs: Any) -> Any:
        try:
            value = get_fact(
                self.state,
                self.host,
                fact,
                kwargs={**kwargs, "_timeout": FACT_TIMEOUT_S},
                apply_failed_hosts=False,
            )
        except FactParseError as exc:
            self.errors[key] = str(exc)
            return None
        if value is None:
            self.errors[key] = f"{fact.__name__}: the command failed"
        self.facts[key] = value
        return value


def manifest_lists(manifests: dict[str, Any]) -> tuple[list[str], list[str], list[str], list[str]]:
    """Files, units, held packages and nftables tables the roles' manifests name."""
    files: set[str] = set()
    units: set[str] = set()
    held: set[str] = set()
    tables: set[str] = set()
    for manifest in manifests.values():
        if "error" in manifest:
            continue
        files.update(manifest.get("files") or {})
        units.update(manifest.get("services") or [])
        held.update(manifest.get("held_packages") or {})
        tables.update(manifest.get("nftables") or {})
    return sorted(files), sorted(units), sorted(held), sorted(tables)


def collect_drift(state: State, host: Any, options: dict[str, Any]) -> tuple[Facts, dict[str, str]]:
    reader = _Reader(state, host)
    reader.read("hostname", f.Hostname)
    reader.read("links", f.Links)
    reader.read("default_routes", f.DefaultRoutes)
    manifests = reader.read("manifests", f.Manifests) or {}
    files, units, held, tables = manifest_lists(manifests)
    units = sorted({*units, *options.get("units", [])})
    if files:
        reader.read("checksums", f.FileChecksums, paths=files)
    if units:
        reader.read("units", f.Units, units=units)
    if held:
        reader.read("packages", f.Packages, names=held)
    if tables:
        reader.read("nftables", f.NftTables, tables=tables)
    if options.get("slurm_view"):
        reader.read("slurm_nodes", f.SlurmNodes)
    return reader.facts, reader.errors


def collect_backup_status(
    state: State, host: Any, options: dict[str, Any]
) -> tuple[Facts, dict[str, str]]:
    reader = _Reader(state, host)
    reader.read("backup", f.BackupStatus)
    return reader.facts, reader.errors


COLLECTORS: dict[str, Collector] = {
    "drift": collect_drift,
    "backup-status": collect_backup_status,
}
