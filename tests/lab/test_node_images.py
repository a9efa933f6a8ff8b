"""Node images (cluster_plan/lab/images.py) without root: which layers each host boots on,
their keys, the build script, and the record of a node's image."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from cluster_plan.api import load_expanded
from cluster_plan.lab import images, lifecycle, names, node, rootfs
from cluster_plan.lab.names import LabError, LabNames
from cluster_plan.lab.role_packages import HostPackages, host_packages, load_role_vars

REPO = Path(__file__).resolve().parents[2]
PLAN = REPO / "inventory" / "lab" / "cluster.yml"
BASE_KEY = "0123456789abcdef"


@pytest.fixture(scope="module")
def expanded() -> dict[str, Any]:
    return load_expanded(str(PLAN))


@pytest.fixture(scope="module")
def packages(expanded: dict[str, Any]) -> dict[str, HostPackages]:
    return host_packages(expanded, load_role_vars())


def layers_of(plan: dict[str, Any], packages: dict[str, HostPackages]) -> dict[str, Any]:
    return images.node_layers(plan, packages, BASE_KEY)


def test_the_lab_plan_boots_its_nodes_on_images(expanded: dict[str, Any]) -> None:
    assert expanded["lab"]["image"] == "packages" and expanded["lab"]["bare"] == []


def test_hosts_share_a_layer_of_what_all_get_and_one_per_package_set(
    expanded: dict[str, Any], packages: dict[str, HostPackages]
) -> None:
    layers = layers_of(expanded, packages)
    assert all(len(chain) == 2 for chain in layers.values())
    shared = {chain[1] for chain in layers.values()}
    assert len(shared) == 1
    common = shared.pop()
    assert common.below is None
    assert {"chrony", "nftables"} <= common.packages.recommends
    assert {"ceph-common", "borgbackup"} <= common.packages.plain
    # head01, the two GPU nodes, the other compute nodes, the monitors, osd01
    tops = {host: chain[0] for host, chain in layers.items()}
    assert len(set(tops.values())) == 5
    assert tops["gpu01"] == tops["gpu02"] and tops["cpu01"] == tops["infer01"]
    assert tops["stor01"] == tops["stor02"] == tops["stor03"]
    for host, top in tops.items():  # each layer holds what its hosts get beyond the shared one
        assert top.below == common
        assert top.packages.names | common.packages.names == packages[host].names
        assert not top.packages.names & common.packages.names


def test_bare_hosts_boot_the_base_alone(
    expanded: dict[str, Any], packages: dict[str, HostPackages]
) -> None:
    plan = copy.deepcopy(expanded)
    plan["lab"]["bare"] = ["cpu01"]
    layers = layers_of(plan, packages)
    assert layers["cpu01"] == ()
    assert layers["infer01"] and layers["gpu01"]
    plan["lab"]["image"] = "bare"
    assert set(layers_of(plan, packages).values()) == {()}
    plan["lab"] = None  # a plan without a lab section
    assert set(layers_of(plan, packages).values()) == {()}


def test_a_bare_host_that_is_not_in_the_plan_is_refused(
    expanded: dict[str, Any], packages: dict[str, HostPackages]
) -> None:
    plan = copy.deepcopy(expanded)
    plan["lab"]["bare"] = ["cpu01", "cpu09"]
    with pytest.raises(LabError, match=r"lab.bare\[1\]: cpu09 is not a host of the plan"):
        layers_of(plan, packages)


def test_a_layer_key_follows_its_packages_the_layer_below_and_the_base() -> None:
    one = HostPackages(frozenset({"chrony"}), frozenset({"ceph-common"}))
    layer = images.Layer(one, None, BASE_KEY)
    assert layer.key == images.Layer(copy.deepcopy(one), None, BASE_KEY).key
    others = [
        images.Layer(HostPackages(frozenset({"chrony", "sudo"}), one.plain), None, BASE_KEY),
        # the same names, one installed without its Recommends
        images.Layer(HostPackages(frozenset(), frozenset({"chrony", "ceph-common"})), None,
                     BASE_KEY),
        images.Layer(one, None, "fedcba9876543210"),
        images.Layer(one, images.Layer(HostPackages(frozenset({"sudo"})), None, BASE_KEY),
                     BASE_KEY),
    ]  # fmt: skip
    keys = {layer.key, *(other.key for other in others)}
    assert len(keys) == 1 + len(others)
    assert layer.name == f"layer-bookworm-{layer.key}"


def test_the_base_image_key_changes_every_layer_above_it(
    expanded: dict[str, Any], packages: dict[str, HostPackages]
) -> None:
    first = images.node_layers(expanded, packages, rootfs.cache_key())
    again = images.node_layers(expanded, packages, rootfs.cache_key())
    other = images.node_layers(expanded, packages, "another-base-key")
    assert {c[0].key for c in first.values()} == {c[0].key for c in again.values()}
    assert not {c[0].key for c in first.values()} & {c[0].key for c in other.values()}


def test_lowerdirs_put_the_top_layer_first_and_the_base_last(tmp_path: Path) -> None:
    common = images.Layer(HostPackages(frozenset({"chrony"})), None, BASE_KEY)
    top = images.Layer(HostPackages(frozenset({"slurmd"})), common, BASE_KEY)
    base = tmp_path / "rootfs"
    assert images.lowerdirs(top.chain(), base, tmp_path) == [
        tmp_path / top.name / "tree",
        tmp_path / common.name / "tree",
        base,
    ]
    # a node's boot mounts them in that order
    script = node.boot_script(
        LabNames("unit"), "cpu01", {"hostname": "cpu01", "accelerators": None, "disks": []},  # type: ignore[typeddict-item]
        images.lowerdirs(top.chain(), base, tmp_path), {},
    )  # fmt: skip
    expected = f"lowerdir={tmp_path}/{top.name}/tree:{tmp_path}/{common.name}/tree:{base},"
    assert expected in script


def test_a_complete_layer_is_reused_and_never_rebuilt(tmp_path: Path) -> None:
    layer = images.Layer(HostPackages(frozenset({"chrony"})), None, BASE_KEY)
    (tmp_path / layer.name / "tree").mkdir(parents=True)
    (tmp_path / layer.name / ".complete").write_text("built\n")
    # a half-built one beside it never counts: only the rename makes a layer complete
    (tmp_path / f"{layer.name}.partial" / "tree").mkdir(parents=True)
    lower = images.ensure((layer,), tmp_path / "base", tmp_path)
    assert lower == [tmp_path / layer.name / "tree", tmp_path / "base"]
    assert not (tmp_path / "images.lock").exists()  # nothing was built, no lock taken


def test_the_build_script_installs_in_a_chroot_and_starts_nothing(tmp_path: Path) -> None:
    common = images.Layer(HostPackages(frozenset({"chrony"})), None, BASE_KEY)
    layer = images.Layer(
        HostPackages(frozenset({"slurmd"}), frozenset({"ceph-osd", "udev"})), common, BASE_KEY
    )
    lower = images.lowerdirs(common.chain(), tmp_path / "base", tmp_path)
    script = images.build_script(layer, lower, tmp_path / "w", tmp_path / "archives")
    assert f"lowerdir={tmp_path}/{common.name}/tree:{tmp_path}/base,upperdir={tmp_path}/w/tree" in (
        script
    )
    assert "redirect_dir=off,index=off,metacopy=off" in script  # a tree that stands alone
    assert 'policy-rc.d"' in script and "exit 101" in script
    assert "apt-get -q -y -o Dpkg::Use-Pty=0 install slurmd\n" in script
    assert "install --no-install-recommends ceph-osd udev\n" in script
    assert 'mount -t tmpfs -o mode=755,size=8m dev "$R/dev"' in script
    assert "/dev " not in script.replace('"$R/dev', "")  # never the host's /dev
    # the host's resolver is lent, never written into the layer; the policy goes at the end
    assert 'mount --bind /etc/resolv.conf "$R/etc/resolv.conf"' in script
    assert script.index("install slurmd") < script.index("rm -f /usr/sbin/policy-rc.d")
    assert "rm -f /var/lib/dbus/machine-id /etc/ssh/ssh_host_*" in script
    # a unit that fails at a node's boot is left disabled, where its package put it
    assert (
        'if [ -e "$R/lib/systemd/system/prometheus.service" ]; then chroot "$R" systemctl '
        "disable prometheus.service; fi"
    ) in script


def test_a_node_keeps_the_image_it_booted_on(tmp_path: Path) -> None:
    node_dir = tmp_path / "nodes" / "cpu01"
    tree, base = tmp_path / "layer-bookworm-x" / "tree", tmp_path / "rootfs"
    assert images.recorded(node_dir) is None
    images.record(node_dir, [tree, base])
    assert images.recorded(node_dir) is None  # its layers are not in the cache
    tree.mkdir(parents=True)
    base.mkdir()
    assert images.recorded(node_dir) == [tree, base]
    assert images.describe([tree, base]) == "layer-bookworm-x"
    assert images.describe([base]) == "bare"
    assert images.describe(None) == "-"


def test_a_host_joining_a_running_lab_boots_the_bare_base(
    expanded: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What `cluster-plan change` adds converges from the bare base (the roles install its
    packages); a node that booted before keeps its image; the others get the plan's."""
    monkeypatch.setattr(names, "VAR_ROOT", tmp_path / "var")
    built: list[tuple[str, ...]] = []

    def ensure(layers: Any, base: Path, **_kwargs: Any) -> list[Path]:
        built.append(tuple(layer.name for layer in layers))
        return images.lowerdirs(layers, base)

    monkeypatch.setattr(images, "ensure", ensure)
    lab = LabNames("unit")
    base = tmp_path / "rootfs"
    earlier = [tmp_path / "an-image", base]
    for path in earlier:
        path.mkdir()
    images.record(lab.node_dir("stor01"), earlier)
    found = lifecycle.node_images(
        lab, expanded, ["cpu01", "gpu01", "stor01"], {"cpu01"}, base, log=None
    )
    assert found["cpu01"] == [base]
    assert found["stor01"] == earlier
    assert len(found["gpu01"]) == 3 and found["gpu01"][-1] == base
    assert len(built) == 2  # cpu01 (nothing to build) and gpu01; stor01 is not looked at
    # the choice is written down at once: a `lab up` stopped before cpu01 booted, run again
    # when cpu01 no longer counts as joining, still boots it bare
    again = lifecycle.node_images(lab, expanded, ["cpu01"], set(), base, log=None)
    assert again["cpu01"] == [base]


def test_lab_up_boots_a_bare_lab_of_a_plan_with_images_when_asked(
    expanded: dict[str, Any], packages: dict[str, HostPackages]
) -> None:
    args = command_parser().parse_args(["lab", "up", str(PLAN), "--image", "bare"])
    assert args.image == "bare"
    bare = images.with_image(expanded, args.image)
    assert set(layers_of(bare, packages).values()) == {()}
    assert expanded["lab"]["image"] == "packages"  # the plan itself is left as it is
    assert bare["lab"]["rate_scale"] == expanded["lab"]["rate_scale"]
    assert images.with_image({**expanded, "lab": None}, "bare")["lab"] is None
    assert command_parser().parse_args(["lab", "up", str(PLAN)]).image is None


def command_parser() -> Any:
    import argparse

    from cluster_plan.lab import command

    parser = argparse.ArgumentParser()
    command.register(parser.add_subparsers(dest="command"))
    return parser
