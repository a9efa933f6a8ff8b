"""pyinfra facts: what to run on a host (`command`) and how to read it (`process`, which
calls a parser of cluster_plan.day2.remote.parsers). Every command exits 0 whatever it finds, so
that what is missing on a host is data, not a failed host."""

from __future__ import annotations

import shlex
from typing import Any

from pyinfra.api import FactBase

from cluster_plan.day2.remote import parsers
from cluster_plan.slurm.commands import show_node_argv

MANIFEST_DIR = "/var/lib/cluster-plan/manifest"
BACKUP_PROGRAM = "/usr/local/sbin/cluster-plan-backup"


def _words(items: list[str]) -> str:
    return " ".join(shlex.quote(i) for i in items)


class Hostname(FactBase[str]):
    def command(self) -> str:
        return "hostname"

    def process(self, output: list[str]) -> str:
        return parsers.parse_hostname("\n".join(output))


class Links(FactBase[dict[str, Any]]):
    def command(self) -> str:
        return "ip -j addr show"

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.parse_links("\n".join(output))


class DefaultRoutes(FactBase[list[dict[str, Any]]]):
    def command(self) -> str:
        return "ip -j -4 route show default"

    def process(self, output: list[str]) -> list[dict[str, Any]]:
        return parsers.parse_default_routes("\n".join(output))

    @staticmethod
    def default() -> list[dict[str, Any]]:
        return []


class Manifests(FactBase[dict[str, Any]]):
    def command(self, directory: str = MANIFEST_DIR) -> str:
        return (
            f'for f in {shlex.quote(directory)}/*.json; do [ -f "$f" ] || continue; '
            'echo "==> $f <=="; cat "$f"; echo; done; true'
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.parse_manifests("\n".join(output))

    @staticmethod
    def default() -> dict[str, Any]:
        return {}


class FileChecksums(FactBase[dict[str, Any]]):
    def command(self, paths: list[str]) -> str:
        return (
            f'for f in {_words(paths)}; do if [ -e "$f" ]; then sha256sum -- "$f"; '
            "else printf 'missing  %s\\n' \"$f\"; fi; done; true"
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.parse_checksums("\n".join(output))

    @staticmethod
    def default() -> dict[str, Any]:
        return {}


class Units(FactBase[dict[str, Any]]):
    def command(self, units: list[str]) -> str:
        return (
            f'for u in {_words(units)}; do echo "==> $u <=="; '
            'systemctl show -p Id -p LoadState -p ActiveState -p SubState -- "$u"; done; true'
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.parse_units("\n".join(output))

    @staticmethod
    def default() -> dict[str, Any]:
        return {}


class Packages(FactBase[dict[str, Any]]):
    def command(self, names: list[str]) -> str:
        fmt = r"${Package}\t${Version}\t${db:Status-Want}\t${db:Status-Status}\n"
        return f"dpkg-query -W -f {shlex.quote(fmt)} -- {_words(names)} 2>/dev/null; true"

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.parse_packages("\n".join(output))

    @staticmethod
    def default() -> dict[str, Any]:
        return {}


class NftTables(FactBase[dict[str, Any]]):
    def command(self, tables: list[str]) -> str:
        return (
            f'for t in {_words(tables)}; do echo "==> $t <=="; nft -s list table $t 2>&1; '
            "done; true"
        )

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.parse_nft_tables("\n".join(output))

    @staticmethod
    def default() -> dict[str, Any]:
        return {}


class SlurmNodes(FactBase[dict[str, Any]]):
    def command(self) -> str:
        return f"{shlex.join(show_node_argv())} 2>&1; true"

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.parse_scontrol_nodes("\n".join(output))

    @staticmethod
    def default() -> dict[str, Any]:
        return {}


class BackupStatus(FactBase[dict[str, Any]]):
    def command(self) -> str:
        return f"if [ -x {BACKUP_PROGRAM} ]; then {BACKUP_PROGRAM} status; else echo missing; fi"

    def process(self, output: list[str]) -> dict[str, Any]:
        return parsers.parse_backup_status("\n".join(output))

    @staticmethod
    def default() -> dict[str, Any]:
        return {}
