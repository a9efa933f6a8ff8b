"""`cluster-plan change` finds its stage playbooks in a checkout, in the installed collection
cluster_plan.cluster (by name) or in `--playbooks DIR`, and takes the stages and their order
from that site.yml: a stage added there is converged too."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.change_plans import LAB_PLAN

from cluster_plan.day2.change import playbooks as located
from cluster_plan.day2.change import runner
from cluster_plan.day2.change.operations import Options, plan_operations
from cluster_plan.day2.change.playbooks import PlaybooksError, locate, stages_of
from cluster_plan.views.diff import deployed_pair, diff_expanded

REPO = Path(__file__).resolve().parents[2]
SITE_ORDER = ("common", "gpu", "storage", "software", "slurm", "kubernetes", "backup",
              "monitoring", "acceptance")  # fmt: skip


def test_the_stages_are_site_yml_s_imports_in_order():
    assert stages_of(REPO / "site.yml") == SITE_ORDER  # the root one, followed
    assert stages_of(REPO / "playbooks" / "site.yml") == SITE_ORDER


def test_in_a_checkout_the_stages_are_its_playbooks(monkeypatch):
    found = locate(None)
    assert found.folder == REPO / "playbooks" and found.cwd == REPO and not found.collection
    assert found.argument("gpu") == str(REPO / "playbooks" / "gpu.yml")


def copy_of_playbooks(tmp_path: Path) -> Path:
    folder = tmp_path / "playbooks"
    shutil.copytree(REPO / "playbooks", folder)
    return folder


def test_a_stage_added_to_site_yml_is_converged_too(tmp_path: Path):
    folder = copy_of_playbooks(tmp_path)
    (folder / "audit_trail.yml").write_text("---\n- name: Audit trail\n  hosts: all\n  tasks: []\n")
    site = folder / "site.yml"
    text = site.read_text().replace(
        "- name: Monitoring\n",
        "- name: Audit trail\n  ansible.builtin.import_playbook: audit_trail.yml\n"
        "- name: Monitoring\n",
    )
    site.write_text(text)
    found = locate(folder)
    assert found.stages == (*SITE_ORDER[:7], "audit_trail", *SITE_ORDER[7:])
    old, new = deployed_pair(LAB_PLAN, LAB_PLAN)
    (replace,) = plan_operations(
        old, new, diff_expanded(old, new), Options(stages=found.stages, replace=("cpu01",))
    )
    converge = next(s for s in replace.steps if s.action == "converge")
    assert "audit_trail" in converge.param("stages") and "audit_trail.yml" in converge.detail


@pytest.mark.parametrize(
    ("site", "words"),
    [
        ("- hosts: all\n  tasks: []\n", "play 1 is not an import_playbook entry"),
        ("- ansible.builtin.import_playbook: missing.yml\n", "imports missing.yml, which is not"),
        ("{not: [a, list\n", "not YAML"),
        ("[]\n", "imports no stage"),
    ],
    ids=["a-play", "a-missing-stage", "not-yaml", "empty"],
)
def test_a_site_yml_that_names_no_stages_is_an_error_naming_it(tmp_path: Path, site, words):
    (tmp_path / "site.yml").write_text(site)
    with pytest.raises(PlaybooksError, match=words) as error:
        locate(tmp_path)
    assert str(tmp_path / "site.yml") in str(error.value)


def test_a_folder_without_site_yml_is_named(tmp_path: Path):
    with pytest.raises(PlaybooksError, match=rf"{tmp_path}: no site.yml"):
        locate(tmp_path)


def test_without_a_checkout_the_installed_collection_s_playbooks_run_by_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    collections = tmp_path / "collections"
    installed = collections / "ansible_collections" / "cluster_plan" / "cluster"
    installed.mkdir(parents=True)
    shutil.copytree(REPO / "playbooks", installed / "playbooks")
    monkeypatch.setattr(located, "collection_paths", lambda: [collections])
    found = locate(None, root=tmp_path / "site-packages")  # no checkout around the package
    assert found.collection and found.stages == SITE_ORDER
    assert found.argument("slurm") == "cluster_plan.cluster.slurm"
    runs: list[tuple[list[str], Any]] = []

    def ansible(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        runs.append((argv, kwargs["cwd"]))
        return subprocess.CompletedProcess(argv, 0, "PLAY RECAP\n", "")

    monkeypatch.setattr(runner.subprocess, "run", ansible)
    old, new = deployed_pair(LAB_PLAN, LAB_PLAN)
    ctx = runner.Context(old, new, LAB_PLAN, executor=None, lab=False, log=io.StringIO(),
                         playbooks=found)  # fmt: skip
    runner.playbook(ctx, ("common", "slurm"), ("cpu01",), "peers")
    ((argv, cwd),) = runs
    assert argv[-2:] == ["cluster_plan.cluster.common", "cluster_plan.cluster.slurm"]
    assert cwd == Path.cwd()


def test_without_a_checkout_or_a_collection_the_error_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr(located, "collection_paths", lambda: [tmp_path / "nothing"])
    with pytest.raises(PlaybooksError, match="pass --playbooks DIR"):
        locate(None, root=tmp_path)


def installed_layout(tmp_path: Path, with_collection: bool) -> tuple[Path, dict[str, str]]:
    """The package copied without the repository around it (as pip installs it), and an
    environment whose Python finds that copy first; the collection installed, or not."""
    site = tmp_path / "site-packages"
    shutil.copytree(REPO / "cluster_plan", site / "cluster_plan",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    collections = tmp_path / "collections"
    if with_collection:
        target = collections / "ansible_collections" / "cluster_plan" / "cluster" / "playbooks"
        shutil.copytree(REPO / "playbooks", target)
    env.update(PYTHONPATH=str(site), ANSIBLE_COLLECTIONS_PATH=str(collections), HOME=str(tmp_path))
    work = tmp_path / "work"
    work.mkdir()
    return work, env


@pytest.mark.parametrize("with_collection", [True, False], ids=["collection", "nothing"])
def test_an_installed_package_runs_the_collection_s_playbooks(tmp_path: Path, with_collection):
    work, env = installed_layout(tmp_path, with_collection)
    done = subprocess.run(
        [sys.executable, "-m", "cluster_plan", "change", str(LAB_PLAN), str(LAB_PLAN),
         "--replace", "cpu01", "--dry-run", "--format", "json"],
        cwd=work, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    envelope = json.loads(done.stdout)
    if not with_collection:
        assert done.returncode == 2, done.stderr
        assert "no stage playbooks" in envelope["error"]["message"]
        assert "Traceback" not in done.stderr
        return
    assert done.returncode == 0, done.stderr
    result = envelope["result"]
    assert result["playbooks"].startswith("the collection cluster_plan.cluster (")
    assert str(tmp_path / "collections") in result["playbooks"]
    converge = next(s for s in result["operations"][0]["steps"] if s["action"] == "converge")
    assert "common.yml, gpu.yml" in converge["detail"]
