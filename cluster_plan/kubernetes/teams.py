"""The plan's teams in Kubernetes: what each team may use, as API objects.

Per team (the plan's `teams`):
- a Namespace named after the team, labelled with it (and with its parent team);
- a RoleBinding of the team's users to the built-in ClusterRole `edit` in that namespace (they
  run workloads there; its quotas and RBAC stay the cluster admins');
- a ResourceQuota on `requests.nvidia.com/gpu` and on each other accelerator's extended
  resource (`requests.cluster-plan.io/<type>`), which also refuses a single pod asking for
  more; a child team's quota is the smallest of its own and its ancestors' limits
  (Kubernetes quotas are per namespace: a parent's limit over all its children together is
  not enforced). No LimitRange: the API server turns a Container LimitRange's `max` into
  every container's default limit and request, so a pod that asks for no device would get
  the team's whole quota of it (and be routed to the GPU class for it);
- for a team that may not use every workload class: a ValidatingAdmissionPolicy, bound to its
  namespace, refusing pods whose class (`cluster-plan.io/workload-class`, which the routing
  policy has set by then) is not one of the team's, with a message naming the rule; and a
  ResourceQuota of zero pods in those classes' PriorityClasses (a pod that names another
  class's PriorityClass itself is counted there too);
- with `limits.max_time`: a ValidatingAdmissionPolicy, bound to the team's namespace, that
  refuses a Job without `activeDeadlineSeconds` or with a longer one.

Fair share and GPU-hour budgets have no Kubernetes counterpart in the default scheduler: they
are Slurm-only (docs/scheduling.md).
"""

from __future__ import annotations

from typing import Any

from cluster_plan.kubernetes import cel, names
from cluster_plan.kubernetes.cluster import KubernetesPlan
from cluster_plan.kubernetes.nodes import node_capacity

TEAM_LABEL = f"{names.DOMAIN}/team"
PARENT_LABEL = f"{names.DOMAIN}/parent-team"
MEMBER_ROLE = "edit"
RBAC = "rbac.authorization.k8s.io"
NAMESPACE_NAME = "kubernetes.io/metadata.name"  # set by the API server on every namespace

Document = dict[str, Any]
Team = dict[str, Any]


def max_seconds(slurm_time: str) -> int | None:
    """A Slurm time (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in seconds; None for
    UNLIMITED. validate has checked the format (checks.workload.SLURM_TIME)."""
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


def _resources(plan: KubernetesPlan) -> set[str]:
    """The device resources the cluster's nodes offer."""
    return {r for node in plan.nodes for r in node_capacity(plan.host(node))}


def _ancestors(teams: dict[str, Team], name: str) -> list[str]:
    """The team's parent, its parent's parent, ... (validate refuses cycles)."""
    chain: list[str] = []
    parent = teams[name]["parent"]
    while parent and parent in teams and parent not in chain and parent != name:
        chain.append(parent)
        parent = teams[parent]["parent"]
    return chain


def _device_limits(plan: KubernetesPlan, name: str) -> dict[str, int]:
    """Resource -> the most the team's namespace may request at once."""
    teams = plan.expanded["teams"]
    resources = _resources(plan)
    limits: dict[str, int] = {}
    for team in [name, *_ancestors(teams, name)]:
        own = teams[team]["limits"]
        wanted = {}
        if names.NVIDIA_GPU in resources and own["gpus"] is not None:
            wanted[names.NVIDIA_GPU] = int(own["gpus"])
        if own["accelerators"] is not None:
            others = sorted(resources - {names.NVIDIA_GPU})
            wanted.update(dict.fromkeys(others, int(own["accelerators"])))
        for resource, count in wanted.items():
            limits[resource] = min(count, limits.get(resource, count))
    return dict(sorted(limits.items()))


def _meta(name: str, team: str, namespace: str | None = None) -> Document:
    meta: Document = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**names.MANAGED_BY, TEAM_LABEL: team}
    return meta


def _namespace(name: str, team: Team) -> Document:
    meta = _meta(names.object_name(name), name)
    if team["parent"]:
        meta["labels"][PARENT_LABEL] = team["parent"]
    if team["description"]:
        meta["annotations"] = {f"{names.DOMAIN}/description": team["description"]}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}


def _members(name: str, team: Team) -> list[Document]:
    if not team["users"]:
        return []
    return [
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": _meta("team-members", name, names.object_name(name)),
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": MEMBER_ROLE},
            "subjects": [
                {"apiGroup": RBAC, "kind": "User", "name": user["name"]} for user in team["users"]
            ],
        }
    ]


def _device_objects(plan: KubernetesPlan, name: str) -> list[Document]:
    limits = _device_limits(plan, name)
    if not limits:
        return []
    namespace = names.object_name(name)
    return [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _meta("team-devices", name, namespace),
            "spec": {"hard": {f"requests.{r}": str(n) for r, n in limits.items()}},
        }
    ]


def _class_quota(plan: KubernetesPlan, name: str, team: Team) -> list[Document]:
    """Zero pods in the PriorityClasses of the classes the cluster serves that the team may
    not use (a class without nodes has no PriorityClass: the routing policy refuses it)."""
    allowed = set(team["classes"])
    denied = [c.priority_class for c in plan.classes.values() if c.name not in allowed]
    if not denied:
        return []
    selector = {"scopeName": "PriorityClass", "operator": "In", "values": denied}
    return [
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": _meta("team-classes", name, names.object_name(name)),
            "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [selector]}},
        }
    ]


def _policy(plan: KubernetesPlan, name: str, policy: str, spec: Document) -> list[Document]:
    """A ValidatingAdmissionPolicy on the team's namespace and its binding."""
    namespace = {"matchLabels": {NAMESPACE_NAME: names.object_name(name)}}
    api = plan.release.validating_policy_api
    return [
        {
            "apiVersion": api,
            "kind": "ValidatingAdmissionPolicy",
            "metadata": _meta(policy, name),
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {**spec["matchConstraints"], "namespaceSelector": namespace},
                "validations": spec["validations"],
            },
        },
        {
            "apiVersion": api,
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": _meta(policy, name),
            "spec": {"policyName": policy, "validationActions": ["Deny"]},
        },
    ]


def _class_policy(plan: KubernetesPlan, name: str, team: Team) -> list[Document]:
    """Pods of the team's namespace only in the classes it may use, as job_submit.lua."""
    allowed = [c for c in plan.classes if c in team["classes"]]
    if len(allowed) == len(plan.classes):
        return []
    declared = cel.label(names.CLASS_LABEL)
    expression = f"!{cel.has_label(names.CLASS_LABEL)} || {declared} in {cel.string_list(allowed)}"
    rule = f" (teams.{name}.classes: {', '.join(team['classes'])})"
    message = f"{cel.string(f'team {name!r} may not use workload class ')} + {declared}"
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
              "resources": ["pods"]}]  # fmt: skip
    return _policy(
        plan,
        name,
        f"cluster-plan-team-{names.object_name(name)}-classes",
        {
            "matchConstraints": {"resourceRules": rules},
            "validations": [
                {
                    "expression": expression,
                    "messageExpression": f"{message} + {cel.string(rule)}",
                    "reason": "Forbidden",
                }
            ],
        },
    )


def _max_time(plan: KubernetesPlan, name: str) -> list[Document]:
    """The shortest max_time of the team and its ancestors (as Slurm's inherited MaxWall)."""
    teams = plan.expanded["teams"]
    written = [
        (seconds, team, text)
        for team in [name, *_ancestors(teams, name)]
        if (text := teams[team]["limits"]["max_time"]) and (seconds := max_seconds(text))
    ]
    if not written:
        return []
    seconds, source, text = min(written)
    expression = (
        f"has(object.spec.activeDeadlineSeconds) && object.spec.activeDeadlineSeconds <= {seconds}"
    )
    message = (
        f"team {name}: a Job needs spec.activeDeadlineSeconds of at most {seconds} "
        f"(teams.{source}.limits.max_time: {text})"
    )
    rules = [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["jobs"]}]  # fmt: skip
    return _policy(
        plan,
        name,
        f"cluster-plan-team-{names.object_name(name)}-max-time",
        {
            "matchConstraints": {"resourceRules": rules},
            "validations": [{"expression": expression, "message": message}],
        },
    )


def team_objects(plan: KubernetesPlan) -> list[Document]:
    """Every team object: namespaces first (in plan order), then each team's namespaced
    objects, then the admission policies of team classes and time limits."""
    teams: dict[str, Team] = plan.expanded.get("teams") or {}
    namespaces = [_namespace(name, team) for name, team in teams.items()]
    namespaced = [
        obj
        for name, team in teams.items()
        for obj in (
            *_members(name, team),
            *_device_objects(plan, name),
            *_class_quota(plan, name, team),
        )
    ]
    policies = [
        obj
        for name, team in teams.items()
        for obj in (*_class_policy(plan, name, team), *_max_time(plan, name))
    ]
    return [*namespaces, *namespaced, *policies]
