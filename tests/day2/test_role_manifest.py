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
    manifest, problems, _ = module.build_manifest(
        params(files=[str(conf), str(tmp_path / "gone")]), runner({})
    )
    assert problems == []
    assert manifest["files"] == {
        str(conf): hashlib.sha256(b"ClusterName=lab\n").hexdigest(),
        str(tmp_path / "gone"): None,
    }


def test_held_packages_are_recorded_at_their_version_and_unheld_ones_refused() -> None:
    run = runner({"dpkg-query": (0, DPKG, "")})
    manifest, problems, _ = module.build_manifest(params(held_packages=["slurm-client"]), run)
    assert manifest["held_packages"] == {"slurm-client": "22.05.8-4+deb12u3"}
    assert problems == []
    _, problems, _ = module.build_manifest(params(held_packages=["slurmd", "slurmctld"]), run)
    assert problems == ["slurmctld is not installed", "slurmd is not held (selection install)"]


def test_a_table_is_recorded_as_nft_lists_it_without_blank_lines() -> None:
    run = runner({"nft": (0, RULESET, "")})
    manifest, _, _ = module.build_manifest(params(nftables_tables=["inet cluster_plan"]), run)
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


def test_a_partial_run_rereads_its_files_keeps_the_rest_and_empties_the_inputs(
    tmp_path: Path,
) -> None:
    hosts, conf = tmp_path / "hosts", tmp_path / "slurm.conf"
    hosts.write_text("10.0.0.1 head01\n")
    conf.write_text("ClusterName=lab\n")
    path = str(tmp_path / "common.json")
    full, _, _ = module.build_manifest(
        params(files=[str(hosts), str(conf)], inputs="digest-of-the-full-run"), runner({})
    )
    full["packages"] = {"chrony": True}  # read by the full run; a partial run must keep it
    Path(path).write_text(json.dumps(full))
    hosts.write_text("10.0.0.1 head01\n10.0.0.9 cpu02\n")
    conf.write_text("changed by hand\n")

    full["probes"] = {"the host name": {"command": "hostname", "digest": "old"}}
    Path(path).write_text(json.dumps(full))
    probe = {"name": "the host name", "command": "hostname"}
    partial, problems, _ = module.record(
        params(files=[str(hosts)], packages=["chrony"], probes=[probe], inputs="x", partial=True),
        path,
        runner({"/bin/sh": (0, "head01\n", "")}),
    )
    assert problems == [] and partial is not None
    assert partial["probes"]["the host name"]["digest"] != "old"  # settled, so read again
    assert partial["files"][str(hosts)] == hashlib.sha256(hosts.read_bytes()).hexdigest()
    # what the partial run did not write stays as the full run recorded it
    assert partial["files"][str(conf)] == full["files"][str(conf)]
    assert partial["packages"] == {"chrony": True}
    assert partial["inputs"] == ""  # the stage gate runs the stage in full next time
    full_again, _, _ = module.record(
        params(files=[str(hosts)], inputs="d", partial=False), path, runner({})
    )
    assert full_again["inputs"] == "d" and str(conf) not in full_again["files"]


def test_a_partial_run_without_a_last_record_writes_none(tmp_path: Path) -> None:
    """A record of the partial run alone would hide the rest from drift and backups."""
    hosts = tmp_path / "hosts"
    hosts.write_text("10.0.0.1 head01\n")
    (tmp_path / "common.json").write_text("{broken")
    for path in (tmp_path / "common.json", tmp_path / "none.json"):
        partial, problems, _ = module.record(
            params(files=[str(hosts)], inputs="x", partial=True), str(path), runner({})
        )
        assert partial is None and problems == []
