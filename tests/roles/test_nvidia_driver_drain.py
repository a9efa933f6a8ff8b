"""The nvidia_driver role's drain and resume go through the project's one drain
(cluster_plan.cluster.slurm_drain): run on this host, with `scontrol` and `squeue` answered
from a recorded node line, an operator's drain survives the driver's rollout, as it does
around a `cluster-plan change` (tests/day2/test_slurm_drain.py has the decisions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "day2"))
from slurm_nodes import node_line  # noqa: E402

# scontrol, squeue and sinfo for one node, its state in a JSON file beside them; every call logged
FAKE_SLURM = r"""#!PYTHON
import json, os, sys
state_file = os.environ["FAKE_SLURM_STATE"]
state = json.load(open(state_file))
with open(state_file + ".log", "a") as log:
    log.write(json.dumps([os.path.basename(sys.argv[0]), *sys.argv[1:]]) + "\n")
tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]
if tool == "squeue":
    print("\n".join(state["jobs"]))
elif tool == "sinfo":  # what the role's own wait read before
    print("drained")
elif args[:1] == ["show"]:
    print(state["line"], end="")
elif args[:1] == ["update"]:
    fields = dict(a.split("=", 1) for a in args[1:])
    state["updates"].append(fields)
    json.dump(state, open(state_file, "w"))
"""


def run_role_tasks(tmp_path: Path, line: str, *tasks: str, check: bool = False) -> tuple[str, list]:
    """The role's task files `tasks` run on this host against the fake Slurm; the output and
    the scontrol updates made."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("scontrol", "squeue", "sinfo"):
        path = bin_dir / tool
        path.write_text(FAKE_SLURM.replace("PYTHON", sys.executable, 1))
        path.chmod(0o755)
    state = tmp_path / "slurm.json"
    state.write_text(json.dumps({"line": line, "jobs": [], "updates": []}))
    plays = [
        {
            "name": "The driver rollout's drain and resume",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                "nvidia_driver_scheduler": "slurm",
                "nvidia_driver_slurm_controller": "localhost",
                "nvidia_driver_node_name": "gpu01",
                "nvidia_driver_selected": {"branch": 570},
                "nvidia_driver_drain_timeout": 30,
            },
            "tasks": [
                {
                    "name": f"Run {task}.yml",
                    "ansible.builtin.include_role": {"name": "nvidia_driver", "tasks_from": task},
                }
                for task in tasks
            ],
        }
    ]
    playbook = tmp_path / "play.yml"
    playbook.write_text(json.dumps(plays))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "FAKE_SLURM_STATE": str(state),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_CACHE_PLUGIN": "memory",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "false",
        "ANSIBLE_STRATEGY": "linear",
    }
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c",
            "local", "-e", f"ansible_python_interpreter={sys.executable}", str(playbook),
            *(["--check"] if check else [])]  # fmt: skip
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out, json.loads(state.read_text())["updates"]


def test_an_operator_s_drain_survives_the_driver_rollout(tmp_path: Path):
    line = node_line("gpu01", "IDLE+DRAIN", "bad DIMM in slot 3")
    out, updates = run_role_tasks(tmp_path, line, "drain", "resume")
    assert updates == [], out  # the reason is not overwritten, the node not resumed
    assert "gpu01 is out of service already (bad DIMM in slot 3): left so" in out
    assert "gpu01 stays drained" in out


def test_a_change_s_drain_is_left_to_the_change(tmp_path: Path):
    line = node_line("gpu01", "IDLE+DRAIN", "cluster-plan:change: upgrade")
    out, updates = run_role_tasks(tmp_path, line, "drain", "resume")
    assert updates == [], out


def test_the_role_drains_with_its_tag_and_resumes_its_own_drain(tmp_path: Path):
    out, updates = run_role_tasks(tmp_path, node_line("gpu01", "MIXED"), "drain")
    assert updates == [
        {
            "NodeName": "gpu01",
            "State": "DRAIN",
            "Reason": "cluster-plan:nvidia_driver: upgrade to branch 570",
        }
    ], out
    drained = node_line("gpu01", "IDLE+DRAIN", "cluster-plan:nvidia_driver: upgrade to branch 570")
    out, updates = run_role_tasks(tmp_path, drained, "resume")
    assert updates == [{"NodeName": "gpu01", "State": "RESUME"}], out


@pytest.mark.parametrize("line", [node_line("gpu01", "MIXED")], ids=["in-service"])
def test_check_mode_changes_nothing(tmp_path: Path, line: str):
    out, updates = run_role_tasks(tmp_path, line, "drain", check=True)
    assert updates == [] and "changed: [localhost" in out, out


def test_the_module_documents_the_action_s_arguments():
    import importlib.util

    import yaml

    spec = importlib.util.spec_from_file_location(
        "slurm_drain_action", ROOT / "plugins" / "action" / "slurm_drain.py"
    )
    assert spec is not None and spec.loader is not None
    action = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(action)
    import slurm_drain as module  # plugins/modules (tests/roles/conftest.py)

    assert module.ARGUMENT_SPEC == action.ARGUMENTS
    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert set(documented) == set(action.ARGUMENTS)
    for name, option in documented.items():
        assert option["type"] == action.ARGUMENTS[name]["type"], name
        assert option.get("default") == action.ARGUMENTS[name].get("default"), name
