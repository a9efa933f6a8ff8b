"""The bundle's manifest: every artifact with its version, sources, sha256 and size, as JSON
(schemas/k8s-bundle-manifest.schema.json) and as text for people.

A built bundle keeps its manifest.json: the same for the same key on any machine (no times,
no paths). `cluster-plan k8s bundle` prints it with what belongs to the invocation added:
the plan, where the bundle is, the mirror references and what the plan needs that the
bundle does not carry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cluster_plan.kubernetes.bundle.artifacts import BundleSpec, Image
from cluster_plan.kubernetes.bundle.project import program_source

SCHEMA_VERSION = 1
Built = Mapping[str, Mapping[str, Any]]  # artifact name -> {"sha256", "size"}


def _binary_entries(spec: BundleSpec, built: Built | None) -> list[dict[str, Any]]:
    out = []
    for binary in spec.binaries:
        made = (built or {}).get(binary.name) or {}
        out.append(
            {
                "name": binary.name,
                "kind": "binary",
                "version": binary.version,
                "sources": [binary.source],
                "path": binary.path,
                "sha256": made.get("sha256"),
                "size": made.get("size"),
            }
        )
    return out


def image_sources(spec: BundleSpec, image: Image, packages: Mapping[str, str]) -> list[str]:
    """The modules of the image's binaries, the Debian packages of its other files, and the
    project's program in it."""
    sources = {spec.binary(binary).source: None for _, binary in image.files}
    debian = [f"{name}={version}" for name, version in sorted(packages.items())]
    return [*sources, *debian, *([program_source()] if image.program else [])]


def _image_entries(
    spec: BundleSpec, built: Built | None, packages: Mapping[str, Mapping[str, str]]
) -> list[dict[str, Any]]:
    out = []
    for image in spec.images:
        made = (built or {}).get(f"image:{image.name}") or {}
        out.append(
            {
                "name": image.name,
                "kind": "image",
                "version": image.version,
                "sources": image_sources(spec, image, packages.get(image.name, {})),
                "path": f"images/{image.name}",
                "sha256": made.get("sha256"),
                "size": made.get("size"),
                "reference": image.reference,
                "mirror_path": image.mirror_path,
            }
        )
    return out


def manifest(
    spec: BundleSpec,
    *,
    key: str | None,
    toolchain: Mapping[str, Any] | None,
    packages: Mapping[str, Mapping[str, str]],
    built: Built | None = None,
    module_sums: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The manifest; ``built`` holds the digests and sizes once the bundle exists
    (images under "image:<name>", their sha256 the image manifest's digest)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kubernetes": spec.kubernetes,
        "key": key,
        "built": built is not None,
        "toolchain": dict(toolchain) if toolchain else None,
        "artifacts": _binary_entries(spec, built) + _image_entries(spec, built, packages),
        "module_sums": dict(sorted((module_sums or {}).items())),
    }


def with_invocation(
    document: Mapping[str, Any],
    *,
    plan: str,
    plan_version: str,
    directory: str | None,
    image_repository: str | None,
    not_included: Sequence[Mapping[str, str]],
) -> dict[str, Any]:
    """The manifest as the command prints it."""
    artifacts = []
    for artifact in document["artifacts"]:
        entry = dict(artifact)
        if entry["kind"] == "image":
            entry["mirror_reference"] = (
                f"{image_repository.rstrip('/')}/{entry['mirror_path']}"
                if image_repository
                else None
            )
        artifacts.append(entry)
    return {
        **document,
        "plan": plan,
        "plan_version": plan_version,
        "directory": directory,
        "artifacts": artifacts,
        "not_included": [dict(n) for n in not_included],
    }


def _size(size: int | None) -> str:
    return f"{size / 2**20:.1f} MiB" if size is not None else "-"


def text(document: Mapping[str, Any]) -> str:
    """The manifest for people: one artifact per line, its sources and digest below it."""
    lines = [f"Kubernetes {document['kubernetes']} offline bundle"]
    if document.get("plan"):
        lines[0] += f" for {document['plan']} (version {document['plan_version']!r})"
    where = document.get("directory")
    lines.append(f"  {where}" if document["built"] else "  not built yet")
    if document.get("toolchain"):
        chain = document["toolchain"]
        lines.append(
            f"  key {document['key']}: {chain['go']} {chain['platform']}, gcc {chain['gcc']}"
        )
    artifacts = document["artifacts"]
    # columns as wide as their longest entry (the project's images have long tags)
    titled = [(a, a.get("reference") or a["name"]) for a in artifacts]
    width = max([48, *(len(title) for _, title in titled)])
    version_width = max([10, *(len(a["version"]) for a in artifacts)])
    for artifact, title in titled:
        size = _size(artifact["size"])
        version = artifact["version"]
        lines.append(
            f"{artifact['kind']:<6}  {title:<{width}} {version:<{version_width}} {size:>10}"
        )
        lines.append(f"        from {', '.join(artifact['sources'])}")
        if artifact["sha256"]:
            lines.append(f"        sha256:{artifact['sha256']}")
        if artifact.get("mirror_reference"):
            lines.append(f"        mirror {artifact['mirror_reference']}")
    missing = document.get("not_included") or []
    if missing:
        lines.append("not in the bundle (the plan needs them; bring them to the mirror yourself):")
        lines += [f"  {n['reference']}  ({n['where']}): {n['reason']}" for n in missing]
    return "\n".join(lines)
