"""The OCI image writer: the same entries give byte-identical layouts, and a layout is one a
registry client reads (oci-layout, index.json, blobs named by their digests, media types)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from cluster_plan.kubernetes.bundle import oci

EPOCH = 1784743658  # 2026-07-22T18:07:38Z


def _entries(source: Path) -> list[oci.Entry]:
    return [
        oci.Entry("usr/local/bin/kube-apiserver", "file", 0o755, source=source / "apiserver"),
        oci.Entry("usr/lib/x86_64-linux-gnu/libc.so.6", "file", 0o644, source=source / "libc"),
        oci.Entry("lib", "symlink", 0o777, target="usr/lib"),
        oci.Entry("usr/sbin/iptables", "symlink", 0o777, target="xtables-nft-multi"),
    ]


def _write(tmp: Path, name: str, source: Path) -> tuple[Path, oci.Written]:
    layout = tmp / name
    written = oci.write_layout(
        layout,
        _entries(source),
        oci.ImageConfig(("/usr/local/bin/kube-apiserver",), ("PATH=/usr/bin",), "65535:65535"),
        reference="registry.k8s.io/kube-apiserver:v1.36.3",
        tag="v1.36.3",
        epoch=EPOCH,
    )
    return layout, written


@pytest.fixture
def source(tmp_path: Path) -> Path:
    folder = tmp_path / "source"
    folder.mkdir()
    (folder / "apiserver").write_bytes(b"\x7fELF" + bytes(range(256)) * 40)
    (folder / "libc").write_bytes(b"libc" * 1000)
    return folder


def _tree(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_the_same_entries_give_byte_identical_layouts(tmp_path: Path, source: Path) -> None:
    first, written = _write(tmp_path, "one", source)
    second, again = _write(tmp_path, "two", source)
    (source / "apiserver").touch()  # a new mtime on the source changes nothing
    third, _ = _write(tmp_path, "three", source)
    assert _tree(first) == _tree(second) == _tree(third)
    assert written == again
    assert written.manifest_digest.startswith("sha256:")


def test_a_different_byte_gives_a_different_digest(tmp_path: Path, source: Path) -> None:
    _, written = _write(tmp_path, "one", source)
    (source / "libc").write_bytes(b"libC" * 1000)
    _, changed = _write(tmp_path, "two", source)
    assert changed.manifest_digest != written.manifest_digest


def test_the_layout_is_valid_and_its_blobs_are_their_digests(tmp_path: Path, source: Path) -> None:
    layout, written = _write(tmp_path, "image", source)
    assert oci.layout_problems(layout) == []
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    index = json.loads((layout / "index.json").read_text())
    assert index["mediaType"] == "application/vnd.oci.image.index.v1+json"
    (descriptor,) = index["manifests"]
    assert descriptor["digest"] == written.manifest_digest
    assert descriptor["annotations"] == {
        "io.containerd.image.name": "registry.k8s.io/kube-apiserver:v1.36.3",
        "org.opencontainers.image.ref.name": "v1.36.3",
    }
    assert descriptor["platform"] == {"architecture": "amd64", "os": "linux"}
    blobs = layout / "blobs" / "sha256"
    for blob in blobs.iterdir():
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    manifest = json.loads((blobs / written.manifest_digest[7:]).read_bytes())
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json"
    assert [x["mediaType"] for x in manifest["layers"]] == [
        "application/vnd.oci.image.layer.v1.tar"
    ]
    config = json.loads((blobs / manifest["config"]["digest"][7:]).read_bytes())
    assert config["config"] == {
        "Entrypoint": ["/usr/local/bin/kube-apiserver"],
        "Env": ["PATH=/usr/bin"],
        "User": "65535:65535",
    }
    assert config["created"] == "2026-07-22T18:07:38Z"
    layer = manifest["layers"][0]["digest"]
    assert config["rootfs"] == {"type": "layers", "diff_ids": [layer]}
    assert written.size == sum(b.stat().st_size for b in blobs.iterdir())


def test_the_layer_is_sorted_owned_by_root_at_one_time_with_every_parent(
    tmp_path: Path, source: Path
) -> None:
    layout, written = _write(tmp_path, "image", source)
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / written.manifest_digest[7:]).read_bytes())
    data = (blobs / manifest["layers"][0]["digest"][7:]).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        assert names == sorted(names)
        assert names == [
            "lib",
            "usr",
            "usr/lib",
            "usr/lib/x86_64-linux-gnu",
            "usr/lib/x86_64-linux-gnu/libc.so.6",
            "usr/local",
            "usr/local/bin",
            "usr/local/bin/kube-apiserver",
            "usr/sbin",
            "usr/sbin/iptables",
        ]
        assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {
            (0, 0, "", "", EPOCH)
        }
        by_name = {m.name: m for m in members}
        assert by_name["lib"].issym() and by_name["lib"].linkname == "usr/lib"
        assert by_name["usr/local/bin"].isdir() and by_name["usr/local/bin"].mode == 0o755
        binary = by_name["usr/local/bin/kube-apiserver"]
        assert binary.mode == 0o755
        extracted = tar.extractfile(binary)
        assert extracted is not None
        assert extracted.read() == (source / "apiserver").read_bytes()


def test_a_damaged_blob_or_a_wrong_media_type_is_found(tmp_path: Path, source: Path) -> None:
    layout, written = _write(tmp_path, "image", source)
    blobs = layout / "blobs" / "sha256"
    manifest = json.loads((blobs / written.manifest_digest[7:]).read_bytes())
    layer = blobs / manifest["layers"][0]["digest"][7:]
    layer.write_bytes(layer.read_bytes()[:-1] + b"x")
    assert [p for p in oci.layout_problems(layout) if "does not have the digest" in p]
    index = json.loads((layout / "index.json").read_text())
    index["manifests"][0]["mediaType"] = "application/vnd.docker.distribution.manifest.v2+json"
    (layout / "index.json").write_text(json.dumps(index))
    assert any("media type" in p for p in oci.layout_problems(layout))
    assert "not an OCI image layout" in oci.layout_problems(tmp_path / "nothing")[0]


def test_two_entries_for_one_path_are_refused(source: Path) -> None:
    twice = [
        oci.Entry("usr/bin/x", "file", source=source / "libc"),
        oci.Entry("/usr/bin/x", "symlink", target="y"),
    ]
    with pytest.raises(ValueError, match="two entries for /usr/bin/x"):
        oci.with_parents(twice)


@pytest.mark.skipif(shutil.which("skopeo") is None, reason="needs skopeo")
def test_skopeo_reads_the_layout(tmp_path: Path, source: Path) -> None:
    layout, written = _write(tmp_path, "image", source)
    result = subprocess.run(
        ["skopeo", "inspect", f"oci:{layout}:v1.36.3"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(result.stdout)["Digest"] == written.manifest_digest


def test_hard_links_and_owners_are_kept_and_a_link_needs_its_file_first(
    tmp_path: Path, source: Path
) -> None:
    entries = [
        oci.Entry("usr/bin/perl", "file", source=source / "libc"),
        oci.Entry("usr/bin/perl5.36", "hardlink", target="/usr/bin/perl"),
        oci.Entry("var/mail", "dir", 0o2775, uid=0, gid=8),
    ]
    out = io.BytesIO()
    oci.write_layer(entries, out, EPOCH)
    with tarfile.open(fileobj=io.BytesIO(out.getvalue())) as tar:
        by_name = {m.name: m for m in tar.getmembers()}
    link = by_name["usr/bin/perl5.36"]
    assert link.islnk() and link.linkname == "usr/bin/perl" and link.size == 0
    assert (by_name["var/mail"].gid, by_name["var/mail"].mode) == (8, 0o2775)
    # the layer is in name order: a link that sorts before its file cannot be written
    backwards = [
        oci.Entry("usr/bin/perl5.36", "file", source=source / "libc"),
        oci.Entry("usr/bin/perl", "hardlink", target="/usr/bin/perl5.36"),
    ]
    with pytest.raises(ValueError, match=r"^/usr/bin/perl: a hard link to /usr/bin/perl5\.36, no"):
        oci.write_layer(backwards, io.BytesIO(), EPOCH)
