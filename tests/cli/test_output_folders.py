"""`monitoring render -o DIR` and `k8s render -o DIR` delete only what an earlier run of the
same command wrote there (the folder's manifest lists it, with each file's hash), and refuse
a folder holding anything else: a git checkout, the plan's own folder, a hand-written manifest,
a file edited since it was rendered. Nothing is written or removed when they refuse."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cluster_plan.cli.app import main
from cluster_plan.views.rendered import MANIFEST

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "inventory" / "lab" / "cluster.yml"
H100 = ROOT / "inventory" / "examples" / "slurm-h100.yml"
LAB_K8S = ROOT / "inventory" / "lab" / "k8s.yml"
K8S = ROOT / "inventory" / "examples" / "k8s-inference.yml"

# command -> (argv before PLAN, a plan, a smaller plan, a file only the first plan renders)
COMMANDS = {
    "monitoring": (["monitoring", "render"], LAB, H100, "file_sd/ceph.json"),
    "k8s": (["k8s", "render"], K8S, LAB_K8S, "kubeadm/cp2.yaml"),
}


def render(command: str, plan: Path, out: Path) -> int:
    return main([*COMMANDS[command][0], str(plan), "-o", str(out)])


def tree(folder: Path) -> dict[str, bytes]:
    """Every file below the folder (links not followed), by relative path."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


@pytest.mark.parametrize("command", COMMANDS)
def test_a_git_checkout_is_refused_and_left_whole(command, tmp_path, capsys):
    checkout = tmp_path / "checkout"
    (checkout / ".git" / "objects").mkdir(parents=True)
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (checkout / "README.md").write_text("# our cluster\n")
    before = tree(checkout)
    assert render(command, COMMANDS[command][1], checkout) == 2
    err = capsys.readouterr().err
    assert f"{checkout}: not empty" in err and ".git/" in err and "README.md" in err
    assert "Traceback" not in err
    assert tree(checkout) == before


@pytest.mark.parametrize("command", COMMANDS)
def test_the_plans_own_folder_is_refused_and_left_whole(command, tmp_path, capsys):
    plan = COMMANDS[command][1]
    folder = tmp_path / "plans"
    folder.mkdir()
    for source in (plan, plan.with_name(f"{plan.stem}.lock.json"), H100):
        shutil.copy(source, folder / source.name)
    before = tree(folder)
    assert render(command, folder / plan.name, folder) == 2
    assert f"{folder}: not empty" in capsys.readouterr().err
    assert tree(folder) == before


def test_a_hand_written_manifest_beside_k8s_output_is_kept(tmp_path, capsys):
    out = tmp_path / "k8s"
    assert render("k8s", K8S, out) == 0
    mine = out / "objects" / "manifest.yaml"
    mine.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\n")
    before = tree(out)
    assert render("k8s", K8S, out) == 2
    err = capsys.readouterr().err
    assert "holds files this command did not write (objects/manifest.yaml)" in err
    assert tree(out) == before
    mine.unlink()
    assert render("k8s", K8S, out) == 0  # without it, the folder is the command's again


@pytest.mark.parametrize("command", COMMANDS)
def test_a_second_render_removes_what_a_smaller_plan_no_longer_has(command, tmp_path, capsys):
    _, first, second, only_first = COMMANDS[command]
    out = tmp_path / "out"
    assert render(command, first, out) == 0
    assert (out / only_first).is_file()
    assert render(command, first, out) == 0  # the same rendering again: nothing to refuse
    assert render(command, second, out) == 0
    assert not (out / only_first).exists()
    manifest = json.loads((out / MANIFEST).read_text())
    assert manifest["plan"] == str(second)
    assert sorted(manifest["files"]) == sorted(set(tree(out)) - {MANIFEST})
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_file_edited_since_it_was_rendered_is_never_lost(command, tmp_path, capsys):
    _, first, second, only_first = COMMANDS[command]
    out = tmp_path / "out"
    assert render(command, first, out) == 0
    edited = out / only_first
    edited.write_text(edited.read_text() + "# tuned by hand\n")
    before = tree(out)
    assert render(command, second, out) == 2  # would remove the edited file
    err = capsys.readouterr().err
    assert f"changed since `cluster-plan {COMMANDS[command][0][0]} render` wrote it" in err
    assert only_first in err
    assert tree(out) == before


def test_a_folder_another_command_wrote_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    assert render("monitoring", LAB, out) == 0
    before = tree(out)
    assert render("k8s", K8S, out) == 2
    assert "written by `cluster-plan monitoring render`" in capsys.readouterr().err
    assert tree(out) == before


def test_an_empty_or_missing_folder_is_fine_and_a_link_is_refused(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert render("monitoring", H100, empty) == 0
    assert render("monitoring", H100, tmp_path / "new" / "deeper") == 0
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    assert render("monitoring", H100, link) == 2
    assert "a symbolic link" in capsys.readouterr().err
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_link_inside_the_folder_is_not_followed(tmp_path, capsys):
    out = tmp_path / "out"
    assert render("monitoring", H100, out) == 0
    target = tmp_path / "precious.yml"
    target.write_text("precious\n")
    (out / "prometheus.yml").unlink()
    (out / "prometheus.yml").symlink_to(target)
    assert render("monitoring", H100, out) == 2
    assert "prometheus.yml" in capsys.readouterr().err
    assert target.read_text() == "precious\n"
    assert (out / "prometheus.yml").is_symlink()


def test_a_damaged_manifest_is_refused(tmp_path, capsys):
    out = tmp_path / "out"
    assert render("monitoring", H100, out) == 0
    (out / MANIFEST).write_text('{"version": 1, "command": "monitoring render", "files": []}')
    before = tree(out)
    assert render("monitoring", H100, out) == 2
    assert "not a manifest this cluster-plan wrote" in capsys.readouterr().err
    assert tree(out) == before
