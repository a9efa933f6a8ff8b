"""The nvidia_driver role's drain and resume go through the project's one drain
(cluster_plan.cluster.slurm_drain; on Kubernetes cluster_plan.cluster.k8s_cordon, which
cordons and evicts the pods): run on this host, with `scontrol` and `squeue` answered from a
recorded node line, `kubectl` from a node's JSON and the pods, budgets and `kubectl drain`
answers recorded on a real API server (tests/support/drain_records.py), an operator's drain
or cordon survives the driver's rollout, as it does around a `cluster-plan change`, and a
budget that holds a pod stops the rollout naming both (tests/day2/test_slurm_drain.py,
tests/kubernetes/test_k8s_cordon.py and test_k8s_drain.py have the decisions)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from support.drain_records import AFTER, BUDGETS, PODS, recorded, without
from support.playbooks import local_play

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


# kubectl for one node, the node's JSON and kubectl's other answers in a file beside it;
# every call logged with its KUBECONFIG; `get node` and `patch node --type merge` as the API
# server answers them (a patch whose resourceVersion is not the node's refused with a
# Conflict; a write gives the node a new one); `get pods` answered in turn (the last one
# kept), `get poddisruptionbudgets` and `drain` as recorded
FAKE_KUBECTL = r"""#!PYTHON
import json, os, sys
state_file = os.environ["FAKE_KUBECTL_STATE"]
state = json.load(open(state_file))
node = state["node"]
args = sys.argv[1:]
with open(state_file + ".log", "a") as log:
    log.write(json.dumps([os.environ.get("KUBECONFIG"), *args]) + "\n")

def merged(target, patch):
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merged(target[key], value)
        else:
            target[key] = value

if args[:2] == ["get", "node"]:
    print(json.dumps(node, indent=4))
elif args[:2] == ["patch", "node"] and args[3:6] == ["--type", "merge", "-p"]:
    patch = json.loads(args[6])
    version = node["metadata"]["resourceVersion"]
    if patch["metadata"]["resourceVersion"] != version:
        sys.exit('Error from server (Conflict): Operation cannot be fulfilled on nodes '
                 f'"{args[2]}": the object has been modified')
    merged(node, patch)
    node["metadata"]["resourceVersion"] = str(int(version) + 1)
elif args[:2] == ["get", "pods"]:
    print(state["pods"].pop(0) if len(state["pods"]) > 1 else state["pods"][0])
elif args[:2] == ["get", "poddisruptionbudgets"]:
    print(state["budgets"])
elif args[:1] == ["drain"]:
    rc, out, err = state["drain"]
    sys.stdout.write(out)
    sys.stderr.write(err)
    json.dump(state, open(state_file, "w"))
    sys.exit(rc)
json.dump(state, open(state_file, "w"))
"""
# gpu01's pods but the bare notebook (a bare pod stops the drain): a DaemonSet's, a
# ReplicaSet's and a StatefulSet's pod each under a budget, a Job's, a finished bare pod
MOVABLE = without(PODS, "notebook")
EVICTED = (0, "node/gpu01 already cordoned\nnode/gpu01 drained\n", "")
SLURM_VARS = {"nvidia_driver_scheduler": "slurm", "nvidia_driver_slurm_controller": "localhost"}
KUBERNETES_VARS = {
    "nvidia_driver_scheduler": "kubernetes",
    "nvidia_driver_kubernetes_control_plane": "localhost",
    "nvidia_driver_kubeconfig": "/etc/kubernetes/admin.conf",
}


def fake_tool(tmp_path: Path, script: str, *tools: str) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        path = bin_dir / tool
        path.write_text(script.replace("PYTHON", sys.executable, 1))
        path.chmod(0o755)
    return bin_dir


def run_role_tasks(tmp_path: Path, line: str, *tasks: str, check: bool = False) -> tuple[str, list]:
    """The role's task files `tasks` run on this host against the fake Slurm; the output and
    the scontrol updates made."""
    bin_dir = fake_tool(tmp_path, FAKE_SLURM, "scontrol", "squeue", "sinfo")
    state = tmp_path / "slurm.json"
    state.write_text(json.dumps({"line": line, "jobs": [], "updates": []}))
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_SLURM_STATE": str(state)}
    out = play(tmp_path, SLURM_VARS, env, tasks, check)
    return out, json.loads(state.read_text())["updates"]


def run_role_tasks_on_kubernetes(
    tmp_path: Path,
    node: dict,
    *tasks: str,
    check: bool = False,
    pods: tuple[str, ...] = (MOVABLE,),
    drained: tuple[int, str, str] = EVICTED,
    fails: bool = False,
) -> tuple[str, dict, list[list[str]]]:
    """The role's task files `tasks` run on this host against the fake kubectl, the node's
    pods listed as `pods` in turn and `kubectl drain` answering `drained`: the output, the
    node after and the kubectl commands run (each with its KUBECONFIG first)."""
    bin_dir = fake_tool(tmp_path, FAKE_KUBECTL, "kubectl")
    state = tmp_path / "node.json"
    answers = {"node": node, "pods": list(pods), "budgets": BUDGETS, "drain": list(drained)}
    state.write_text(json.dumps(answers))
    # -v: each task's result printed, the drain's lines (`pods`) with it
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_KUBECTL_STATE": str(state),
           "ANSIBLE_VERBOSITY": "1"}  # fmt: skip
    out = play(tmp_path, KUBERNETES_VARS, env, tasks, check, fails)
    log = state.with_name("node.json.log")
    calls = [json.loads(c) for c in log.read_text().splitlines()] if log.exists() else []
    return out, json.loads(state.read_text())["node"], calls


def play(
    tmp_path: Path, scheduler: dict, environ: dict, tasks: tuple, check: bool, fails: bool = False
) -> str:
    """The role's task files run on this host as the driver rollout's play; its output (a
    play that `fails` must fail, any other succeed)."""
    plays = [
        {
            "name": "The driver rollout's drain and resume",
            "hosts": "localhost",
            "gather_facts": False,
            "vars": {
                **scheduler,
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
    done = local_play(playbook, environ, check=check)
    out = done.stdout + done.stderr
    assert (done.returncode != 0) is fails, out
    return out


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


@pytest.mark.parametrize("name", ["slurm_drain", "k8s_cordon"])
def test_the_module_documents_the_action_s_arguments(name: str):
    import importlib
    import importlib.util

    import yaml

    spec = importlib.util.spec_from_file_location(
        f"{name}_action", ROOT / "plugins" / "action" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    action = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(action)
    module = importlib.import_module(name)  # plugins/modules (tests/roles/conftest.py)

    assert module.ARGUMENT_SPEC == action.ARGUMENTS
    documented = yaml.safe_load(module.DOCUMENTATION)["options"]
    assert set(documented) == set(action.ARGUMENTS)
    for name, option in documented.items():
        assert option["type"] == action.ARGUMENTS[name]["type"], name
        assert option.get("default") == action.ARGUMENTS[name].get("default"), name


def k8s_node(cordoned: bool = False, by: str | None = None) -> dict:
    """gpu01 as `kubectl get node -o json` shows it (tests/kubernetes/fixtures), cordoned or
    not, with the owner's annotation or without."""
    node = json.loads((ROOT / "tests/kubernetes/fixtures/node-gpu01.json").read_text())
    node["spec"]["unschedulable"] = cordoned
    if by is not None:
        node["metadata"]["annotations"]["cluster-plan.io/cordoned-by"] = by
    return node


def patch(version: str, record: str | None, unschedulable: bool | None) -> list[str]:
    """The one write of a cordon (record, True) or an uncordon (None, None) of gpu01."""
    body = {"metadata": {"resourceVersion": version,
                         "annotations": {"cluster-plan.io/cordoned-by": record}},
            "spec": {"unschedulable": unschedulable}}  # fmt: skip
    return ["patch", "node", "gpu01", "--type", "merge", "-p", json.dumps(body)]


def changes(calls: list[list[str]]) -> list[list[str]]:
    """The kubectl commands that change something, without their KUBECONFIG."""
    return [c[1:] for c in calls if c[1] != "get"]


# the one drain's kubectl drain of gpu01, bounded by nvidia_driver_drain_timeout (30 s here)
DRAIN = ["drain", "gpu01", "--ignore-daemonsets", "--delete-emptydir-data",
         "--timeout=30s", "--request-timeout=30s"]  # fmt: skip


@pytest.mark.parametrize(
    "by", [None, "cluster-plan:change: upgrade"], ids=["operator", "another-owner"]
)
def test_an_operator_s_cordon_survives_the_driver_rollout_on_kubernetes(tmp_path: Path, by):
    out, node, calls = run_role_tasks_on_kubernetes(tmp_path, k8s_node(True, by), "drain", "resume")
    assert node["spec"]["unschedulable"] is True, out  # never uncordoned
    assert node["metadata"]["annotations"].get("cluster-plan.io/cordoned-by") == by, out
    # the pods are evicted all the same, by the one drain; nothing else changes
    assert changes(calls) == [DRAIN], out
    assert "gpu01 is cordoned already" in out and "gpu01 stays cordoned" in out
    assert "gpu01: evicted team-a/train-5xk8d, team-a/web-7d9f8-q4m2z, team-b/api-0" in out
    assert '"action": "none", "changed": true' in out  # its pods moved, its cordon kept


def test_the_role_cordons_with_its_record_then_evicts_and_lifts_only_its_own(tmp_path: Path):
    out, node, calls = run_role_tasks_on_kubernetes(tmp_path, k8s_node(), "drain")
    record = "cluster-plan:nvidia_driver: upgrade to branch 570"
    assert changes(calls) == [patch("48213", record, True), DRAIN], out
    # the pods and the budgets read before the drain, as `cluster-plan change` reads them
    assert [" ".join(c[1:3]) for c in calls] == [
        "get node", "patch node", "get pods", "get poddisruptionbudgets", "drain gpu01"
    ]  # fmt: skip
    assert "gpu01: left on it (DaemonSets', mirror pods): kube-system/calico-node-x7k2p" in out
    assert "gpu01: emptyDir data deleted with team-a/train-5xk8d" in out
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"]["cluster-plan.io/cordoned-by"] == record
    assert {c[0] for c in calls} == {"/etc/kubernetes/admin.conf"}  # the role's kubeconfig
    (tmp_path / "node.json.log").unlink()
    out, node, calls = run_role_tasks_on_kubernetes(tmp_path, node, "resume")
    assert changes(calls) == [patch("48214", None, None)], out
    assert "unschedulable" not in node["spec"]
    assert "cluster-plan.io/cordoned-by" not in node["metadata"]["annotations"]


def test_a_pod_a_budget_holds_stops_the_rollout_naming_both_and_the_node_stays_cordoned(
    tmp_path: Path,
):
    # kubectl drain's answer when its 3 s were up, and the pods as they were then
    out, node, calls = run_role_tasks_on_kubernetes(
        tmp_path, k8s_node(), "drain", "resume",
        pods=(MOVABLE, AFTER), drained=recorded("drain-blocked.txt"), fails=True,
    )  # fmt: skip
    record = "cluster-plan:nvidia_driver: upgrade to branch 570"
    assert changes(calls) == [patch("48213", record, True), DRAIN], out  # within the bound
    assert "drain of gpu01: after 30 s, pod(s) still on it: " in out
    assert (
        "team-a/web-7d9f8-q4m2z held by PodDisruptionBudget team-a/web (0 disruption(s) "
        "allowed; 1 pod(s) healthy, 1 needed)" in out
    )
    assert "team-b/api-0 held by PodDisruptionBudget team-b/api (not counted yet" in out
    assert "gpu01 stays cordoned" in out and "--force" not in " ".join(DRAIN)
    # the rollout stops there: cordoned with the role's record, not resumed
    assert node["spec"]["unschedulable"] is True
    assert node["metadata"]["annotations"]["cluster-plan.io/cordoned-by"] == record
    assert "failed=1" in out


def test_a_pod_no_controller_recreates_stops_the_rollout_before_any_eviction(tmp_path: Path):
    out, node, calls = run_role_tasks_on_kubernetes(
        tmp_path, k8s_node(), "drain", pods=(PODS,), fails=True
    )
    assert "drain of gpu01: pod(s) team-b/notebook declare no controller" in out
    assert [c[0] for c in changes(calls)] == ["patch"], out  # cordoned, nothing evicted
    assert node["spec"]["unschedulable"] is True


@pytest.mark.parametrize(
    "cordoned, by", [(False, None), (True, None)], ids=["in-service", "operator"]
)
def test_check_mode_cordons_and_evicts_nothing(tmp_path: Path, cordoned: bool, by):
    out, node, calls = run_role_tasks_on_kubernetes(
        tmp_path, k8s_node(cordoned, by), "drain", check=True
    )
    assert changes(calls) == [] and "changed: [localhost" in out, out
    assert node["spec"].get("unschedulable") is cordoned
    assert (
        "gpu01: would evict team-a/train-5xk8d, team-a/web-7d9f8-q4m2z, team-b/api-0, "
        "team-b/smoke-test (check mode: none moved)" in out
    )
