"""The kubernetes role's apply of an objects file (roles/kubernetes/tasks/apply.yml), run on
this host against a fake kubectl that keeps the cluster's objects in a file and answers
`diff` and `apply --server-side` as the real one does for them: a dry run of an object in a
namespace that does not exist yet is NotFound, even when the same file creates it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from support.playbooks import local_play

ROOT = Path(__file__).resolve().parents[2]

FAKE_KUBECTL = r"""#!PYTHON
import json, os, sys
import yaml
state_file = os.environ["FAKE_KUBECTL_STATE"]
state = json.load(open(state_file))
args = sys.argv[1:]
state["calls"].append(args[2])
verb, path = args[2], args[args.index("-f") + 1]
if state.get("refuse"):
    json.dump(state, open(state_file, "w"))
    sys.stderr.write(state["refuse"] + "\n")
    sys.exit(1 if verb == "apply" else 2)
objects = [o for o in yaml.safe_load_all(open(path)) if o]
def key(o):
    return "/".join([o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]])
namespaces = {o["metadata"]["name"] for o in state["objects"].values() if o["kind"] == "Namespace"}
differs = False
for o in objects:
    ns = o["metadata"].get("namespace")
    if ns and ns not in namespaces:
        sys.stderr.write(f'Error from server (NotFound): namespaces "{ns}" not found\n')
        json.dump(state, open(state_file, "w"))
        sys.exit(1 if verb == "apply" else 2)
    if verb == "apply":
        state["objects"][key(o)] = o
        if o["kind"] == "Namespace":
            namespaces.add(o["metadata"]["name"])
    differs = differs or state["objects"].get(key(o)) != o
json.dump(state, open(state_file, "w"))
sys.exit(1 if verb == "diff" and differs else 0)
"""

NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision"}}
QUOTA = {
    "apiVersion": "v1",
    "kind": "ResourceQuota",
    "metadata": {"name": "team-devices", "namespace": "vision"},
    "spec": {"hard": {"requests.nvidia.com/gpu": "1"}},
}


def run_apply(
    tmp_path: Path, documents: list[dict], state: dict, check: bool = False
) -> tuple[subprocess.CompletedProcess[str], dict]:
    """roles/kubernetes/tasks/apply.yml on `documents` against the fake kubectl holding
    `state` (its objects by kind/namespace/name); the run and the state after."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "kubectl").write_text(FAKE_KUBECTL.replace("PYTHON", sys.executable, 1))
    (bin_dir / "kubectl").chmod(0o755)
    manifest = tmp_path / "15-teams.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    state_file = tmp_path / "cluster.json"
    state_file.write_text(json.dumps({**state, "calls": []}))
    play = [
        {
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "kubernetes_admin_kubeconfig": "/etc/kubernetes/admin.conf",
                "kubernetes_manifest": str(manifest),
            },
            "tasks": [
                {"ansible.builtin.include_tasks": str(ROOT / "roles/kubernetes/tasks/apply.yml")}
            ],
        }
    ]
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps(play))
    done = local_play(
        playbook,
        {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_KUBECTL_STATE": str(state_file)},
        check=check,
    )
    return done, json.loads(state_file.read_text())


def test_a_file_creating_a_namespace_and_objects_in_it_is_applied_then_left_alone(tmp_path):
    done, state = run_apply(tmp_path, [NAMESPACE, QUOTA], {"objects": {}})
    assert done.returncode == 0, done.stdout + done.stderr
    assert state["calls"] == ["diff", "apply"]
    assert set(state["objects"]) == {"Namespace//vision", "ResourceQuota/vision/team-devices"}
    again, state = run_apply(tmp_path, [NAMESPACE, QUOTA], state)
    assert again.returncode == 0, again.stdout + again.stderr
    assert state["calls"] == ["diff"]
    assert "changed=0" in again.stdout


def test_check_mode_compares_and_applies_nothing(tmp_path):
    done, state = run_apply(tmp_path, [NAMESPACE, QUOTA], {"objects": {}}, check=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert state["calls"] == ["diff"] and state["objects"] == {}


def test_an_object_in_a_namespace_no_file_creates_fails_the_apply(tmp_path):
    done, state = run_apply(tmp_path, [QUOTA], {"objects": {}})
    assert done.returncode != 0
    assert state["calls"] == ["diff", "apply"] and state["objects"] == {}
    assert 'namespaces \\"vision\\" not found' in done.stdout, done.stdout


@pytest.mark.parametrize(
    "refusal", ["error: You must be logged in to the server (Unauthorized)",
                'Error from server (NotFound): the server could not find the requested resource']
)  # fmt: skip
def test_any_other_error_of_the_comparison_fails_before_applying(tmp_path, refusal):
    done, state = run_apply(tmp_path, [NAMESPACE, QUOTA], {"objects": {}, "refuse": refusal})
    assert done.returncode != 0
    assert state["calls"] == ["diff"]
    assert "Compare with the cluster 15-teams.yaml" in done.stdout
