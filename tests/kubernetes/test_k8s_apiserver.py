"""The plan's Kubernetes objects and policy checked by a real API server: etcd,
kube-apiserver and kube-controller-manager 1.36.3 from the bundle this machine built
(tests/support/kube_apiserver.py), one server per plan, in a network namespace of its own.

- Every object `cluster-plan k8s render` writes (objects/, monitoring/ after the
  prometheus-operator CRDs, examples/) is applied server-side with strict field validation,
  as the role applies them; the static pods (kube-vip) are applied as a dry run in
  kube-system (the kubelet, not the role, creates them); every one is accepted.
- The API server's own type check of each ValidatingAdmissionPolicy finds nothing.
- Every admission case of k8s_api_cases is decided by the API server (pods and Jobs created
  with dryRun=All, as the admin or, impersonated, as a team member, a reservation's user, a
  stranger or the Job controller) and by the offline model with the API server's plugins
  around it (k8s_admission, builtins=True); both decisions are compared field by field and
  each must be what the plan wants.

Runs in `make test` wherever the bundle is built (`cluster-plan k8s bundle
inventory/lab/k8s.yml`) and the tests run as root; skipped with the reason otherwise.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from k8s_admission import Admission
from k8s_api_cases import (
    NAMESPACE,
    VALIDATION_POLICY,
    Case,
    Outcome,
    body_for,
    cases,
    differences,
    expectation_problems,
    fixture_objects,
    pod,
    refusal_of,
)
from k8s_plans import PLANS, cluster_configuration, expanded_plan, rendered
from support.kube_apiserver import ApiServer, from_bundle, server_bundle, unavailable

from cluster_plan.kubernetes import Rendering, names
from cluster_plan.kubernetes.renderer import files

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "schemas" / "kubernetes" / "prometheus-operator"
BUNDLE = server_bundle()
SETTLE_S = 60.0
MANAGER = "cluster-plan"


WHY_NOT = unavailable(BUNDLE)
pytestmark = [pytest.mark.apiserver, pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]


@dataclass(repr=False)
class Applied:
    """One plan's objects on one API server."""

    plan: str
    server: ApiServer
    rendering: Rendering
    expanded: dict[str, Any]
    applies: list[tuple[str, int, int, str]] = field(default_factory=list)  # file, objects, ok
    timings: dict[str, float] = field(default_factory=dict)
    model: Admission | None = None

    def __repr__(self) -> str:
        return f"<{self.plan} on {self.server.workdir}>"


def _documents(text: str) -> int:
    return sum(1 for d in yaml.safe_load_all(text) if d)


def _apply(applied: Applied, label: str, path: Path, *options: str) -> None:
    result = applied.server.kubectl(
        "apply", "--server-side", "--validate=strict", f"--field-manager={MANAGER}",
        "--force-conflicts", *options, "-f", str(path),
    )  # fmt: skip
    accepted = sum(1 for line in result.stdout.splitlines() if "serverside-applied" in line)
    applied.applies.append(
        (label, _documents(path.read_text()), accepted, result.stderr.strip()[-2000:])
    )


def _wait(what: str, deadline: float, check: Callable[[], bool]) -> None:
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {SETTLE_S:.0f} s")
        time.sleep(0.2)


def apply_everything(applied: Applied) -> None:
    server, rendering = applied.server, applied.rendering
    folder = server.workdir / "rendered"
    for relative, text in files(rendering).items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    own = server.workdir / "apitest.yaml"
    own.write_text(yaml.safe_dump_all(fixture_objects(applied.expanded)))
    started = time.monotonic()
    _apply(applied, "the test's namespace", own)
    if rendering.monitoring:
        for crd in sorted(CRDS.glob("*.yaml")):
            _apply(applied, f"CRD {crd.name}", crd)
        server.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    for path in sorted((folder / "objects").glob("*.yaml")):
        _apply(applied, f"objects/{path.name}", path)
    for path in sorted((folder / "monitoring").glob("*.yaml")):
        _apply(applied, f"monitoring/{path.name}", path)
    for path in sorted((folder / "examples").glob("*.yaml")):
        _apply(applied, f"examples/{path.name}", path, f"--namespace={NAMESPACE}")
    for path in sorted((folder / "static-pods").glob("*/*.yaml")):
        label = f"static-pods/{path.parent.name}/{path.name} (dry run)"
        _apply(applied, label, path, "--dry-run=server", "--namespace=kube-system")
    applied.timings["apply_s"] = time.monotonic() - started


def _quotas_counted(server: ApiServer) -> bool:
    quotas = server.request("GET", "/api/v1/resourcequotas").body.get("items") or []
    return all(
        (q.get("status") or {}).get("hard") == q["spec"]["hard"] and "used" in q["status"]
        for q in quotas
    )


def _edit_aggregated(server: ApiServer) -> bool:
    role = server.request("GET", "/apis/rbac.authorization.k8s.io/v1/clusterroles/edit").body
    return any("pods" in (r.get("resources") or []) for r in role.get("rules") or [])


def _accounts_made(server: ApiServer, namespaces: set[str]) -> bool:
    path = "/api/v1/namespaces/{}/serviceaccounts/default"
    return all(server.request("GET", path.format(ns)).status == 200 for ns in namespaces)


def _policies_typed(server: ApiServer) -> bool:
    path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    policies = server.request("GET", path).body.get("items") or []
    return all(
        (p.get("status") or {}).get("observedGeneration") == p["metadata"]["generation"]
        for p in policies
    )


def _policies_active(server: ApiServer) -> bool:
    """The policy objects are loaded by the API server's informers a moment after they are
    stored: a probe is routed, and an unknown class refused."""
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    query = {"dryRun": "All"}
    routed = server.request("POST", path, pod(), query=query)
    if routed.status != 201 or names.CLASS_LABEL not in routed.body["metadata"].get("labels", {}):
        return False
    unknown = server.request("POST", path, pod({names.CLASS_LABEL: "probe"}), query=query)
    return unknown.status >= 400 and refusal_of(unknown.message).by == VALIDATION_POLICY


def settle(applied: Applied) -> None:
    """What the controllers and the API server's informers do after an apply, waited for."""
    started = time.monotonic()
    deadline = started + SETTLE_S
    server = applied.server
    namespaces = {c.namespace for c in cases(applied.expanded, applied.rendering)}
    _wait("the ClusterRole edit aggregated", deadline, lambda: _edit_aggregated(server))
    _wait("default ServiceAccounts", deadline, lambda: _accounts_made(server, namespaces))
    _wait("ResourceQuota status", deadline, lambda: _quotas_counted(server))
    _wait("the policies' type check", deadline, lambda: _policies_typed(server))
    _wait("the policies in force", deadline, lambda: _policies_active(server))
    applied.timings["settle_s"] = time.monotonic() - started


def start(plan: str) -> Applied:
    """The plan's objects on a server of their own, started, applied and settled."""
    assert BUNDLE is not None
    rendering = rendered(plan)
    server = from_bundle(BUNDLE, cluster_configuration(plan))
    try:
        server.start()
        applied = Applied(plan, server, rendering, expanded_plan(plan))
        applied.timings["start_s"] = server.timings["ready_s"]
        apply_everything(applied)
        settle(applied)
        applied.model = Admission(rendering.all_objects(), builtins=True)
        return applied
    except BaseException:
        server.stop()
        raise


@dataclass(repr=False)
class Servers:
    """At most one server at a time: the plan's tests come one plan after the other, and
    asking for another plan stops the one before (its figures printed)."""

    current: Applied | None = None
    failed: dict[str, BaseException] = field(default_factory=dict)

    def get(self, plan: str) -> Applied:
        if self.current is not None and self.current.plan == plan:
            return self.current
        self.close()
        if plan in self.failed:  # one try per plan, not one per test
            raise self.failed[plan]
        try:
            self.current = start(plan)
        except Exception as exc:
            self.failed[plan] = exc
            raise
        return self.current

    def close(self) -> None:
        if self.current is not None:
            applied, self.current = self.current, None
            applied.server.stop()
            figures = ", ".join(f"{k} {v:.1f}" for k, v in applied.timings.items())
            print(f"\n{applied.plan}: {figures}")


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    running_servers = Servers()
    try:
        yield running_servers
    finally:
        running_servers.close()


def decide(applied: Applied, case: Case) -> Outcome:
    group, plural = case.resource
    prefix = "/api/v1" if not group else f"/apis/{group}/v1"
    response = applied.server.request(
        "POST",
        f"{prefix}/namespaces/{case.namespace}/{plural}",
        body_for(case),
        query={"dryRun": "All", "fieldValidation": "Strict"},
        user=case.impersonated,
    )
    if response.status in (200, 201):
        return Outcome(admitted=response.body)
    return Outcome(refusals=(refusal_of(response.message),))


def model_decides(applied: Applied, case: Case) -> Outcome:
    assert applied.model is not None
    bindings = tuple(o for o in fixture_objects(applied.expanded) if o["kind"] == "RoleBinding")
    decision = applied.model.admit(
        body_for(case),
        case.namespace,
        case.user,
        groups=case.groups,
        resource=case.resource,
        bindings=bindings,
    )
    if decision.refusals:
        return Outcome(refusals=decision.refusals)
    return Outcome(admitted=decision.pod)


def every_rendered_object_is_accepted(cluster: Applied) -> None:
    refused = [
        f"{label}: {accepted} of {documents} accepted: {errors}"
        for label, documents, accepted, errors in cluster.applies
        if accepted != documents or errors
    ]
    assert refused == []
    assert sum(documents for _, documents, _, _ in cluster.applies) > 10


def every_validating_policy_type_checks_clean(cluster: Applied) -> None:
    path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
    policies = cluster.server.request("GET", path).body["items"]
    assert policies
    warnings = {
        p["metadata"]["name"]: p["status"]["typeChecking"].get("expressionWarnings")
        for p in policies
        if p["status"].get("typeChecking", {}).get("expressionWarnings")
    }
    assert warnings == {}


def every_process_is_in_its_own_network_namespace(cluster: Applied) -> None:
    """Nothing of the server listens where the machine's services do."""
    ours = os.stat("/proc/self/ns/net").st_ino
    processes = cluster.server.processes
    assert [p.name for p in processes] == ["etcd", "kube-apiserver", "kube-controller-manager"]
    theirs = {os.stat(f"/proc/{p.popen.pid}/ns/net").st_ino for p in processes}
    assert len(theirs) == 1 and ours not in theirs


def _timed(
    cluster: Applied, figure: str, decision: Callable[[Applied, Case], Outcome], case: Case
) -> Outcome:
    started = time.monotonic()
    outcome = decision(cluster, case)
    cluster.timings[figure] = cluster.timings.get(figure, 0.0) + time.monotonic() - started
    return outcome


def decides_as_the_model(cluster: Applied, case: Case) -> None:
    real = _timed(cluster, "cases_s", decide, case)
    model = _timed(cluster, "model_s", model_decides, case)
    assert differences(real, model) == []
    assert expectation_problems(case, real) == []


_CASES = {plan: {c.name: c for c in cases(expanded_plan(plan), rendered(plan))} for plan in PLANS}
_CHECKS = {
    "in-a-network-namespace-of-its-own": every_process_is_in_its_own_network_namespace,
    "every-object-accepted": every_rendered_object_is_accepted,
    "policies-type-check-clean": every_validating_policy_type_checks_clean,
}


def _params() -> list[Any]:
    """Per plan, its checks then its cases: the plan's tests run together on one server."""
    return [
        pytest.param(plan, name, id=f"{plan}-{name}")
        for plan in sorted(PLANS)
        for name in [*_CHECKS, *_CASES[plan]]
    ]


@pytest.mark.parametrize(("plan", "check"), _params())
def test_the_real_api_server(servers: Servers, plan: str, check: str) -> None:
    cluster = servers.get(plan)
    if check in _CHECKS:
        _CHECKS[check](cluster)
    else:
        decides_as_the_model(cluster, _CASES[plan][check])
