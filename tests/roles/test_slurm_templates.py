"""slurm.conf, gres.conf, topology.conf and cgroup.conf as rendered for the lab plan."""

from __future__ import annotations

import re

import pytest
from role_render import render


def lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln and not ln.startswith("#")]


@pytest.fixture
def slurm_conf(lab_expanded) -> str:
    return render("slurm", "slurm.conf.j2", lab_expanded, "head01")


def test_slurm_conf_names_the_controller_and_the_plugins(slurm_conf, lab_expanded):
    head = lab_expanded["hosts"]["head01"]["address"]
    body = lines(slurm_conf)
    assert f"SlurmctldHost=head01({head})" in body
    assert "ClusterName=lab" in body
    for setting in (
        "ProctrackType=proctrack/cgroup",
        "TaskPlugin=task/cgroup,task/affinity",
        "TopologyPlugin=topology/tree",
        "JobSubmitPlugins=lua",
        "GresTypes=gpu,tpu",
        "SelectType=select/cons_tres",
        "AccountingStorageType=accounting_storage/slurmdbd",
    ):
        assert setting in body


def test_slurm_conf_takes_its_timeouts_from_the_plan(slurm_conf, lab_expanded):
    settings = lab_expanded["scheduler"]["slurm"]
    body = lines(slurm_conf)
    assert f"SlurmctldTimeout={settings['controller_timeout_s']}" in body
    assert f"SlurmdTimeout={settings['node_timeout_s']}" in body
    # the lab plan raises it from Slurm's 10 s: the test sees the plan's value, not a default
    assert settings["message_timeout_s"] != 10
    assert f"MessageTimeout={settings['message_timeout_s']}" in body


def test_slurm_conf_has_a_node_line_per_compute_node(slurm_conf, lab_expanded):
    nodes = [ln for ln in lines(slurm_conf) if ln.startswith("NodeName=")]
    assert [ln.split()[0] for ln in nodes] == [
        f"NodeName={n}" for n in lab_expanded["groups"]["slurm_compute"]
    ]
    gpu01 = next(ln for ln in nodes if ln.startswith("NodeName=gpu01 "))
    assert "Gres=gpu:h100:2" in gpu01
    assert "Features=pool_gpu,h100,rack_r1,dataset_imagenet" in gpu01
    assert not any(ln.startswith("NodeName=head01") for ln in nodes)


def test_slurm_conf_partitions_one_per_class_plus_hidden_admin(slurm_conf):
    parts = {
        m.group(1): ln for ln in lines(slurm_conf) if (m := re.match(r"PartitionName=(\S+)", ln))
    }
    assert set(parts) == {"training", "inference", "general", "all"}
    assert "Nodes=gpu01,gpu02" in parts["training"]
    assert "Default=YES" in parts["general"]
    assert "Default=NO" in parts["training"]
    assert "Hidden=YES" in parts["all"]
    assert "AllowGroups=root" in parts["all"]


def test_accounting_points_at_slurmdbd_when_the_plan_asks(lab_expanded):
    text = render("slurm", "slurm.conf.j2", lab_expanded, "head01")
    assert "AccountingStorageType=accounting_storage/slurmdbd" in lines(text)
    assert "AccountingStorageHost=head01" in lines(text)
    lab_expanded["scheduler"]["slurm"]["accounting"] = False
    lab_expanded["teams"] = {}
    text = render("slurm", "slurm.conf.j2", lab_expanded, "head01")
    assert "AccountingStorageType=accounting_storage/none" in lines(text)
    assert not [ln for ln in lines(text) if ln.startswith(("Priority", "AccountingStorageEnforce"))]


def test_gres_conf_has_device_files_unless_autodetect(lab_expanded):
    text = render("slurm", "gres.conf.j2", lab_expanded, "gpu01")
    assert "NodeName=gpu01 Name=gpu Type=h100 File=/dev/nvidia[0-1]" in lines(text)
    assert "NodeName=infer01 Name=tpu Count=4" in lines(text)
    assert "AutoDetect=nvml" not in text

    lab_expanded["scheduler"]["slurm"]["gres_autodetect"] = True
    text = render("slurm", "gres.conf.j2", lab_expanded, "gpu01")
    assert lines(text)[0] == "AutoDetect=nvml"
    assert "NodeName=gpu01 Name=gpu Type=h100 Count=2" in lines(text)
    assert "File=" not in text


def test_topology_conf_is_the_plan_tree(lab_expanded):
    text = render("slurm", "topology.conf.j2", lab_expanded, "gpu01")
    assert lines(text) == [
        "SwitchName=tor1 Nodes=gpu01",
        "SwitchName=tor2 Nodes=cpu01,gpu02,infer01",
        "SwitchName=agg1 Switches=tor1,tor2",
        "SwitchName=core1 Switches=agg1",
    ]


def test_cgroup_conf_constrains_cores_devices_and_memory(lab_expanded):
    text = render("slurm", "cgroup.conf.j2", lab_expanded, "gpu01")
    wanted = {"ConstrainCores=yes", "ConstrainDevices=yes", "ConstrainRAMSpace=yes"}
    assert wanted <= set(lines(text))
    text = render(
        "slurm", "cgroup.conf.j2", lab_expanded, "gpu01", {"slurm_cgroup_constrain_ram": False}
    )
    assert "ConstrainRAMSpace=no" in lines(text)


def test_every_node_renders_the_same_shared_files(lab_expanded):
    for template in ("slurm.conf.j2", "gres.conf.j2", "topology.conf.j2"):
        texts = {render("slurm", template, lab_expanded, h) for h in ("head01", "gpu01", "cpu01")}
        assert len(texts) == 1, template


def test_slurmdbd_conf_takes_the_generated_password(lab_expanded):
    text = render(
        "slurm",
        "slurmdbd.conf.j2",
        lab_expanded,
        "head01",
        {"slurm_dbd_pass": {"content": "czNjcjN0Cg=="}},
    )
    assert "StoragePass=s3cr3t" in lines(text)
    assert "AuthType=auth/munge" in lines(text)


def test_two_controllers_make_an_ha_pair(lab_expanded):
    lab_expanded["groups"]["slurm_controller"] = ["head01", "stor01"]
    body = lines(render("slurm", "slurm.conf.j2", lab_expanded, "gpu01"))
    hosts = [ln for ln in body if ln.startswith("SlurmctldHost=")]
    assert hosts == [
        f"SlurmctldHost=head01({lab_expanded['hosts']['head01']['address']})",
        f"SlurmctldHost=stor01({lab_expanded['hosts']['stor01']['address']})",
    ]
