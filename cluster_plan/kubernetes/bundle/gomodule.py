"""The Go module that builds a component from the module proxy, as go.mod text.

Building `k8s.io/kubernetes` (or etcd) outside its repository takes a module of our own that
requires it: `go install module@version` refuses modules whose go.mod has `replace`
directives, and both have them. A dependency's `replace` directives are ignored, so each one
that points into the upstream repository (`k8s.io/api => ./staging/src/k8s.io/api`,
`go.etcd.io/etcd/api/v3 => ../api`) becomes a replace by the same module at the version the
upstream release published it under. Kubernetes requires its staging modules at v0.0.0, a
version never published, and publishes them as v0.<minor>.<patch> of its v1.<minor>.<patch>.

The upstream module's `go` and `godebug` lines are carried over: the main module's go
version sets a binary's GODEBUG defaults, so without them the binaries would not behave as
the upstream builds do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from string import Template
from typing import Any

UNPUBLISHED = "v0.0.0"  # what Kubernetes' go.mod requires its staging modules at
WRAPPER_PREFIX = "cluster-plan.local/bundle"
_RELEASE = re.compile(r"^v1\.([0-9]+)\.([0-9]+)$")
_GO_VERSION = re.compile(r"^(?:go)?([0-9]+)\.([0-9]+)(?:\.([0-9]+))?")


class ModuleError(ValueError):
    """An upstream go.mod the wrapper cannot be made from; str() says which and why."""


@dataclass(frozen=True)
class UpstreamModule:
    """What the wrapper needs of one required module's own go.mod."""

    path: str
    version: str
    go: str
    godebug: tuple[tuple[str, str], ...]
    requires: Mapping[str, str]
    local_replaces: tuple[str, ...]  # modules the go.mod replaces by a directory of its repo


def upstream_module(path: str, version: str, gomod: Mapping[str, Any]) -> UpstreamModule:
    """From `go mod edit -json` of the module's go.mod."""
    requires = {str(r["Path"]): str(r["Version"]) for r in gomod.get("Require") or []}
    local = tuple(
        str(r["Old"]["Path"])
        for r in gomod.get("Replace") or []
        if str(r["New"]["Path"]).startswith(("./", "../")) and "Version" not in r["Old"]
    )
    godebug = tuple((str(d["Key"]), str(d["Value"])) for d in gomod.get("GoDebug") or [])
    return UpstreamModule(path, version, str(gomod.get("Go") or "1.21"), godebug, requires, local)


def staging_version(version: str) -> str:
    """The version Kubernetes publishes its staging modules under: v1.36.3 -> v0.36.3."""
    match = _RELEASE.match(version)
    if not match:
        raise ModuleError(f"{version} is not a Kubernetes release like v1.36.3")
    return f"v0.{match.group(1)}.{match.group(2)}"


def replaces(modules: Sequence[UpstreamModule]) -> dict[str, str]:
    """Module path -> version for every in-repository replace of the required modules.

    A module that requires others at UNPUBLISHED (Kubernetes) publishes every module of its
    repository at its own version, so all of them are pinned there, required or not, as in
    its own build. Otherwise a replaced module the go.mod does not require (etcd's
    FORBIDDEN_DEPENDENCY guards) is left out: nothing can pull it in."""
    chosen: dict[str, str] = {}
    for module in modules:
        staging = UNPUBLISHED in module.requires.values()
        for path in module.local_replaces:
            required = module.requires.get(path)
            if required is None and not staging:
                continue
            version = (
                staging_version(module.version)
                if required in (None, UNPUBLISHED)
                else str(required)
            )
            if chosen.setdefault(path, version) != version:
                raise ModuleError(
                    f"{path} is replaced at {chosen[path]} and at {version} by the modules "
                    f"of one component"
                )
    return dict(sorted(chosen.items()))


def go_version_tuple(version: str) -> tuple[int, int, int]:
    match = _GO_VERSION.match(version)
    if not match:
        raise ModuleError(f"{version!r} is not a Go version")
    return (int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


def wrapper_go(modules: Sequence[UpstreamModule]) -> str:
    """The newest `go` line of the required modules (at least 1.24, for `tool` lines)."""
    versions = [m.go for m in modules] + ["1.24"]
    return max(versions, key=go_version_tuple)


def wrapper_godebug(modules: Sequence[UpstreamModule]) -> tuple[tuple[str, str], ...]:
    chosen: dict[str, str] = {}
    for module in modules:
        for key, value in module.godebug:
            if chosen.setdefault(key, value) != value:
                raise ModuleError(
                    f"{module.path} sets godebug {key}={value}, another {chosen[key]}"
                )
    return tuple(sorted(chosen.items()))


def _block(keyword: str, lines: Sequence[str]) -> str:
    if not lines:
        return ""
    body = "".join(f"\t{line}\n" for line in lines)
    return f"{keyword} (\n{body})\n"


def wrapper_gomod(component: str, modules: Sequence[UpstreamModule], tools: Sequence[str]) -> str:
    """go.mod of the module that builds ``component``: it requires ``modules``, replaces what
    they replace in their repositories, and names the main packages as tools so that `go mod
    tidy` keeps everything they import."""
    template = Template(
        resources.files("cluster_plan").joinpath("templates/go-wrapper.mod.tmpl").read_text()
    )
    debug = wrapper_godebug(modules)
    return template.substitute(
        component=component,
        module=f"{WRAPPER_PREFIX}/{component}",
        go=wrapper_go(modules),
        godebug=("\n" + _block("godebug", [f"{k}={v}" for k, v in debug])) if debug else "",
        requires=_block("require", [f"{m.path} {m.version}" for m in modules]),
        replaces=_block("replace", [f"{p} => {p} {v}" for p, v in replaces(modules).items()]),
        tools=_block("tool", list(tools)),
    )
