"""The plan's software and the payload it exists for, proven on the lab after `site.yml`
(docs/software.md, docs/collectives.md): the stack only where the plan puts it, `module load`
for a team user, MPI across nodes through Slurm (PMIx), and acceptance's all-reduce sweep and
DistributedDataParallel job through Slurm; then, with one training node's links slowed, the
collectives verdict fails and names that node.

Uses the session's one converge (`converged_lab` of support.lab_session); every command runs
inside lab nodes (`cluster-plan lab run`) or through `cluster-plan acceptance --transport lab`;
nothing is sent from this machine's own namespace. The second run of the converge (every
role, this one included, `changed=0`) is test_slurm_lab's.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shlex
import zipfile
from pathlib import Path
from typing import Any

import pytest
from lab_helpers import PLAN, cli

# The shared session fixtures (`lab`, `converged_lab`), requested by `slurm` below.
from support.lab_session import Converged, converged_lab, lab  # noqa: F401
from support.playbooks import changed_lines, playbook, recap
from test_slurm_lab import SlurmLab

from cluster_plan.acceptance.report import load_report

pytestmark = pytest.mark.lab

PROGRAM = "/usr/local/lib/cluster-plan/cluster-plan-collectives.pyz"


@pytest.fixture
def slurm(converged_lab: Converged) -> SlurmLab:  # noqa: F811
    converged_lab.require_converged()
    return SlurmLab(converged_lab.expanded, converged_lab)


def _software(cluster: SlurmLab) -> dict[str, dict[str, Any]]:
    return {name: host["software"] for name, host in cluster.expanded["hosts"].items()}


def _torch_hosts(cluster: SlurmLab) -> list[str]:
    return sorted(
        name
        for name, envs in _software(cluster).items()
        if any("python3-torch" in b["packages"] for b in envs.values())
    )


def acceptance(*args: str, timeout: float = 900) -> tuple[int, dict[str, Any], str]:
    out = Path(args[args.index("--output-dir") + 1])
    proc = cli("acceptance", str(PLAN), "--transport", "lab", "--no-history", *args,
               timeout=timeout)  # fmt: skip
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return proc.returncode, load_report(out / "acceptance.json"), proc.stdout + proc.stderr


def test_the_stack_is_installed_only_where_the_plan_puts_it(slurm: SlurmLab) -> None:
    torch_hosts = _torch_hosts(slurm)
    assert torch_hosts == ["gpu01", "gpu02"], "the lab plan gives torch to the training pool"
    script = (
        "dpkg-query -W -f='${db:Status-Status}' python3-torch 2>/dev/null; echo; "
        f"test -f {PROGRAM} && echo program || echo none; "
        "ls /etc/cluster-plan/modulefiles/*/*.lua 2>/dev/null | sort | tr '\\n' ' '"
    )
    for host, envs in _software(slurm).items():
        torch, program, modules = [*slurm.sh(host, script).splitlines(), "", ""][:3]
        assert (torch == "installed") == (host in torch_hosts), f"{host}: python3-torch {torch!r}"
        assert program == ("program" if envs else "none"), host
        expected = sorted(
            f"/etc/cluster-plan/modulefiles/{b['module']}.lua" for b in envs.values() if b["module"]
        )
        assert modules.split() == expected, host


def test_a_team_user_loads_the_plans_modules(slurm: SlurmLab) -> None:
    user = slurm.expanded["teams"]["vision"]["users"][0]["name"]
    network = slurm.expanded["acceptance"]["network"]["networks"][0]
    gpu01 = slurm.expanded["hosts"]["gpu01"]
    modules = " ".join(b["module"] for b in gpu01["software"].values() if b["module"])
    script = (
        f"module load {modules} && module -t list 2>&1 | sort | tr '\\n' ' ' && echo && "
        "python3 -c 'import torch, torch.distributed as d; print(d.is_gloo_available())' && "
        "echo $GLOO_SOCKET_IFNAME $OMPI_MCA_btl_tcp_if_include"
    )
    out = slurm.sh("gpu01", f"su - {user} -c {shlex.quote(script)}").splitlines()
    assert out[0].split() == sorted(modules.split()), out
    assert out[1] == "True", out  # Debian's torch has gloo
    assert out[2].split() == [
        gpu01["interfaces"][network]["device"],
        slurm.expanded["networks"][network]["cidr"],
    ], out


def test_mpi_runs_across_nodes_through_slurm_on_the_job_network(slurm: SlurmLab) -> None:
    controller = slurm.group("slurm_controller")[0]
    program = (
        "from mpi4py import MPI; import socket; c = MPI.COMM_WORLD; "
        "print(c.Get_rank(), c.Get_size(), socket.gethostname(), c.allreduce(c.Get_rank() + 1))"
    )
    out = slurm.sh(
        controller,
        "cd /tmp && timeout 120 srun -t 2 -p training -N2 -w gpu01,gpu02 --ntasks-per-node=1 "
        f"--mpi=pmix python3 -c {shlex.quote(program)}",
    )
    ranks = sorted(line.split() for line in out.splitlines() if line[:1].isdigit())
    assert ranks == [["0", "2", "gpu01", "3"], ["1", "2", "gpu02", "3"]], out
    cidr = slurm.expanded["networks"]["compute"]["cidr"]
    params = slurm.sh(
        "gpu01",
        "ompi_info --all --parsable | grep -E 'btl_tcp_if_include:value|oob_tcp_if_include:value'",
    )
    assert params.count(f":value:{cidr}") == 2, params


def test_acceptance_runs_the_allreduce_and_the_training_job(
    slurm: SlurmLab, tmp_path: Path
) -> None:
    code, report, output = acceptance("--phases", "collectives,training",
                                      "--output-dir", str(tmp_path))  # fmt: skip
    assert code == 0, output
    section = report["collectives"]
    (pool,) = section["pools"]
    assert (pool["pool"], pool["nodes"], pool["backend"]) == ("gpu", ["gpu01", "gpu02"], "gloo")
    assert pool["correct"] and pool["busbw_GBps"] >= pool["floor_GBps"] > 0, pool
    # the largest message is the plan's (8 MiB in the lab), and busbw = algbw for two ranks
    assert pool["sizes"][-1]["bytes"] == 8 << 20
    assert all(r["busbw_GBps"] == r["algbw_GBps"] for r in pool["sizes"])
    (job,) = section["training"]
    assert job["passed"] and job["identical_weights"] and len(set(job["weights_sha256"])) == 1
    assert sorted(job["hosts"]) == ["gpu01", "gpu02"] and job["steps"] == 40
    assert job["last_loss"] < job["first_loss"] / 10, job["losses"]
    html = (tmp_path / "acceptance.html").read_text()
    assert "bus bandwidth of pool gpu" in html and "training loss of pool gpu" in html
    figures = f"busbw {pool['busbw_GBps']} GB/s (floor {pool['floor_GBps']})"
    print(f"collectives: {figures}, loss {job['first_loss']} -> {job['last_loss']}, "
          f"{report['timing']}")  # fmt: skip


@pytest.mark.lab_changes
def test_a_slow_training_node_fails_collectives_and_is_named(
    slurm: SlurmLab, tmp_path: Path
) -> None:
    """gpu02's links at a quarter of their rate: its pool's all-reduce falls under the floor
    (0.7 of the link), and the bandwidth phase of the same run (gpu01, gpu02 and cpu01, so that a
    third node tells the two apart) names gpu02."""
    rate_scale = slurm.expanded["lab"]["rate_scale"]
    link_mbit = slurm.expanded["hosts"]["gpu02"]["link_gbps"] * 1000 * rate_scale
    fault = cli("lab", "fault", str(PLAN), "gpu02", "--rate", f"{link_mbit / 4:g}mbit")
    assert fault.returncode == 0, fault.stdout + fault.stderr
    try:
        code, report, output = acceptance(
            "--phases", "bandwidth,collectives", "--nodes", "gpu01,gpu02,cpu01",
            "--duration", "2", "--output-dir", str(tmp_path),
        )  # fmt: skip
    finally:
        cli("lab", "fault", str(PLAN), "gpu02", "--clear", timeout=60)
    assert code == 1, output
    (pool,) = report["collectives"]["pools"]
    assert not pool["passed"] and pool["busbw_GBps"] < pool["floor_GBps"], pool
    assert (pool["suspects"], pool["localised_by"]) == (["gpu02"], "network"), pool
    assert any("gpu02" in p for p in report["collectives"]["problems"])
    assert json.dumps(report["nodes_at_fault"]).count('"gpu02"') == 1, report["nodes_at_fault"]
    print(f"slowed gpu02: busbw {pool['busbw_GBps']} GB/s against {pool['floor_GBps']}: "
          f"{report['collectives']['problems']}")  # fmt: skip


# --- a pip build into a shared prefix, from an index served inside the lab -----------------

PROBE = "cluster_plan_probe"
INDEX_DIR = "/tmp/cluster-plan-index"
INDEX_PORT = 8765


def probe_wheel() -> tuple[str, bytes]:
    """A pure-Python wheel of one module (name, bytes): what pip installs from the lab's index."""
    files = {
        f"{PROBE}/__init__.py": b'VERSION = "1.0"\n',
        f"{PROBE}-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: cluster-plan-probe\n"
        b"Version: 1.0\n",
        f"{PROBE}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: cluster-plan tests\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def digest(data: bytes) -> str:
        return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()

    record = [f"{name},sha256={digest(data)},{len(data)}" for name, data in files.items()]
    files[f"{PROBE}-1.0.dist-info/RECORD"] = (
        "\n".join([*record, f"{PROBE}-1.0.dist-info/RECORD,,"]) + "\n"
    ).encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return f"{PROBE}-1.0-py3-none-any.whl", buffer.getvalue()


@pytest.mark.lab_changes
def test_a_pip_build_is_installed_once_into_its_shared_prefix(
    slurm: SlurmLab, tmp_path: Path
) -> None:
    """Both training nodes get a pip build whose prefix is on the CephFS they mount; the index
    is a folder head01 serves (the lab reaches no PyPI). gpu01, the first of the play, installs
    it; gpu02 uses it through the mount and its module; a second run changes nothing. The
    plan's own software comes back at the end."""
    index_host = slurm.group("slurm_controller")[0]
    name, wheel = probe_wheel()
    prefix = "/shared/software/probe/1.0"
    override = {
        "software_environments": {
            "probe": {"version": "1.0", "source": "pip", "build": "cpu",
                      "packages": ["cluster-plan-probe"], "prefix": prefix,
                      "index_url": f"http://{index_host}.lab.internal:{INDEX_PORT}/simple",
                      "module": "probe/1.0"},
        },
    }  # fmt: skip
    extra = tmp_path / "probe.json"
    extra.write_text(json.dumps(override))
    page = f'<a href="{name}">{name}</a>'
    slurm.sh(index_host, (
        f"rm -rf {INDEX_DIR} && mkdir -p {INDEX_DIR}/simple/cluster-plan-probe && "
        f"cd {INDEX_DIR}/simple/cluster-plan-probe && "
        f"echo {base64.b64encode(wheel).decode()} | base64 -d > {name} && "
        f"echo {shlex.quote(page)} > index.html && "
        f"(nohup timeout 600 python3 -m http.server {INDEX_PORT} --directory {INDEX_DIR} "
        f">/dev/null 2>&1 & echo $! > {INDEX_DIR}.pid)"
    ))  # fmt: skip
    stage = ["-e", f"@{extra}", "-e", "site_converge_when=always", "--limit", "gpu01,gpu02"]
    try:
        first = playbook(PLAN, ["playbooks/software.yml"], *stage)
        assert first.result.returncode == 0, first.output[-3000:]
        installs = [ln for ln in changed_lines(first.output) if "probe 1.0 in" in ln]
        assert [re.search(r"changed: \[(\S+)\]", ln)[1] for ln in installs] == ["gpu01"], installs
        user = slurm.expanded["teams"]["vision"]["users"][0]["name"]
        show = f"import {PROBE} as p; print(p.__file__, p.VERSION)"
        login = shlex.quote(f"module load probe/1.0 && python3 -c '{show}'")
        where = slurm.sh("gpu02", f"su - {user} -c {login}")
        assert where.split() == [
            f"{prefix}/lib/python3.11/site-packages/{PROBE}/__init__.py",
            "1.0",
        ]
        second = playbook(PLAN, ["playbooks/software.yml"], *stage)
        assert second.result.returncode == 0, second.output[-3000:]
        assert {h: r["changed"] for h, r in recap(second.output).items()} == {
            "gpu01": 0,
            "gpu02": 0,
        }
    finally:
        slurm.sh(
            index_host,
            f"kill $(cat {INDEX_DIR}.pid) 2>/dev/null; rm -rf {INDEX_DIR} {INDEX_DIR}.pid",
        )
        slurm.sh("gpu01", "rm -rf /shared/software/probe")
        back = playbook(PLAN, ["playbooks/software.yml"], "-e", "site_converge_when=always",
                        "--limit", "gpu01,gpu02")  # fmt: skip
        assert back.result.returncode == 0, back.output[-3000:]
    modules = slurm.sh("gpu02", "ls /etc/cluster-plan/modulefiles/*/*.lua").split()
    assert sorted(m.rsplit("/", 2)[1] for m in modules) == ["openmpi", "pytorch"], modules
