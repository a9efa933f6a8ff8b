"""The go and gcc commands that build a bundle's binaries: a thin shell over the tools.

Every command's output goes to a log file under the bundle's `logs/`; its wall time, CPU
time and peak memory (of the command and everything it started: `go build` runs compile and
link as children) are recorded for build.json.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cluster_plan.kubernetes.bundle.artifacts import SOURCE_DATE, CBuild, GoBuild
from cluster_plan.kubernetes.bundle.gomodule import (
    ModuleError,
    UpstreamModule,
    go_version_tuple,
    upstream_module,
    wrapper_go,
    wrapper_gomod,
)
from cluster_plan.kubernetes.bundle.project import LocalGoBuild, source_files

# A module the proxy does not serve, as go reports it
_UNSERVED = re.compile(r"(\S+@\S+?):? .*(?:40[34]|not found|unknown revision|not available)", re.I)
_MAJOR_SUFFIX = re.compile(r"^v[0-9]+$")


class BuildError(RuntimeError):
    """A command failed; ``unserved`` when the cause is a module the proxy does not serve
    (a usage problem of this site, not a broken build)."""

    def __init__(self, message: str, *, unserved: bool = False) -> None:
        super().__init__(message)
        self.unserved = unserved


@dataclass(frozen=True)
class Step:
    name: str
    seconds: float
    cpu_seconds: float
    max_rss_mib: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "step": self.name,
            "seconds": round(self.seconds, 1),
            "cpu_seconds": round(self.cpu_seconds, 1),
            "max_rss_mib": round(self.max_rss_mib),
        }


@dataclass(frozen=True)
class Module:
    """A module version as the proxy served it."""

    path: str
    version: str
    directory: Path
    sum: str  # go.sum's h1: hash of its zip
    time: str  # the version's commit time, RFC 3339
    gomod: Path


class Runner:
    """Runs commands with one environment, logging each and keeping its figures."""

    def __init__(self, env: Mapping[str, str], logs: Path) -> None:
        self.env = dict(env)
        self.logs = logs
        self.steps: list[Step] = []
        logs.mkdir(parents=True, exist_ok=True)

    def record(self, name: str, seconds: float) -> None:
        """A step of our own (an image written in this process): its wall time only."""
        self.steps.append(Step(name, seconds, 0.0, 0.0))

    def run(
        self,
        name: str,
        command: Sequence[str],
        cwd: Path | None = None,
        *,
        check: bool = True,
        **env: str,
    ) -> str:
        """Run ``command``; its output (stdout and stderr) is returned and kept in the log."""
        log = self.logs / f"{name}.log"
        started = time.monotonic()
        with log.open("w") as out:
            out.write(f"$ {' '.join(command)}\n")
            out.flush()
            process = subprocess.Popen(
                list(command), cwd=cwd, env={**self.env, **env}, stdout=out, stderr=out
            )
            # wait4, not wait: its rusage holds the peak memory of the whole process tree
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
        self.steps.append(_step(name, time.monotonic() - started, usage))
        output = log.read_text(errors="replace").split("\n", 1)[-1]
        if check and process.returncode != 0:
            raise _failure(name, command, output, log)
        return output


def _step(name: str, seconds: float, usage: Any) -> Step:
    return Step(name, seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024)


def _failure(name: str, command: Sequence[str], output: str, log: Path) -> BuildError:
    unserved = sorted({m.group(1) for m in _UNSERVED.finditer(output)})
    if unserved:
        return BuildError(
            f"{name}: not served by the Go module proxy: {', '.join(unserved)} "
            f"(GOPROXY decides where modules come from; log: {log})",
            unserved=True,
        )
    tail = "\n  ".join(output.strip().splitlines()[-8:])
    return BuildError(f"{name}: `{' '.join(command[:3])} ...` failed (log: {log}):\n  {tail}")


def download(runner: Runner, path: str, version: str) -> Module:
    """Fetch one module version; BuildError(unserved) when the proxy does not have it."""
    name = f"download-{path.replace('/', '_')}@{version}"
    output = runner.run(name, ["go", "mod", "download", "-json", f"{path}@{version}"], check=False)
    try:
        info = json.loads(output)
    except ValueError:
        raise _failure(
            name, ["go", "mod", "download"], output, runner.logs / f"{name}.log"
        ) from None
    if info.get("Error"):
        raise BuildError(
            f"{path}@{version} is not served by the Go module proxy: {info['Error']}",
            unserved=True,
        )
    stamp = json.loads(Path(info["Info"]).read_text())
    return Module(
        path, version, Path(info["Dir"]), info.get("Sum", ""), stamp["Time"], Path(info["GoMod"])
    )


def upstream(runner: Runner, module: Module) -> UpstreamModule:
    name = f"gomod-{module.path.replace('/', '_')}@{module.version}"
    gomod = json.loads(runner.run(name, ["go", "mod", "edit", "-json", str(module.gomod)]))
    return upstream_module(module.path, module.version, gomod)


def default_name(package: str) -> str:
    """The file `go build -o DIR/` writes for a main package: its last element, or the one
    before a major-version suffix (go.etcd.io/etcd/server/v3 -> server)."""
    parts = package.split("/")
    if len(parts) > 1 and _MAJOR_SUFFIX.match(parts[-1]):
        return parts[-2]
    return parts[-1]


def ldflags(build: GoBuild, source_date: str) -> str:
    flags = ["-s", "-w", "-buildid="]
    flags += [flag.replace(SOURCE_DATE, source_date) for flag in build.ldflags]
    if build.static:
        flags.append("-extldflags=-static")
    return " ".join(flags)


def build_go(
    runner: Runner, build: GoBuild, modules: Sequence[Module], work: Path, out: Path, go: str
) -> None:
    """Write the wrapper module, tidy it (which fetches the closure) and build the binaries
    into ``out`` under their names."""
    uppers = [upstream(runner, m) for m in modules]
    needed = wrapper_go(uppers)
    if go_version_tuple(needed) > go_version_tuple(go):
        raise BuildError(
            f"{build.component} needs Go {needed}; this machine has {go}", unserved=True
        )
    work.mkdir(parents=True, exist_ok=True)
    packages = [package for package, _ in build.binaries]
    try:
        (work / "go.mod").write_text(wrapper_gomod(build.component, uppers, packages))
    except ModuleError as exc:
        raise BuildError(f"{build.component}: {exc}") from None
    runner.run(f"{build.component}-tidy", ["go", "mod", "tidy"], cwd=work)
    out.mkdir(parents=True, exist_ok=True)
    command = ["go", "build", "-trimpath", "-buildvcs=false"]
    if build.tags:
        command.append(f"-tags={','.join(build.tags)}")
    command += [f"-ldflags={ldflags(build, modules[0].time)}", "-o", f"{out}/", *packages]
    runner.run(f"{build.component}-build", command, cwd=work, CGO_ENABLED="1" if build.cgo else "0")
    for package, name in build.binaries:
        made = out / default_name(package)
        if made.name != name:
            made.rename(out / name)


def build_c(runner: Runner, build: CBuild, module: Module, out: Path) -> None:
    source = module.directory / build.source
    if not source.is_file():
        raise BuildError(
            f"{build.component}: {build.source} is not in {module.path}@{module.version}"
        )
    out.mkdir(parents=True, exist_ok=True)
    runner.run(
        f"{build.component}-build",
        ["gcc", *build.cflags, "-o", str(out / build.binary), str(source)],
        cwd=out,
    )


def build_local(runner: Runner, build: LocalGoBuild, work: Path, out: Path) -> dict[str, str]:
    """Build a program of the project from its sources in the package (its own go.mod and
    go.sum: go fetches what they pin through the proxy); returns module@version -> go.sum
    hash of what its go.mod requires directly."""
    work.mkdir(parents=True, exist_ok=True)
    for name, data in source_files(build.source).items():
        (work / name).write_bytes(data)
    out.mkdir(parents=True, exist_ok=True)
    command = ["go", "build", "-trimpath", "-buildvcs=false", "-mod=readonly"]
    command += ["-ldflags=-s -w -buildid=", "-o", str(out / build.binary), "."]
    runner.run(f"{build.component}-build", command, cwd=work, CGO_ENABLED="0")
    gomod = json.loads(
        runner.run(f"gomod-{build.component}", ["go", "mod", "edit", "-json"], cwd=work)
    )
    direct = {
        f"{r['Path']} {r['Version']}" for r in gomod.get("Require") or [] if not r.get("Indirect")
    }
    sums = {}
    for line in (work / "go.sum").read_text().splitlines():
        module, version, digest = line.split()
        if f"{module} {version}" in direct:
            sums[f"{module}@{version}"] = digest
    return sums
