"""Where the checks of the newest sections' mistakes start firing and where they stay quiet
(the corpus, tests/plans/bad, holds one plan per mistake): power units, class requirements,
software modules, prefixes and wheel flavours, alerts that can fire, collectives that run."""

from __future__ import annotations

from pathlib import Path

import pytest
from plan_text import findings, replace_once

from cluster_plan.acceptance import collectives_spec as acceptance_collectives
from cluster_plan.plan import software_catalog
from cluster_plan.plan.catalog import gpu_link_ceiling_GBps

PLANS = Path(__file__).resolve().parents[1] / "plans"
BASE = (PLANS / "base.yml").read_text()
HEAD = "roles: [slurm_controller, ceph_mgr]}"
GPU = "accelerators: {model: H100-PCIE-80GB, count: 2}}"
TRAINING = "    training: {pool: gpu, needs: gpu}"
GENERAL = "    general: {pool: cpu, needs: cpu, default: true}"
NFS = (
    "  nfs:\n    server: head01\n    exports:\n"
    "      - {path: /srv/sw, network: compute, mount: /opt/sw}\n"
)


def codes(text: str, *wanted: str) -> list[tuple[str, str, str]]:
    """The findings of the wanted codes; any other error means the test's plan is broken."""
    found = findings(text)
    assert [f for f in found if f[0] == "error" and f[1] not in wanted] == []
    return [f for f in found if f[1] in wanted]


# -- power units ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("power_w", "found"),
    [(10.2, [("error", "power-unit")]), (99.9, [("error", "power-unit")]),
     (100, [("warning", "power-below-boards")]), (5599, [("warning", "power-below-boards")]),
     (5600, []), (10200, [])],
)  # fmt: skip
def test_a_node_peak_below_its_boards(power_w, found):
    h200 = f"power_w: {power_w}, accelerators: {{model: H200-SXM-141GB, count: 8}}}}"
    text = replace_once(BASE, (GPU, h200))
    assert [f[:2] for f in codes(text, "power-unit", "power-below-boards")] == found


@pytest.mark.parametrize(("kw", "refused"), [(994, False), (995, True), (50, False)])
def test_a_rack_budget_in_watts(kw, refused):
    text = replace_once(
        BASE, ("  r1: {row: A}", f"  r1: {{row: A, cooling: {{kw: {kw}, kind: liquid}}}}")
    )
    assert bool(codes(text, "power-unit")) is refused


@pytest.mark.parametrize(("pct", "refused"), [(0.75, True), (1, True), (1.5, False), (75, False)])
def test_percentages_written_as_fractions(pct, refused):
    assert bool(codes(BASE + f"power: {{warn_utilization_pct: {pct}}}\n", "power-unit")) is refused


# -- class requirements ----------------------------------------------------------------------


def test_requires_on_a_pool_of_gpus_and_cpu_nodes_names_the_cpu_profile():
    text = replace_once(
        BASE,
        ("roles: [slurm_compute], pool: cpu}", "roles: [slurm_compute], pool: gpu}"),
        (TRAINING, "    training: {pool: gpu, needs: any, requires: {nvlink: false}}"),
        (GENERAL, "    general: {pool: gpu, needs: any, default: true}"),
    )
    assert [f[2] for f in codes(text, "class-requirement")] == [
        "$.scheduler.workload_classes.training.requires"
    ]


def test_a_known_model_in_requires_is_no_reference_finding():
    known = TRAINING[:-1] + ", requires: {accelerators: [H100-PCIE-80GB]}}"
    text = replace_once(BASE, (TRAINING, known))
    assert codes(text, "unknown-reference", "class-requirement") == []


# -- software ------------------------------------------------------------------------------


def software(*builds: str) -> str:
    text = replace_once(BASE, (HEAD, "roles: [slurm_controller, ceph_mgr, nfs_server]}"),
                        ("  ceph:\n", NFS + "  ceph:\n"))  # fmt: skip
    return text + "software:\n  environments:\n" + "".join(builds)


DEBIAN_TORCH = (
    '{version: "1.13", source: debian, packages: [python3-torch], module: pytorch/2, pools: [cpu]}'
)
CUDA_TORCH = (
    '{version: "2.5.1", source: pip, build: cuda, packages: [torch], prefix: /opt/sw/t, '
    "module: pytorch/2, pools: [gpu]}"
)


def test_one_module_name_for_two_platforms_is_fine():
    text = software(
        f"    pytorch:\n      - {DEBIAN_TORCH}\n      - {CUDA_TORCH}\n"
        f"    other:\n      - {DEBIAN_TORCH}\n"
    )
    found = codes(text, "software-module-conflict")
    assert [f[2] for f in found] == ["$.software.environments.other[0].module"]  # cpu01 twice


@pytest.mark.parametrize(
    ("second", "conflict"),
    [("/opt/sw/env", True), ("/opt/sw/env/inner", True), ("/opt/sw/envy", False)],
)
def test_prefixes_shared_or_nested(second, conflict):
    text = software(
        "    a:\n"
        '      - {version: "1.0", source: pip, packages: [numpy], prefix: /opt/sw/env, '
        "pools: [gpu]}\n"
        "    b:\n"
        f'      - {{version: "2.0", source: pip, packages: [scipy], prefix: {second}, '
        "pools: [cpu]}\n"
    )
    assert bool(codes(text, "software-prefix-conflict")) is conflict


def test_one_build_at_one_prefix_for_two_pools_is_one_environment():
    build = '{version: "2.5.1", source: pip, packages: [torch], prefix: /opt/sw/t, pools: [POOL]}'
    text = software(
        "    pytorch:\n"
        f"      - {build.replace('POOL', 'gpu')}\n"
        f"      - {build.replace('POOL', 'cpu')}\n"
    )
    assert codes(text, "software-prefix-conflict") == []


@pytest.mark.parametrize(
    ("version", "build", "index", "found"),
    [
        ("2.5.1+cu121", "cuda", "https://download.pytorch.org/whl/cu121", []),
        ("2.5.1+cpu", "cpu", "https://download.pytorch.org/whl/cpu", []),
        ("2.5.1", "cuda", "https://download.pytorch.org/whl/nightly/cu124", []),
        ("2.5.1", "cuda", "https://pypi.example.org/simple", []),  # no flavour to compare
        ("2.5.1+cu121", "cpu", "https://download.pytorch.org/whl/cu121", ["software-version"]),
        ("2.5.1+cpu", "cuda", "https://download.pytorch.org/whl/cu121", ["software-version"]),
        ("2.5.1", "cpu", "https://download.pytorch.org/whl/cu121", ["software-index"]),
        ("2.5.1", "cuda", "https://download.pytorch.org/whl/rocm6.2", ["software-index"]),
        ("2.5.1+cu124", "cuda", "https://download.pytorch.org/whl/cu121", ["software-index"]),
    ],
)
def test_the_wheel_flavour_of_tag_build_and_index(version, build, index, found):
    text = software(
        "    pytorch:\n"
        f'      - {{version: "{version}", source: pip, build: {build}, packages: [torch], '
        f"index_url: {index}, prefix: /opt/sw/t, pools: [gpu]}}\n"
    )
    assert [f[1] for f in codes(text, "software-version", "software-index")] == found


# -- alerts ----------------------------------------------------------------------------------

MONITORED = replace_once(BASE, (HEAD, "roles: [slurm_controller, ceph_mgr, monitoring_server]}"))
RECEIVERS = "  receivers:\n    a: {webhook: 'http://h/a'}\n    b: {webhook: 'http://h/b'}\n"


def monitoring(settings: str, base: str = MONITORED) -> list[tuple[str, str, str]]:
    return codes(
        base + "monitoring:\n" + settings + RECEIVERS,
        "alert-never-fires", "alert-always-fires", "alert-wait-unkept", "route-shadows",
    )  # fmt: skip


@pytest.mark.parametrize(("pct", "refused"), [(94, False), (95, True), (100, True)])
def test_the_pool_full_alert_against_cephs_full_ratio(pct, refused):
    assert bool(monitoring(f"  ceph_pool_full_pct: {pct}\n")) is refused


def test_a_configured_full_ratio_moves_the_limit_and_no_ceph_no_rule():
    ratio = "    failure_domain: host\n    config: {global: {mon_osd_full_ratio: 0.97}}\n"
    text = replace_once(MONITORED, ("    failure_domain: host\n", ratio))
    assert monitoring("  ceph_pool_full_pct: 96\n", text) == []
    before, after = MONITORED.split("\nstorage:\n")[0], MONITORED.split("\nacceptance:\n")[1]
    without = (before + "\nacceptance:\n" + after).replace(", ceph_mgr", "")
    without = without.replace("roles: [ceph_mon, ceph_osd]", "roles: [slurm_compute]")
    assert monitoring("  ceph_pool_full_pct: 99\n", without) == []


@pytest.mark.parametrize(("hours", "refused"), [(23.9, True), (24, False), (26, False)])
def test_the_backup_age_against_the_schedule(hours, refused):
    text = replace_once(
        MONITORED, ("ceph_mgr, monitoring_server]", "ceph_mgr, monitoring_server, backup_server]")
    )
    text += (
        "backups: {schedule: daily, target: {host: head01, path: /srv/backup}, "
        "sources: [/etc/slurm]}\n"
    )
    assert bool(monitoring(f"  backup_max_age_hours: {hours}\n", text)) is refused


@pytest.mark.parametrize(("minutes", "refused"), [(0.49, True), (0.5, False)])
def test_node_down_against_one_scrape(minutes, refused):
    settings = f"  scrape_interval_s: 30\n  alert_after_minutes: {{node_down: {minutes}}}\n"
    assert bool(monitoring(settings)) is refused


@pytest.mark.parametrize(("every", "refused"), [(120, False), (121, True)])
def test_the_evaluation_interval_against_the_shortest_wait(every, refused):
    settings = (
        f"  scrape_interval_s: {every}\n  evaluation_interval_s: {every}\n"
        "  alert_after_minutes: {node_down: 10}\n"
    )
    assert bool(monitoring(settings)) is refused  # ceph_osd waits 2 min: 120 s


K8S_PLAN = (PLANS.parent.parent / "inventory" / "examples" / "k8s-inference.yml").read_text()
K8S_MONITORING = "monitoring:\n  receivers:\n"


@pytest.mark.parametrize(("minutes", "refused"), [(0.5, False), (0.49, True)])
def test_the_kubernetes_waits_against_the_evaluation_interval(minutes, refused):
    settings = f"monitoring:\n  alert_after_minutes: {{k8s_not_ready: {minutes}}}\n  receivers:\n"
    found = codes(replace_once(K8S_PLAN, (K8S_MONITORING, settings)), "alert-wait-unkept")
    assert bool(found) is refused  # evaluated every 30 s, the default


def test_the_kubernetes_waits_of_a_slurm_plan_render_no_rule_and_say_nothing():
    assert monitoring("  alert_after_minutes: {k8s_not_ready: 0.1, k8s_apiserver: 0.1}\n") == []


@pytest.mark.parametrize(
    ("routes", "shadowing"),
    [
        ("x: {receiver: a}\n    y: {severity: critical, receiver: b}", ["x"]),
        ("x: {receiver: a, continue: true}\n    y: {severity: critical, receiver: b}", []),
        ("y: {severity: critical, receiver: b}\n    x: {receiver: a}", []),
        ("x: {severity: critical, receiver: a}\n    y: {severity: critical, receiver: b}", ["x"]),
        ("x: {severity: warning, receiver: a}\n    y: {severity: critical, receiver: b}", []),
    ],
)
def test_routes_that_take_what_a_later_route_would(routes, shadowing):
    found = monitoring(f"  routes:\n    {routes}\n")
    assert [f[2].rsplit(".", 1)[1] for f in found] == shadowing


# -- collectives ---------------------------------------------------------------------------


def test_the_default_collectives_settings_say_nothing_without_software():
    assert codes(BASE + "  collectives: {min_link_fraction: 0.8}\n", "collectives-not-run") == []


def test_mpi_alone_runs_the_phase():
    mpi = '{version: "4.1", source: debian, packages: [openmpi-bin, python3-mpi4py], pools: [gpu]}'
    text = software(f"    mpi:\n      - {mpi}\n").replace(
        "min_gbps: 9}\n", "min_gbps: 9}\n  collectives: {min_link_fraction: 0.9}\n"
    )
    assert codes(text, "collectives-not-run") == []


@pytest.mark.parametrize(
    ("floor", "build", "refused"),
    [(600, "cuda", False), (601, "cuda", True), (5000, "cpu", False)],
)
def test_the_intra_node_floor_against_the_links(floor, build, refused):
    torch = (
        f'{{version: "2.5.1", source: pip, build: {build}, packages: [torch], prefix: /opt/sw/t, '
        "classes: [training]}"
    )
    text = software(f"    pytorch:\n      - {torch}\n").replace(
        "min_gbps: 9}\n", f"min_gbps: 9}}\n  collectives: {{intra_node_min_busbw_GBps: {floor}}}\n"
    )
    assert bool(codes(text, "collectives-floor")) is refused


@pytest.mark.parametrize(
    ("model", "count", "ceiling"),
    [("H100-SXM5-80GB", 8, 900), ("H200-SXM-141GB", 8, 900), ("B200", 8, 1800),
     ("A100-SXM4-80GB", 4, 600), ("V100-SXM2-32GB", 8, 300), ("H100-PCIE-80GB", 2, 600),
     ("H100-PCIE-80GB", 4, 128), ("L40S", 4, 64), ("T4", 4, 32), ("tpu", 4, None)],
)  # fmt: skip
def test_gpu_link_ceilings(model, count, ceiling):
    assert gpu_link_ceiling_GBps(model, count) == ceiling


def test_catalog_floors_are_under_the_ceilings():
    from cluster_plan.plan.catalog import load_catalog

    for model, entry in load_catalog().items():
        floor = entry.get("allreduce_busbw_GBps")
        if floor:
            assert floor["floor"] < (gpu_link_ceiling_GBps(model, floor["gpus"]) or 0), model


def test_the_packages_that_give_a_backend_are_acceptances():
    assert software_catalog.TORCH_PACKAGES == acceptance_collectives.TORCH_PACKAGES
    assert software_catalog.MPI_PACKAGES == acceptance_collectives.MPI_PACKAGES
