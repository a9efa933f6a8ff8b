"""`cluster-plan k8s bundle PLAN [--list] [--cache DIR] [-o DIR] [--image-repository REPO]`:
the plan's Kubernetes as an offline bundle. Exit 0 with the manifest; 1 when the plan cannot
be a Kubernetes cluster or has a version the bundle does not pin (findings at the plan's
line), or the build failed; 2 when the plan cannot be read, Go or gcc is missing, a module
is not served or the cache cannot be written."""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from cluster_plan.cli.policy import Exit, UsageError
from cluster_plan.kubernetes.bundle import manifest as manifests
from cluster_plan.kubernetes.bundle.artifacts import BundleSpec, bundle_spec
from cluster_plan.kubernetes.bundle.builder import BundleError, ensure, find, prepare
from cluster_plan.kubernetes.bundle.cache import ENVIRONMENT, cache_root
from cluster_plan.kubernetes.bundle.project import BundleNeeds
from cluster_plan.kubernetes.mirror import plan_mirror
from cluster_plan.kubernetes.versions import UnsupportedVersion
from cluster_plan.plan.findings import Finding, PlanError

VERSION_PATH = ("scheduler", "kubernetes", "version")
CALICO = {
    "reference": "Calico's release manifest and its images",
    "where": "roles/kubernetes",
    "reason": "downloaded from GitHub by the role, images on docker.io; not built here",
}


def register(k8s_commands: Any) -> None:
    bundle = k8s_commands.add_parser(
        "bundle",
        help="build (or list) every binary and image the plan's Kubernetes needs offline",
        description="Build the plan's Kubernetes from the sources the Go module proxy serves "
        "into a cache on this machine and print the manifest: every binary and image with its "
        "version, sources, sha256 and size. A cold build takes many minutes; a cached one is "
        "verified in seconds. See docs/kubernetes.md, 'The offline bundle'.",
    )
    bundle.add_argument(
        "plan", metavar="PLAN", help="a cluster plan with scheduler.type kubernetes"
    )
    bundle.add_argument("--list", action="store_true", help="print the manifest, build nothing")
    bundle.add_argument(
        "--cache",
        type=Path,
        metavar="DIR",
        help=f"the cache's root (default: ${ENVIRONMENT}, else /var/cache/cluster-plan)",
    )
    bundle.add_argument("-o", "--output", type=Path, metavar="DIR", help="copy the bundle here")
    bundle.add_argument(
        "--image-repository",
        metavar="REPO",
        help="the mirror's repository kubeadm is given (imageRepository): print where each "
        "image goes there",
    )
    bundle.add_argument("--format", choices=["text", "json"], default="text")
    bundle.set_defaults(func=bundle_command)


def _images_in(document: Any) -> Iterator[str]:
    if isinstance(document, dict):
        for key, value in document.items():
            if key == "image" and isinstance(value, str):
                yield value
            else:
                yield from _images_in(value)
    elif isinstance(document, list):
        for item in document:
            yield from _images_in(item)


def not_included(rendering: Any, spec: BundleSpec) -> list[dict[str, str]]:
    """Images the rendered objects name that the bundle does not build, and Calico."""
    built = {image.reference for image in spec.images}
    mirror = plan_mirror(rendering.plan)
    if mirror is not None:  # the objects name the mirror's copies of the bundle's images
        built |= {image.mirror_reference(mirror.registry) for image in spec.images}
    places: dict[str, list[Any]] = {f"objects/{s}.yaml": o for s, o in rendering.objects.items()}
    places.update({f"examples/{s}.yaml": o for s, o in rendering.examples.items()})
    places.update({f"static-pods/{n}/": p for n, p in rendering.static_pods.items()})
    found: dict[str, str] = {}
    for where, documents in sorted(places.items()):
        for image in _images_in(documents):
            if image not in built:
                found.setdefault(image, where)
    entries = [
        {"reference": image, "where": where, "reason": "not built by the bundle"}
        for image, where in sorted(found.items())
    ]
    # a plan with host-routes runs the bundle's CNI plugins: no Calico to name
    return [*entries, *([dict(CALICO)] if rendering.plan.cni == "calico" else [])]


def plan_needs(plan: Any) -> BundleNeeds:
    """What the plan needs of the bundle besides its release: the device plugin where it
    serves a class, the training image where the training job runs the bundle's."""
    from cluster_plan.kubernetes.devices import bundle_needs
    from cluster_plan.kubernetes.training import bundle_training

    return replace(bundle_needs(plan), training=bundle_training(plan))


def _spec(rendering: Any, result: Any) -> BundleSpec:
    version = str(rendering.plan.expanded["scheduler"]["kubernetes"]["version"])
    try:
        return bundle_spec(version, plan_needs(rendering.plan))
    except UnsupportedVersion as exc:
        finding = Finding(
            "bundle-version",
            str(exc),
            VERSION_PATH,
            hint="the bundle builds the patch release pinned for each minor",
        )
        raise PlanError([result.doc.place(finding)], result.doc.source_lines) from None


def _listing(spec: BundleSpec, root: Path, note: Any) -> tuple[dict[str, Any], str | None]:
    try:
        prepared = prepare(spec, root)
    except BundleError as exc:
        note(f"cluster-plan k8s bundle: no key, no digests: {exc}")
        return manifests.manifest(spec, key=None, toolchain=None, packages={}), None
    found = find(prepared)
    if found is not None:
        return found.manifest, str(found.directory)
    document = manifests.manifest(
        spec, key=prepared.key, toolchain=prepared.toolchain.recipe(), packages=prepared.packages
    )
    return document, None


def _copy(directory: Path, output: Path, note: Any) -> None:
    if output.exists() and any(output.iterdir()):
        raise UsageError(f"{output}: not empty; -o wants a new or empty directory")
    shutil.copytree(directory, output, dirs_exist_ok=True)
    note(f"copied {directory} to {output}")


def bundle_command(args: argparse.Namespace) -> Exit:
    from cluster_plan.api import expand_validation
    from cluster_plan.kubernetes.renderer import render
    from cluster_plan.plan.validate import validate_file

    reporter = args.reporter
    result = validate_file(args.plan)
    expanded = expand_validation(result)
    try:
        rendering = render(expanded)
    except PlanError as exc:  # point the renderer's findings at the plan's lines
        placed = [result.doc.place(f) if f.file is None else f for f in exc.findings]
        raise PlanError(placed, result.doc.source_lines) from None
    spec = _spec(rendering, result)
    root = cache_root(args.cache)
    try:
        if args.list:
            document, directory = _listing(spec, root, reporter.note)
        else:
            bundle = ensure(prepare(spec, root), reporter.note)
            document, directory = bundle.manifest, str(bundle.directory)
    except BundleError as exc:
        raise UsageError(str(exc)) if exc.usage else _failed(str(exc)) from None
    if args.output is not None:
        if directory is None:
            raise UsageError("-o copies a built bundle; without --list it is built first")
        _copy(Path(directory), args.output, reporter.note)
    shown = manifests.with_invocation(
        document,
        plan=str(args.plan),
        plan_version=spec.plan_version,
        directory=directory,
        image_repository=args.image_repository,
        not_included=not_included(rendering, spec),
    )
    reporter.result(shown, lambda: manifests.text(shown))
    return Exit.OK


def _failed(message: str) -> Exception:
    from cluster_plan.cli.policy import CheckFailed

    return CheckFailed(message)
