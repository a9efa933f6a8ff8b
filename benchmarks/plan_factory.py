"""Synthetic plans of any size, for benchmarks and scale tests."""

from __future__ import annotations

NODES_PER_RACK = 32
RACKS_PER_SPINE = 16


def synthetic_plan(nodes: int) -> str:
    """A plan with ``nodes`` GPU nodes (plus 3 storage nodes), 32 to a rack."""
    racks = max(1, -(-nodes // NODES_PER_RACK))
    spines = max(1, -(-racks // RACKS_PER_SPINE))
    lines = [
        "plugin: cluster_plan",
        "cluster: {name: bench, domain: bench.example.com, os: debian-12}",
        "networks:",
        "  mgmt: {cidr: 10.0.0.0/16, gateway: 10.0.0.1, reserved: 30}",
        "  compute: {cidr: 10.1.0.0/16, mtu: 9000}",
        "  storage: {cidr: 10.2.0.0/16, mtu: 9000}",
        "racks:",
        *[f"  r{r:04d}: {{}}" for r in range(racks)],
        "topology:",
        "  core: [core1, core2]",
        "  aggregation:",
        *[f"    spine{s}: {{uplinks: [core1, core2], uplink_gbps: 6400}}" for s in range(spines)],
        "  access:",
        *[
            f"    leaf{r:04d}: {{uplink: spine{r // RACKS_PER_SPINE}, rack: r{r:04d}, "
            "link_gbps: 200, uplink_gbps: 3200}"
            for r in range(racks)
        ],
        "hardware:",
        "  hgx: {cpu_cores: 112, memory_gb: 2048, accelerators: {model: H100-SXM5-80GB, count: 8}}",
        "  ctl: {cpu_cores: 32, memory_gb: 256}",
        "  stor: {cpu_cores: 32, memory_gb: 256, disks: [{name: osd, size_gb: 8000, use: osd}]}",
        "node_groups:",
        "  head: {count: 1, hostname: 'head{n}', hardware: ctl, rack: r0000,"
        " roles: [slurm_controller]}",
        "  stor: {count: 3, hostname: 'stor{n}', hardware: stor, rack: r0000,"
        " roles: [ceph_mon, ceph_osd]}",
        f"  gpu: {{count: {nodes}, hostname: 'gpu{{n:05d}}', hardware: hgx, racks: ["
        + ", ".join(f"r{r:04d}" for r in range(racks))
        + "], roles: [slurm_compute], pool: gpu}",
        "scheduler:",
        "  type: slurm",
        "  workload_classes: {training: {pool: gpu, needs: gpu, default: true}}",
        "acceptance: {network: {networks: [compute], min_gbps: 190}}",
        "",
    ]
    return "\n".join(lines)
