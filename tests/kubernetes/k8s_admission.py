"""The generated admission policies, run as the API server runs them, with a CEL library.

`Admission(objects).admit(pod)` applies every bound MutatingAdmissionPolicy whose
match constraints and conditions hold (variables, then each JSONPatch mutation in order),
then every bound ValidatingAdmissionPolicy, and returns the pod as it would be stored, or
the denial message. CEL is evaluated by cel-python (celpy); the `JSONPatch` and `Object.*`
types the API server declares for mutations are registered as message types.

`Admission(objects, builtins=True)` adds what the API server itself does around the
policies (k8s_builtin_admission: RBAC first, the built-in mutating plugins before the
policies and once more after a policy changed the pod, ResourceQuota last), so that its
result can be compared with a real API server's field by field. The API server runs the
policies in no fixed order (a Go map), so `Decision.refusals` lists every policy that
refuses; a real server reports one of them.

celpy checks no types, so `object_type_problems` does that part of the API server's type
check that matters here: every `Object.<path>{field: ...}` names a real field path of a Pod
and real fields, read from the same OpenAPI schemas kubernetes-validate ships.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import celpy
from celpy import celtypes
from k8s_builtin_admission import Builtins, Refusal

_OBJECT_TYPE = re.compile(r"\b(JSONPatch|Object(?:\.[A-Za-z_][A-Za-z0-9_]*)*)\s*\{")


class JSONPatch(celtypes.MessageType):
    """The API server's JSONPatch type."""


class ObjectType(celtypes.MessageType):
    """An `Object.<path>` type: a value of that field of the object under admission."""


def to_json(value: Any) -> Any:
    """A celpy value (celpy types, or plain Python ones from some operators) as JSON data."""
    if isinstance(value, celpy.CELEvalError):
        raise value
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, bool | celtypes.BoolType):  # BoolType is an int, not a bool
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if value is None:
        return None
    raise TypeError(f"cannot turn {value!r} into JSON")


def _pointer(path: str) -> list[str]:
    if not path.startswith("/"):
        raise ValueError(f"not a JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def apply_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """RFC 6902 add/replace/remove/test, enough for the policies' patches."""
    doc = copy.deepcopy(document)
    for op in operations:
        *parents, last = _pointer(op["path"])
        target = doc
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        kind = op["op"]
        if kind == "test":
            current = target[int(last)] if isinstance(target, list) else target.get(last)
            if current != op.get("value"):
                raise ValueError(f"test failed at {op['path']}")
        elif kind in ("add", "replace"):
            if isinstance(target, list):
                index = len(target) if last == "-" else int(last)
                if kind == "add":
                    target.insert(index, op["value"])
                else:
                    target[index] = op["value"]
            else:
                if kind == "replace" and last not in target:
                    raise KeyError(f"replace of a missing member {op['path']}")
                target[last] = op["value"]
        elif kind == "remove":
            del target[int(last) if isinstance(target, list) else last]
        else:
            raise ValueError(f"unsupported JSON patch op {kind}")
    return doc


def _flat(name: str) -> str:
    # celpy cannot hold both Object.spec.affinity and Object.spec.affinity.nodeAffinity as
    # types (a name that is also a package), so each type gets one flat identifier
    return name.replace(".", "__")


@functools.cache
def _program(expression: str) -> Any:
    types: dict[str, Any] = {"JSONPatch": JSONPatch}
    for name in _OBJECT_TYPE.findall(expression):
        types[_flat(name)] = JSONPatch if name == "JSONPatch" else ObjectType
    flat = _OBJECT_TYPE.sub(lambda m: _flat(m.group(1)) + "{", expression)
    env = celpy.Environment(annotations=types)
    return env.program(env.compile(flat))


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    program = _program(expression)
    result = program.evaluate(celpy.json_to_cel(activation) if activation else {})
    if isinstance(result, celpy.CELEvalError):
        raise result
    return result


def _expressions(policy: dict[str, Any]) -> list[str]:
    spec = policy["spec"]
    out = [c["expression"] for c in spec.get("matchConditions", [])]
    out += [v["expression"] for v in spec.get("variables", [])]
    for m in spec.get("mutations", []):
        out.append((m.get("jsonPatch") or m.get("applyConfiguration"))["expression"])
    for v in spec.get("validations", []):
        out += [v["expression"], v.get("messageExpression", "''")]
    return out


def _selector_matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        present = expr["key"] in labels
        value = labels.get(expr["key"])
        op = expr["operator"]
        if op == "In" and not (present and value in expr["values"]):
            return False
        if op == "NotIn" and present and value in expr["values"]:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


@dataclass
class Decision:
    pod: dict[str, Any]
    denied: str | None = None
    policies: tuple[str, ...] = ()  # the mutating policies that changed the pod
    refusals: tuple[Refusal, ...] = ()  # every refusal; `denied` is the first one's message


PODS = ("", "pods")


class Admission:
    def __init__(self, objects: list[dict[str, Any]], builtins: bool = False):
        self.builtins = Builtins(objects) if builtins else None
        bound = {o["spec"]["policyName"] for o in objects if o["kind"].endswith("PolicyBinding")}
        self.mutating = [
            o
            for o in objects
            if o["kind"] == "MutatingAdmissionPolicy" and o["metadata"]["name"] in bound
        ]
        self.validating = [
            o
            for o in objects
            if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] in bound
        ]

    @property
    def policies(self) -> list[dict[str, Any]]:
        return [*self.mutating, *self.validating]

    def expressions(self) -> list[str]:
        return [e for p in self.policies for e in _expressions(p)]

    @staticmethod
    def _matches(policy: dict[str, Any], namespace: str, resource: tuple[str, str] = PODS) -> bool:
        constraints = policy["spec"]["matchConstraints"]
        rules = constraints["resourceRules"]
        group, plural = resource
        matched = any(
            group in r["apiGroups"] and plural in r["resources"] and "CREATE" in r["operations"]
            for r in rules
        )
        labels = {"kubernetes.io/metadata.name": namespace}
        return matched and _selector_matches(constraints.get("namespaceSelector") or {}, labels)

    @staticmethod
    def _activation(pod: dict[str, Any], namespace: str, username: str) -> dict[str, Any]:
        return {
            "object": pod,
            "request": {
                "operation": "CREATE",
                "namespace": namespace,
                "userInfo": {"username": username},
            },
        }

    def _conditions_hold(self, policy: dict[str, Any], activation: dict[str, Any]) -> bool:
        return all(
            bool(_evaluate(c["expression"], activation))
            for c in policy["spec"].get("matchConditions", [])
        )

    @staticmethod
    def _variables(policy: dict[str, Any], activation: dict[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for var in policy["spec"].get("variables", []):
            values[var["name"]] = to_json(
                _evaluate(var["expression"], {**activation, "variables": values})
            )
        return values

    def admit(
        self,
        pod: dict[str, Any],
        namespace: str = "default",
        username: str = "alice",
        *,
        groups: tuple[str, ...] = (),
        resource: tuple[str, str] = PODS,
        bindings: tuple[dict[str, Any], ...] = (),
    ) -> Decision:
        """The object as stored, or why not. `resource` (group, plural) says what `pod` is
        (a Job: ("batch", "jobs")); `groups` and `bindings` (RoleBindings besides the plan's)
        matter only with builtins."""
        pod = copy.deepcopy(pod)
        builtins = self.builtins if resource == PODS else None
        if self.builtins is not None:
            refused = self.builtins.rbac_refusal(username, groups, namespace, list(bindings))
            if refused is not None and resource == PODS:
                return Decision(pod, refused.message, refusals=(refused,))
        if builtins is not None and (refused := builtins.mutate(pod)):
            return Decision(pod, refused.message, refusals=(refused,))
        pod, changed_by = self._mutate(pod, namespace, username, resource)
        if builtins is not None and changed_by and (refused := builtins.mutate(pod)):
            return Decision(pod, refused.message, (*changed_by,), (refused,))
        refusals = self._validate(pod, namespace, username, resource)
        if not refusals and builtins is not None:
            refusals = [r for r in [builtins.quota_refusal(pod, namespace)] if r]
        denied = refusals[0].message if refusals else None
        return Decision(pod, denied, tuple(changed_by), tuple(refusals))

    def _mutate(
        self, pod: dict[str, Any], namespace: str, username: str, resource: tuple[str, str]
    ) -> tuple[dict[str, Any], list[str]]:
        changed_by = []
        for policy in self.mutating:
            if not self._matches(policy, namespace, resource):
                continue
            if not self._conditions_hold(policy, self._activation(pod, namespace, username)):
                continue
            before = json.dumps(pod, sort_keys=True)
            for mutation in policy["spec"]["mutations"]:
                activation = self._activation(pod, namespace, username)
                activation["variables"] = self._variables(policy, activation)
                patches = to_json(_evaluate(mutation["jsonPatch"]["expression"], activation))
                pod = apply_patch(pod, patches)
            if json.dumps(pod, sort_keys=True) != before:
                changed_by.append(policy["metadata"]["name"])
        return pod, changed_by

    def _validate(
        self, pod: dict[str, Any], namespace: str, username: str, resource: tuple[str, str]
    ) -> list[Refusal]:
        """The first failing validation of each policy that refuses."""
        refusals = []
        for policy in self.validating:
            if not self._matches(policy, namespace, resource):
                continue
            activation = self._activation(pod, namespace, username)
            if not self._conditions_hold(policy, activation):
                continue
            activation["variables"] = self._variables(policy, activation)
            for validation in policy["spec"]["validations"]:
                if not bool(_evaluate(validation["expression"], activation)):
                    message = validation.get("messageExpression")
                    text = str(_evaluate(message, activation)) if message else validation["message"]
                    refusals.append(Refusal(policy["metadata"]["name"], text))
                    break
        return refusals


def _pod_schema(version: str) -> tuple[dict[str, Any], dict[str, Any]]:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    folder = root / f"v{version}.0-local-strict"
    definitions = json.loads((folder / "_definitions.json").read_text())["$defs"]
    return json.loads((folder / "pod-v1.json").read_text()), definitions


def _resolve(schema: dict[str, Any], definitions: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema or "allOf" in schema:
        if "$ref" in schema:
            schema = definitions[schema["$ref"].rsplit("/", 1)[-1]]
        else:
            schema = schema["allOf"][0]
    if schema.get("type") == "array" or "items" in schema:
        return _resolve(schema["items"], definitions)
    return schema


def _top_level_fields(text: str, start: int) -> list[str]:
    """Field names of the message literal whose `{` is at text[start]."""
    depth, i, fields, quote = 0, start, [], None
    token_start = start + 1
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
            if depth == 0:
                fields.append(text[token_start:i])
                break
        elif ch == "," and depth == 1:
            fields.append(text[token_start:i])
            token_start = i + 1
        i += 1
    return [f.split(":", 1)[0].strip() for f in fields if ":" in f]


def object_type_problems(expression: str, version: str) -> list[str]:
    """Object types or fields in `expression` that a Pod does not have."""
    pod, definitions = _pod_schema(version)
    problems = []
    for match in _OBJECT_TYPE.finditer(expression):
        name = match.group(1)
        if name == "JSONPatch":
            fields = _top_level_fields(expression, match.end() - 1)
            problems += [
                f"JSONPatch has no field {f}"
                for f in fields
                if f not in ("op", "path", "from", "value")
            ]
            continue
        schema = _resolve(pod, definitions)
        for part in name.split(".")[1:]:
            props = schema.get("properties") or {}
            if part not in props:
                problems.append(f"{name}: no field {part}")
                break
            schema = _resolve(props[part], definitions)
        else:
            props = schema.get("properties") or {}
            for field in _top_level_fields(expression, match.end() - 1):
                if field not in props:
                    problems.append(f"{name} has no field {field}")
    return problems
