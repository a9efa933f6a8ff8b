"""The plan's teams in Kubernetes: what each team may use, as API objects.

Per team (a Kubernetes plan's `teams`):
- a Namespace named after the team, labelled with it (and with its parent team);
- a RoleBinding of the team's users to the built-in ClusterRole `edit` in that namespace (they
  run workloads there; its quotas and RBAC stay the cluster admins');
- a ResourceQuota on `requests.nvidia.com/gpu` and on each other accelerator's extended
  resource (`requests.cluster-plan.io/<type>`), and a LimitRange so that no container asks
  for more devices than its team may hold; a child team's quota is the smallest of its own and
  its ancestors' limits (Kubernetes quotas are per namespace: a parent's limit over all its
  children together is not enforced);
- a ResourceQuota of zero pods in the PriorityClasses of the workload classes the team may not
  use (the classes' PriorityClasses are `workload-<class>`, as the Kubernetes renderer names
  them);
- with `limits.max_time`: a ValidatingAdmissionPolicy, bound to the team's namespace, that
  refuses a Job without `activeDeadlineSeconds` or with a longer one.

Fair share and GPU-hour budgets have no Kubernetes counterpart in the default scheduler: they
are Slurm-only (docs/scheduling.md). Pure: data in, objects out.
"""

from __future__ import annotations

from typing import Any

import yaml

from cluster_plan.contract import ExpandedPlan, Team

DOMAIN = "cluster-plan.io"
MANAGED_BY = {"app.kubernetes.io/managed-by": "cluster-plan"}
TEAM_LABEL = f"{DOMAIN}/team"
PARENT_LABEL = f"{DOMAIN}/parent-team"
NVIDIA_GPU = "nvidia.com/gpu"
MEMBER_ROLE = "edit"
RBAC = "rbac.authorization.k8s.io"
ADMISSION = "admissionregistration.k8s.io/v1"  # ValidatingAdmissionPolicy: GA in 1.30
WORKER_ROLES = frozenset({"k8s_worker", "k8s_control_plane"})

Document = dict[str, Any]


def object_name(name: str) -> str:
    """A plan name as a Kubernetes object name (DNS-1123: no `_`)."""
    return name.lower().replace("_", "-")


def priority_class(workload_class: str) -> str:
    """The PriorityClass of a workload class, as cluster_plan/kubernetes names it."""
    return f"workload-{object_name(workload_class)}"


def extended_resource(gres_type: str) -> str:
    """The resource a generic accelerator is counted in: `cluster-plan.io/tpu`."""
    return f"{DOMAIN}/{gres_type}"


def max_seconds(slurm_time: str) -> int | None:
    """A Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in seconds; None for
    UNLIMITED."""
    text = slurm_time.strip().upper()
    if text in ("UNLIMITED", "INFINITE", "-1"):
        return None
    days, _, clock = text.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    if days:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = [*parts, 0, 0][:3]
        return int(days) * 86400 + hours * 3600 + minutes * 60 + seconds
    if len(parts) == 3:  # HH:MM:SS
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    if len(parts) == 2:  # MM:SS
        return parts[0] * 60 + parts[1]
    return parts[0] * 60  # minutes


def _devices(expanded: ExpandedPlan) -> tuple[bool, list[str]]:
    """(whether a Kubernetes node has NVIDIA GPUs, the gres types of other accelerators)."""
    gpus, others = False, set()
    for host in expanded["hosts"].values():
        accel = host["accelerators"]
        if not accel or not accel["count"] or not WORKER_ROLES.intersection(host["roles"]):
            continue
        if accel["kind"] == "gpu":
            gpus = True
        else:
            others.add(accel["gres_type"])
    return gpus, sorted(others)


def _ancestors(teams: dict[str, Team], name: str) -> list[str]:
    """The team's parent, its parent's parent, ... (validate refuses cycles)."""
    chain: list[str] = []
    parent = teams[name]["parent"]
    while parent and parent in teams and parent not in chain and parent != name:
        chain.append(parent)
        parent = teams[parent]["parent"]
    return chain


def _device_limits(expanded: ExpandedPlan, name: str) -> dict[str, int]:
    """Resource -> the most the team's namespace may request at once."""
    teams = expanded["teams"]
    gpus, others = _devices(expanded)
    limits: dict[str, int] = {}
    for team in [name, *_ancestors(teams, name)]:
        own = teams[team]["limits"]
        wanted = {}
        if gpus and own["gpus"] is not None:
            wanted[NVIDIA_GPU] = int(own["gpus"])
        if own["accelerators"] is not None:
            wanted.update({extended_resource(t): int(own["accelerators"]) for t in others})
        for resource, count in wanted.items():
            limits[resource] = min(count, limits.get(resource, count))
    return dict(sorted(limits.items()))


def _meta(name: str, team: str, namespace: str | None = None) -> Document:
    meta: Document = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**MANAGED_BY, TEAM_LABEL: team}
    return meta


def _namespace(name: str, team: Team) -> Document:
    meta = _meta(object_name(name), name)
    if team["parent"]:
        meta["labels"][PARENT_LABEL] = team["parent"]
    if team["description"]:
        meta["annotations"] = {f"{DOMAIN}/description": team["description"]}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _members(name: str, team: Team) -> list[Document]:
    if not team["users"]:
        return []
    return [
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": _meta("team-members", name, object_name(name)),
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": MEMBER_ROLE},
            "subjects": [
                {"apiGroup": RBAC, "kind": "User", "name": user["name"]} for user in team["users"]
            ],
        }
    ]


def _device_objects(expanded: ExpandedPlan, name: str) -> list[Document]:
    limits = _device_limits(expanded, name)
    if not limits:
        return []
    namespace = object_name(name)
    return [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _meta("team-devices", name, namespace),
            "spec": {"hard": {f"requests.{r}": str(n) for r, n in limits.items()}},
        },
        {
            "apiVersion": "v1",
            "kind": "LimitRange",
            "metadata": _meta("team-devices", name, namespace),
            "spec": {
                "limits": [{"type": "Container", "max": {r: str(n) for r, n in limits.items()}}]
            },
        },
    ]


def _class_quota(expanded: ExpandedPlan, name: str, team: Team) -> list[Document]:
    scheduler = expanded["scheduler"]
    classes = list(scheduler["workload_classes"]) if scheduler else []
    denied = [priority_class(c) for c in classes if c not in team["classes"]]
    if not denied:
        return []
    selector = {"scopeName": "PriorityClass", "operator": "In", "values": denied}
    return [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _meta("team-classes", name, object_name(name)),
            "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [selector]}},
        }
    ]


def _max_time(teams: dict[str, Team], name: str) -> list[Document]:
    """The shortest max_time of the team and its ancestors (as Slurm's inherited MaxWall)."""
    written = [
        (seconds, team, text)
        for team in [name, *_ancestors(teams, name)]
        if (text := teams[team]["limits"]["max_time"]) and (seconds := max_seconds(text))
    ]
    if not written:
        return []
    seconds, source, text = min(written)
    policy = f"cluster-plan-team-{object_name(name)}-max-time"
    expression = (
        f"has(object.spec.activeDeadlineSeconds) && object.spec.activeDeadlineSeconds <= {seconds}"
    )
    message = (
        f"team {name}: a Job needs spec.activeDeadlineSeconds of at most {seconds} "
        f"(teams.{source}.limits.max_time: {text})"
    )
    rules = [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["jobs"]}]  # fmt: skip
    return [
        {
            "apiVersion": ADMISSION,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": _meta(policy, name),
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": rules},
                "validations": [{"expression": expression, "message": message}],
            },
        },
        {
            "apiVersion": ADMISSION,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": _meta(policy, name),
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {TEAM_LABEL: name}}},
            },
        },
    ]


def team_objects(expanded: ExpandedPlan) -> list[Document]:
    """Every team object of a Kubernetes plan, namespaces first (in plan order), then each
    team's namespaced objects, then the cluster-wide admission policies; none for other plans."""
    scheduler = expanded["scheduler"]
    if not scheduler or scheduler["type"] != "kubernetes":
        return []
    teams = expanded["teams"]
    namespaces = [_namespace(name, team) for name, team in teams.items()]
    namespaced = [
        obj
        for name, team in teams.items()
        for obj in (
            *_members(name, team),
            *_device_objects(expanded, name),
            *_class_quota(expanded, name, team),
        )
    ]
    policies = [obj for name in teams for obj in _max_time(teams, name)]
    return [*namespaces, *namespaced, *policies]


class _Dumper(yaml.SafeDumper):
    """Plain YAML for people: no anchors, lists indented under their key."""

    def ignore_aliases(self, data: Any) -> bool:
        return True

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def dump_documents(documents: list[Document]) -> str:
    return yaml.dump_all(
        documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100
    )
