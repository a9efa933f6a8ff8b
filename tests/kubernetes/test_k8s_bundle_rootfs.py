"""The Debian root file system of the training image (cluster_plan.kubernetes.bundle.rootfs):
the script that installs its packages, and a tree turned into layer entries. The build
itself (debootstrap, apt) runs where the training image is built:
test_k8s_training_image_built.py."""

from __future__ import annotations

import os
from pathlib import Path

from cluster_plan.kubernetes.bundle import rootfs
from cluster_plan.kubernetes.bundle.project import Rootfs


def test_the_packages_script_installs_only_the_packages_and_cleans_up(tmp_path: Path) -> None:
    script = rootfs.packages_script(Rootfs(("python3-torch",)), tmp_path / "t", tmp_path / "d")
    lines = script.splitlines()
    install = [line for line in lines if " install " in line]
    assert len(install) == 1 and install[0].endswith(
        "install --no-install-recommends python3-torch"
    )
    assert install[0].startswith('chroot "$R" /usr/bin/env -i ')  # nothing of our environment
    # nothing starts in the chroot while apt runs: a policy-rc.d that refuses every start
    assert 'exit 101\n\' > "$R/usr/sbin/policy-rc.d"' in script
    unmount = next(i for i, line in enumerate(lines) if line.startswith("umount"))
    assert unmount > lines.index(install[0])
    cleanup = "\n".join(lines[unmount:])  # after the mounts are gone: in the tree only
    for leftover in ("policy-rc.d", "/var/lib/apt/lists/*", "/etc/machine-id", "find /dev"):
        assert leftover in cleanup


def test_the_recipe_names_the_tree_and_changes_with_the_packages() -> None:
    torch = Rootfs(("python3-torch",))
    assert torch.name.startswith("bookworm-") and len(torch.key) == 16
    assert Rootfs(("python3-torch", "python3-numpy")).key != torch.key
    assert (
        Rootfs(("python3-numpy", "python3-torch")).key
        == Rootfs(("python3-torch", "python3-numpy")).key
    )


def test_a_tree_becomes_entries_with_owners_links_and_empty_runtime_folders(
    tmp_path: Path,
) -> None:
    tree = tmp_path / "tree"
    (tree / "usr" / "bin").mkdir(parents=True)
    (tree / "usr" / "bin" / "perl").write_bytes(b"perl")
    os.link(tree / "usr" / "bin" / "perl", tree / "usr" / "bin" / "perl5.36")
    os.symlink("usr/bin", tree / "bin")
    (tree / "var" / "mail").mkdir(parents=True)
    os.chown(tree / "var" / "mail", 0, 8) if os.geteuid() == 0 else None
    for runtime in ("dev", "proc", "tmp"):
        (tree / runtime).mkdir()
    (tree / "dev" / "null").write_bytes(b"")  # what debootstrap leaves: not in an image
    (tree / "tmp" / "junk").write_bytes(b"x")
    entries = {e.path: e for e in rootfs.tree_entries(tree)}
    assert set(entries) == {
        "bin",
        "dev",
        "proc",
        "tmp",
        "usr",
        "usr/bin",
        "usr/bin/perl",
        "usr/bin/perl5.36",
        "var",
        "var/mail",
    }
    assert entries["usr/bin/perl"].kind == "file"
    link = entries["usr/bin/perl5.36"]
    assert (link.kind, link.target) == ("hardlink", "usr/bin/perl")
    assert (entries["bin"].kind, entries["bin"].target) == ("symlink", "usr/bin")
    assert entries["dev"].kind == "dir"
    if os.geteuid() == 0:
        assert entries["var/mail"].gid == 8
