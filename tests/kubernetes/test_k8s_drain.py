"""Moving the pods off a cordoned node (cluster_plan.kubernetes.drain), decided from kubectl's
output recorded on the bundle's kube-apiserver 1.36.3 (fixtures/drain/): node gpu01 with a
DaemonSet's pod (calico-node), a ReplicaSet's pod held by a budget the disruption controller
counted (team-a/web: 0 disruptions allowed), a Job's pod with an emptyDir volume, a
StatefulSet's pod under a budget not counted yet (team-b/api), a bare pod (team-b/notebook)
and a finished bare pod (team-b/smoke-test); `kubectl drain`'s own answers with the bare pod
there (drain-bare.txt) and, without it, after its 3 s timeout (drain-blocked.txt, the pods
as they were then in pods-gpu01-after.json: the Job's pod evicted and terminating, no
kubelet to end it). What the real server does is tests/kubernetes/test_k8s_drain_apiserver.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.drain_records import AFTER, BUDGETS, PODS, recorded, without

from cluster_plan.kubernetes import drain
from cluster_plan.kubernetes.drain import (
    Budget,
    DrainError,
    Pod,
    drain_argv,
    parse_budgets,
    parse_pods,
    selects,
)


class Kubectl:
    """kubectl on the control plane: each command's answers in turn (the last one kept),
    by its first two words; every command kept."""

    def __init__(self, answers: dict[str, list[tuple[int, str, str]]]) -> None:
        self.answers = answers
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> tuple[int, str, str]:
        self.calls.append(argv)
        queue = self.answers[" ".join(argv[1:3])]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    @property
    def drains(self) -> list[list[str]]:
        return [c for c in self.calls if c[1] == "drain"]


def scene(pods: str, drained: tuple[int, str, str], after: str | None = None) -> Kubectl:
    return Kubectl(
        {
            "get pods": [(0, pods, "")] + ([(0, after, "")] if after is not None else []),
            "get poddisruptionbudgets": [(0, BUDGETS, "")],
            "drain gpu01": [drained],
        }
    )


def test_the_recorded_pods_and_budgets_parse_as_the_drain_sees_them():
    pods = {p.ref: p for p in parse_pods(PODS)}
    assert sorted(pods) == ["kube-system/calico-node-x7k2p", "team-a/train-5xk8d",
                            "team-a/web-7d9f8-q4m2z", "team-b/api-0", "team-b/notebook",
                            "team-b/smoke-test"]  # fmt: skip
    assert [r for r, p in pods.items() if p.stays] == ["kube-system/calico-node-x7k2p"]
    assert [r for r, p in pods.items() if p.bare] == ["team-b/notebook"]  # smoke-test ended
    assert pods["team-a/train-5xk8d"].controller == "Job" and pods["team-a/train-5xk8d"].emptydir
    assert not any(p.deleting for p in pods.values())
    web, api = parse_budgets(BUDGETS)
    assert (web.name, web.counted, web.allowed, web.healthy, web.desired) == ("web", True, 0, 1, 1)
    assert (api.name, api.counted) == ("api", False)  # no observedGeneration: not counted
    assert web.covers(pods["team-a/web-7d9f8-q4m2z"]) and api.covers(pods["team-b/api-0"])
    assert not web.covers(pods["team-b/api-0"])  # another namespace
    after = {p.ref: p for p in parse_pods(AFTER)}
    assert after["team-a/train-5xk8d"].deleting and "team-b/smoke-test" not in after


@pytest.mark.parametrize(
    ("selector", "labels", "selected"),
    [
        (None, {"app": "web"}, False),  # a budget without a selector selects nothing
        ({}, {"app": "web"}, True),  # an empty one every pod of its namespace
        ({"matchLabels": {"app": "web"}}, {"app": "web", "tier": "1"}, True),
        ({"matchLabels": {"app": "web"}}, {"app": "api"}, False),
        ({"matchExpressions": [{"key": "app", "operator": "In", "values": ["a", "b"]}]},
         {"app": "b"}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]}, {}, True),
        ({"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["a"]}]},
         {"app": "a"}, False),
        ({"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}, {"gpu": ""}, True),
        ({"matchExpressions": [{"key": "gpu", "operator": "DoesNotExist"}]}, {"gpu": ""}, False),
        ({"matchLabels": {"app": "web"},
          "matchExpressions": [{"key": "tier", "operator": "Exists"}]}, {"app": "web"}, False),
    ],
)  # fmt: skip
def test_a_budget_selects_pods_as_the_api_server_does(
    selector: Any, labels: dict[str, str], selected: bool
):
    assert selects(selector, labels) is selected


def test_a_bare_pod_stops_the_drain_before_anything_is_evicted():
    kubectl = scene(PODS, recorded("drain-bare.txt"))
    with pytest.raises(DrainError, match=r"pod\(s\) team-b/notebook declare no controller.*"
                       r"nothing was evicted; gpu01 stays cordoned"):  # fmt: skip
        drain.drain(kubectl, "gpu01", 600)
    assert kubectl.drains == []


def test_a_drain_that_ends_in_time_reports_what_it_evicted_and_what_stays():
    kubectl = scene(without(PODS, "notebook"), (0, "node/gpu01 already cordoned\n", ""))
    done = drain.drain(kubectl, "gpu01", 600)
    assert kubectl.drains == [["kubectl", "drain", "gpu01", "--ignore-daemonsets",
                               "--delete-emptydir-data", "--timeout=600s",
                               "--request-timeout=600s"]]  # fmt: skip
    assert done.moved == ("team-a/train-5xk8d", "team-a/web-7d9f8-q4m2z", "team-b/api-0",
                          "team-b/smoke-test")  # in the API's order  # fmt: skip
    assert done.kept == ("kube-system/calico-node-x7k2p",)
    assert done.overridden == () and done.emptied == ("team-a/train-5xk8d",)
    assert done.lines[0] == "gpu01: evicted " + ", ".join(done.moved)


def test_pods_still_there_when_the_time_is_up_are_named_with_what_holds_them():
    kubectl = scene(without(PODS, "notebook"), recorded("drain-blocked.txt"), AFTER)
    with pytest.raises(DrainError) as failed:
        drain.drain(kubectl, "gpu01", 3)
    message = str(failed.value)
    assert message.startswith("drain of gpu01: after 3 s, pod(s) still on it: ")
    assert (
        "team-a/web-7d9f8-q4m2z held by PodDisruptionBudget team-a/web (0 disruption(s) "
        "allowed; 1 pod(s) healthy, 1 needed)" in message
    )
    assert "team-b/api-0 held by PodDisruptionBudget team-b/api (not counted yet" in message
    assert "team-a/train-5xk8d evicted, still terminating" in message
    assert "smoke-test" not in message and "calico" not in message  # gone; stays by rule
    assert message.endswith("gpu01 stays cordoned")
    assert len(kubectl.drains) == 1


def test_a_pod_neither_held_nor_terminating_is_named_with_kubectl_s_last_word():
    """kubectl drain stops on something else (an orphaned DaemonSet pod, an API error)."""
    said = 'error: cannot delete daemonsets.apps "gone" not found: team-a/web-7d9f8-q4m2z\n'
    kubectl = scene(without(PODS, "notebook", "api-0"), (1, "", said), PODS)
    kubectl.answers["get poddisruptionbudgets"] = [(0, '{"items": []}', "")]
    with pytest.raises(DrainError, match=r"web-7d9f8-q4m2z not moved \(kubectl drain: error: "
                       r"cannot delete daemonsets"):  # fmt: skip
        drain.drain(kubectl, "gpu01", 3)


def test_force_deletes_the_pods_bare_ones_too_and_says_which_a_budget_covered():
    kubectl = scene(PODS, (0, "", ""))
    done = drain.drain(kubectl, "gpu01", 60, force=True)
    assert kubectl.drains[0][-2:] == ["--force", "--disable-eviction"]
    assert "team-b/notebook" in done.moved and "kube-system/calico-node-x7k2p" not in done.moved
    assert done.overridden == (
        "team-a/web-7d9f8-q4m2z (PodDisruptionBudget team-a/web (0 disruption(s) allowed; "
        "1 pod(s) healthy, 1 needed))",
        "team-b/api-0 (PodDisruptionBudget team-b/api (not counted yet by the disruption "
        "controller: every eviction is refused until it is))",
    )
    assert done.lines[0].startswith("gpu01: deleted ")
    assert done.lines[1].startswith("gpu01: deleted despite a PodDisruptionBudget (--force): ")


def test_a_node_with_only_daemonset_pods_runs_no_drain():
    only = without(PODS, "notebook", "api-0", "web-7d9f8-q4m2z", "train-5xk8d", "smoke-test")
    kubectl = scene(only, (1, "", "must not run"))
    done = drain.drain(kubectl, "gpu01", 600)
    assert kubectl.drains == [] and done.moved == ()
    assert done.lines == ["gpu01: no pod to move",
                          "gpu01: left on it (DaemonSets', mirror pods): "
                          "kube-system/calico-node-x7k2p"]  # fmt: skip


def test_a_mirror_pod_stays_and_a_finished_daemonset_pod_goes():
    mirror = Pod("kube-system", "kube-proxy-gpu01", controller="Node", mirror=True)
    finished = Pod("kube-system", "calico-node-old", controller="DaemonSet", phase="Failed")
    assert mirror.stays and not mirror.bare
    assert not finished.stays and not finished.bare


@pytest.mark.parametrize(
    ("timeout_s", "force", "tail"),
    [
        (0, False, ["--timeout=1s", "--request-timeout=1s"]),  # kubectl's 0 is no bound
        (2.6, False, ["--timeout=3s", "--request-timeout=3s"]),
        (600, True, ["--timeout=600s", "--request-timeout=600s", "--force",
                     "--disable-eviction"]),
    ],
)  # fmt: skip
def test_the_drain_is_bounded_and_force_deletes(timeout_s: float, force: bool, tail: list[str]):
    argv = drain_argv("gpu01", timeout_s, force)
    assert argv[:5] == ["kubectl", "drain", "gpu01", "--ignore-daemonsets",
                        "--delete-emptydir-data"]  # fmt: skip
    assert argv[5:] == tail


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("", "not JSON.*no output"),
        ("error: the server doesn't have a resource type", "not JSON"),
        ('{"kind": "Status"}', "not a list of pods"),
    ],
)
def test_what_is_not_a_pod_list_is_named(text: str, seen: str):
    with pytest.raises(DrainError, match=seen):
        parse_pods(text)


def test_kubectl_that_cannot_list_the_pods_stops_the_drain():
    kubectl = Kubectl({"get pods": [(1, "", "The connection to the server was refused")]})
    with pytest.raises(DrainError, match=r"`kubectl get pods .*` exited 1.*refused"):
        drain.drain(kubectl, "gpu01", 600)


def test_a_budget_not_counted_yet_is_said_so():
    budget = Budget("team-b", "api", {}, 0, False, 0, 0)
    assert "not counted yet" in budget.described
    assert budget.covers(Pod("team-b", "x")) and not budget.covers(Pod("team-a", "x"))


def test_a_forced_drain_not_done_in_time_names_the_pods_deleted_and_still_terminating():
    kubectl = scene(without(PODS, "notebook"), (1, "", "error: context deadline exceeded\n"),
                    without(AFTER, "web-7d9f8-q4m2z", "api-0"))  # fmt: skip
    with pytest.raises(DrainError, match=r"^drain of gpu01: after 30 s, pod\(s\) still on it: "
                       r"team-a/train-5xk8d deleted, still terminating \(its kubelet has not "
                       r"ended it\); gpu01 stays cordoned$"):  # fmt: skip
        drain.drain(kubectl, "gpu01", 30, force=True)
