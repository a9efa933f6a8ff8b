"""Training acceptance on a Kubernetes plan without a cluster: what runs for which plan, the
kubectl commands on the control plane, and the verdicts on the lab's recorded training output
(the same program the Job's pods run) or made to fail. The real run is
tests/kubernetes/test_kubernetes_lab.py's day-2 test, on the lab's cluster."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.change_plans import grow_gpu, write_plan

from cluster_plan.acceptance import k8s_training
from cluster_plan.acceptance.collectives_html import collectives_html
from cluster_plan.acceptance.command import _collectives_summary
from cluster_plan.acceptance.k8s_training import (
    NAMESPACE,
    KubernetesTraining,
    k8s_training_spec,
    run_k8s_training,
)
from cluster_plan.acceptance.report import build_report, judge_report, validate_report
from cluster_plan.acceptance.spec import spec_from_expanded
from cluster_plan.api import load_expanded
from cluster_plan.kubernetes.training import JOB
from cluster_plan.transport.execution import CommandResult

ROOT = Path(__file__).resolve().parents[2]
K8S_LAB = ROOT / "inventory" / "lab" / "k8s.yml"
TRAIN = (ROOT / "tests" / "collectives" / "recorded" / "train-gloo-lab.out").read_text()


@pytest.fixture(scope="module")
def grown(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The Kubernetes lab plan with a second node in its training pool (gpu02)."""
    path = write_plan(tmp_path_factory.mktemp("grown"), grow_gpu, base=K8S_LAB, name="k8s.yml")
    expanded: dict[str, Any] = load_expanded(str(path))
    return expanded


def spec_of(expanded: dict[str, Any]) -> KubernetesTraining:
    spec = k8s_training_spec(expanded)
    assert isinstance(spec, KubernetesTraining), spec
    return spec


class FakeControlPlane:
    """Answers the phase's kubectl: the Job's conditions in turn, then the pods' logs."""

    def __init__(self, conditions: Sequence[str] = ("", "", "Complete "), logs: str = TRAIN):
        self.conditions, self.logs = list(conditions), logs
        self.calls: list[tuple[str, str]] = []

    def __call__(self, host: str, argv: Sequence[str], timeout: float) -> CommandResult:
        script = argv[-1]
        self.calls.append((host, script))
        if f"get job {JOB}" in script:
            now = self.conditions.pop(0) if len(self.conditions) > 1 else self.conditions[0]
            return CommandResult(tuple(argv), 0, now, "")
        if "logs --selector" in script:
            return CommandResult(tuple(argv), 0, self.logs, "")
        if "get pods --selector" in script:
            return CommandResult(tuple(argv), 0, "gpu02 gpu01", "")
        return CommandResult(tuple(argv), 0, "", "")


def run_phase(spec: KubernetesTraining | str, cluster: FakeControlPlane) -> dict[str, Any]:
    return run_k8s_training(spec, cluster, lambda message: None)


def test_the_job_runs_where_the_training_class_has_two_nodes(grown: dict[str, Any]) -> None:
    spec = spec_of(grown)
    assert (spec.control_plane, spec.pool, spec.nodes) == ("cp01", "gpu", ("gpu01", "gpu02"))
    assert (spec.ranks, spec.backend, spec.network) == (2, "gloo", "compute")
    assert spec.rate_scale == 0.01
    # the bundle's image runs its own program: a headless Service and the Job, no script
    assert [o["kind"] for o in spec.objects] == ["Service", "Job"]
    assert spec_from_expanded(grown).kubernetes_training == spec


def test_plans_it_does_not_apply_to() -> None:
    # one node in the training pool: the lab plan as it boots
    one = load_expanded(str(K8S_LAB))
    assert k8s_training_spec(one) == "one node: nothing crosses the network"
    # a Slurm plan: its job runs through Slurm (collectives_spec)
    assert k8s_training_spec(load_expanded(str(ROOT / "inventory" / "lab" / "cluster.yml"))) is None


def test_the_job_is_applied_waited_for_judged_and_deleted(
    grown: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(k8s_training, "POLL_S", 0.0)
    cluster = FakeControlPlane()
    section = run_phase(spec_of(grown), cluster)
    assert section["passed"] and section["problems"] == []
    (job,) = section["training"]
    assert (job["job"], job["scheduler"], job["pool"]) == (JOB, "kubernetes", "gpu")
    assert job["nodes"] == ["gpu01", "gpu02"]  # where the API server placed its pods
    assert job["identical_weights"] and job["hosts"] == ["gpu01", "gpu02"]
    assert job["last_loss"] < job["first_loss"] / 10
    scripts = [script for host, script in cluster.calls]
    assert {host for host, _ in cluster.calls} == {"cp01"}  # kubectl on the control plane
    assert f"delete job {JOB}" in scripts[0]  # an earlier run's Job first
    applied = scripts[1]
    assert '"kind": "Namespace"' in applied and f"--namespace {NAMESPACE} apply -f -" in applied
    listed = json.loads(applied.split("<<'JSON'\n")[2].split("\nJSON")[0])
    assert [o["kind"] for o in listed["items"]] == ["Service", "Job"]
    assert len([s for s in scripts if f"get job {JOB}" in s]) == 3  # until it completed
    assert f"delete job {JOB}" in scripts[-1]


@pytest.mark.parametrize(
    ("conditions", "logs", "problem"),
    [
        (("Failed ",), "rank 1: connection refused\n", "printed no result"),
        (("Failed ",), TRAIN, "exited 1: .*job cluster-plan-training: Failed"),
        (("Complete ",), TRAIN.replace('"identical_weights": true', '"identical_weights": false'),
         "different weights"),
        (("Complete ",), TRAIN.replace('"loss_went_down": true', '"loss_went_down": false'),
         "loss did not go down"),
    ],
    ids=["no-result", "failed", "weights", "loss"],
)  # fmt: skip
def test_each_failure_is_a_problem_with_its_cause(
    grown: dict[str, Any], conditions: tuple[str, ...], logs: str, problem: str
) -> None:
    section = run_phase(spec_of(grown), FakeControlPlane(conditions, logs))
    assert not section["passed"]
    assert any(re.search(problem, p, re.S) for p in section["problems"]), section


def test_a_job_that_never_ends_is_deleted_at_the_bound(
    grown: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(k8s_training, "POLL_S", 0.0)
    monkeypatch.setattr(k8s_training, "START_S", 0)
    spec = spec_of(grown)
    cluster = FakeControlPlane(("",), "")
    section = run_phase(KubernetesTraining(**{**spec.__dict__, "timeout_s": 0}), cluster)
    assert not section["passed"]
    assert any("not started after 0 s, deleted" in p or "running after 0 s" in p
               for p in section["problems"]), section["problems"]  # fmt: skip
    assert f"delete job {JOB}" in cluster.calls[-1][1]


def test_the_report_carries_the_section_and_fails_with_it(grown: dict[str, Any]) -> None:
    spec = spec_from_expanded(grown)
    good = run_phase(spec_of(grown), FakeControlPlane(("Complete ",)))
    report = build_report(spec, [], [], [], [], {}, 1, None, good)
    assert validate_report(report) == [] and judge_report(report)
    html = "".join(collectives_html(report["collectives"]))
    assert "Training through Kubernetes" in html and "training loss of pool gpu" in html
    assert "Collectives (job network" not in html  # no sweep ran
    bad = run_phase(spec_of(grown), FakeControlPlane(("Failed ",), "oom\n"))
    failed = build_report(spec, [], [], [], [], {}, 1, None, bad)
    assert validate_report(failed) == [] and not judge_report(failed)
    text = "\n".join(_collectives_summary(failed["collectives"]))
    assert f"training FAILED: pool gpu, job {JOB}" in text
    skipped = run_phase("one node: nothing crosses the network", FakeControlPlane())
    one = build_report(spec, [], [], [], [], {}, 1, None, skipped)
    assert validate_report(one) == [] and judge_report(one)
    assert "not tested: one node" in "".join(collectives_html(one["collectives"]))
