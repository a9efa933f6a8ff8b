"""The role_manifest module: what a role records on a host (the lab test runs it in the
roles for real)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import collection_loader  # noqa: F401  (the module imports its helper from the collection)
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "plugins" / "modules"))

import role_manifest as module  # noqa: E402

DPKG = "slurm-client\t22.05.8-4+deb12u3\thold\nslurmd\t22.05.8-4+deb12u3\tinstall\n"
RULESET = "table inet cluster_plan {\n\n\tchain input {   \n\t\ttcp dport 22 accept\n\t}\n}\n"


def params(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "role": "slurm",
        "files": [],
        "services": [],
        "held_packages": [],
        "nftables_tables": [],
        "paths": [],
        "packages": [],
        "boot_units": [],
        "probes": [],
        "inputs": "",
        "precious": [],
        "dir": "/nonexistent",
    }
    return {**base, **overrides}


def runner(outputs: dict[str, tuple[int, str, str]]) -> Any:
    def run(argv: list[str]) -> tuple[int, str, str]:
        return outputs[argv[0]]

    return run


def test_files_are_recorded_with_their_checksum_and_a_missing_one_as_null(tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=lab\n")
    manifest, problems = module.build_manifest(
        params(files=[str(conf), str(tmp_path / "gone")]), runner({})
    )
    assert problems == []
    assert manifest["files"] == {
        str(conf): hashlib.sha256(b"ClusterName=lab\n").hexdigest(),
        str(tmp_path / "gone"): None,
    }


def test_held_packages_are_recorded_at_their_version_and_unheld_ones_refused() -> None:
    run = runner({"dpkg-query": (0, DPKG, "")})
    manifest, problems = module.build_manifest(params(held_packages=["slurm-client"]), run)
    assert manifest["held_packages"] == {"slurm-client": "22.05.8-4+deb12u3"}
    assert problems == []
    _, problems = module.build_manifest(params(held_packages=["slurmd", "slurmctld"]), run)
    assert problems == ["slurmctld is not installed", "slurmd is not held (selection install)"]


def test_a_table_is_recorded_as_nft_lists_it_without_blank_lines() -> None:
    run = runner({"nft": (0, RULESET, "")})
    manifest, _ = module.build_manifest(params(nftables_tables=["inet cluster_plan"]), run)
    assert manifest["nftables"]["inet cluster_plan"] == (
        "table inet cluster_plan {\n\tchain input {\n\t\ttcp dport 22 accept\n\t}\n}"
    )


@pytest.mark.parametrize(
    ("precious", "problem"),
    [
        ([{"paths": ["/etc"]}], "precious item without a name"),
        ([{"name": "etc", "paths": []}], "precious etc: paths must be a non-empty list"),
        ([{"name": "etc", "paths": ["etc"]}], "precious etc: paths must be absolute"),
        ([{"name": "etc", "paths": ["/etc"], "before": "x"}], "precious etc: unknown keys before"),
        ([{"name": "a", "paths": ["/a"]}, {"name": "a", "paths": ["/b"]}], "declared twice"),
    ],
)
def test_precious_declarations_are_checked(precious: list[dict[str, Any]], problem: str) -> None:
    problems = module.check_precious(precious)
    assert any(problem in p for p in problems), problems


def test_the_record_is_rewritten_only_when_it_changes(tmp_path: Path) -> None:
    path = tmp_path / "manifest" / "slurm.json"
    record = {"role": "slurm", "files": {}}
    assert module.write_if_changed(str(path), record, check_mode=True) is True
    assert not path.exists()  # check mode writes nothing
    assert module.write_if_changed(str(path), record, check_mode=False) is True
    assert json.loads(path.read_text()) == record
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert module.write_if_changed(str(path), record, check_mode=False) is False
    assert module.write_if_changed(str(path), {**record, "role": "x"}, check_mode=False) is True
