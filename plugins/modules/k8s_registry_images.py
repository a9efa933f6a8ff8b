#!/usr/bin/python
"""Serve OCI image layouts from a read-only docker-registry (distribution 2.x) by writing
the registry's own storage: no push, so the registry needs no write access at all, and the
images keep their bytes and digests exactly (nothing is recompressed on the way).

The storage layout is distribution's filesystem driver's (registry/storage/paths.go):

    ROOT/docker/registry/v2/blobs/sha256/<2 hex>/<hex>/data      every blob, by digest
    .../repositories/<name>/_layers/sha256/<hex>/link            the repository's blobs
    .../repositories/<name>/_manifests/revisions/sha256/<hex>/link
    .../repositories/<name>/_manifests/tags/<tag>/current/link   the tag's manifest
    .../repositories/<name>/_manifests/tags/<tag>/index/sha256/<hex>/link

each `link` holding the digest (`sha256:<hex>`). Blob data are hard links to the layout's
blobs where both are on one file system (copies otherwise).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from typing import Any

from ansible.module_utils.basic import AnsibleModule

DOCUMENTATION = r"""
module: k8s_registry_images
short_description: Serve OCI image layouts from a read-only docker-registry's storage
description:
  - Writes the storage of a docker-registry (distribution 2.x, filesystem driver) so that it
    serves each image of an OCI image layout under the given repositories and tags, with the
    layout's manifest digest. The registry can then run read-only.
  - Checks each layout first. Its index must name the digest, the manifest's bytes must hash
    to it, and every blob the manifest names must be there with its size.
  - Idempotent; changed when a blob, link or tag was written; check mode writes nothing.
options:
  root:
    description: The registry's storage C(rootdirectory).
    type: path
    required: true
  images:
    description: The images.
    type: list
    elements: dict
    required: true
    suboptions:
      layout: {description: An OCI image layout directory., type: path, required: true}
      digest: {description: Its manifest's digest (sha256:...)., type: str, required: true}
      places:
        description: Where the registry serves it, each C({repository, tag}).
        type: list
        elements: dict
        required: true
"""

EXAMPLES = r"""
- name: Serve the bundle's pause image
  cluster_plan.cluster.k8s_registry_images:
    root: /srv/cluster-plan/k8s-mirror/registry
    images:
      - layout: /srv/cluster-plan/k8s-mirror/images/1.36.3-16085c2b7555d761/pause
        digest: sha256:4edfaefd524c511e043167fbd60e83b6177947379762a23994ce402820f8729c
        places: [{repository: pause, tag: "3.10.2"}]
"""

RETURN = r"""
written:
  description: The storage paths written (relative to the root).
  type: list
  elements: str
  returned: always
"""


class LayoutError(Exception):
    pass


def _blob(layout: str, digest: str) -> str:
    algorithm, _, hexa = digest.partition(":")
    if algorithm != "sha256" or len(hexa) != 64:
        raise LayoutError(f"{layout}: {digest!r} is not a sha256 digest")
    return os.path.join(layout, "blobs", "sha256", hexa)


def read_layout(layout: str, digest: str) -> list[tuple[str, int]]:
    """(digest, size) of every blob of the image, its manifest first."""
    with open(os.path.join(layout, "index.json"), encoding="utf-8") as handle:
        index = json.load(handle)
    if digest not in [m.get("digest") for m in index.get("manifests") or []]:
        raise LayoutError(f"{layout}: its index does not name {digest}")
    with open(_blob(layout, digest), "rb") as handle:
        raw = handle.read()
    if "sha256:" + hashlib.sha256(raw).hexdigest() != digest:
        raise LayoutError(f"{layout}: the manifest's bytes do not hash to {digest}")
    manifest = json.loads(raw)
    blobs = [(digest, len(raw))]
    for descriptor in [manifest["config"], *(manifest.get("layers") or [])]:
        path = _blob(layout, descriptor["digest"])
        if not os.path.isfile(path) or os.path.getsize(path) != descriptor["size"]:
            raise LayoutError(f"{layout}: blob {descriptor['digest']} missing or not its size")
        blobs.append((descriptor["digest"], int(descriptor["size"])))
    return blobs


class Storage:
    def __init__(self, root: str, check_mode: bool) -> None:
        self.base = os.path.join(root, "docker", "registry", "v2")
        self.check_mode = check_mode
        self.written: list[str] = []

    def _note(self, path: str) -> bool:
        self.written.append(os.path.relpath(path, self.base))
        return not self.check_mode

    def blob(self, layout: str, digest: str, size: int) -> None:
        hexa = digest.split(":", 1)[1]
        data = os.path.join(self.base, "blobs", "sha256", hexa[:2], hexa, "data")
        if os.path.isfile(data) and os.path.getsize(data) == size:
            return
        if not self._note(data):
            return
        os.makedirs(os.path.dirname(data), mode=0o755, exist_ok=True)
        staged = data + ".tmp"
        try:
            os.link(_blob(layout, digest), staged)
        except OSError:  # another file system: copy
            shutil.copyfile(_blob(layout, digest), staged)
            os.chmod(staged, 0o644)
        os.replace(staged, data)

    def link(self, *parts: str, digest: str) -> None:
        path = os.path.join(self.base, "repositories", *parts, "link")
        try:
            with open(path, encoding="ascii") as handle:
                if handle.read() == digest:
                    return
        except OSError:
            pass
        if not self._note(path):
            return
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path + ".tmp", "w", encoding="ascii") as handle:
            handle.write(digest)
        os.chmod(path + ".tmp", 0o644)
        os.replace(path + ".tmp", path)


def serve(storage: Storage, image: dict[str, Any]) -> None:
    digest = image["digest"]
    blobs = read_layout(image["layout"], digest)
    for blob_digest, size in blobs:
        storage.blob(image["layout"], blob_digest, size)
    hexa = digest.split(":", 1)[1]
    for place in image["places"]:
        repository, tag = str(place["repository"]), str(place["tag"])
        for blob_digest, _ in blobs[1:]:
            storage.link(
                repository, "_layers", "sha256", blob_digest.split(":")[1], digest=blob_digest
            )
        storage.link(repository, "_manifests", "revisions", "sha256", hexa, digest=digest)
        storage.link(repository, "_manifests", "tags", tag, "index", "sha256", hexa, digest=digest)
        storage.link(repository, "_manifests", "tags", tag, "current", digest=digest)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "required": True},
            "images": {"type": "list", "elements": "dict", "required": True},
        },
        supports_check_mode=True,
    )
    storage = Storage(module.params["root"], module.check_mode)
    try:
        for image in module.params["images"]:
            serve(storage, image)
    except (LayoutError, OSError, KeyError, ValueError) as exc:
        module.fail_json(msg=f"cannot serve the images: {exc}", written=storage.written)
    module.exit_json(changed=bool(storage.written), written=storage.written)


if __name__ == "__main__":
    main()
