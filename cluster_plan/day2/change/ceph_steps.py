"""The change's steps in Ceph: a leaving host's OSDs out, emptied and purged, its CephFS
sessions evicted, an upgraded host's OSDs asked ok-to-stop, and the wait for HEALTH_OK
(cluster_plan.storage.ceph_commands asks and reads)."""

from __future__ import annotations

import shlex

from cluster_plan.day2.change.context import StepContext, StepFailed
from cluster_plan.day2.change.operations import Step
from cluster_plan.storage import ceph_commands as ceph


def _osd_ids(ctx: StepContext, host: str) -> list[str]:
    """The OSDs Ceph places under the host; [] once the host has left CRUSH. Any other
    failure stops the step: an unanswered question is not "no OSDs"."""
    mon = ctx.first("ceph_mon") or host
    script = shlex.join(ceph.osd_tree_argv(host))
    result = ctx.sh(mon, script)
    ids = ceph.osd_ids(result)
    if ids is None:
        raise StepFailed(f"on {mon}: `{script}` exited {result.rc}: "
                         f"{(result.stderr or result.stdout).strip()[-400:]}")  # fmt: skip
    return ids


def osd_out(ctx: StepContext, step: Step) -> None:
    mon = ctx.first("ceph_mon")
    for host in step.hosts:
        ids = _osd_ids(ctx, host)
        planned = sum(1 for d in ctx.old["hosts"].get(host, ctx.host(host))["disks"]
                      if d.get("use") == "osd")  # fmt: skip
        if len(ids) < planned:
            raise StepFailed(
                f"Ceph places {len(ids)} OSD(s) under {host}, the plan gives it {planned}: "
                "look at `ceph osd tree` before anything of it is removed"
            )
        if ids and mon:
            ctx.must(mon, shlex.join(ceph.osd_argv("out", ids)))
            ctx.say(f"  OSD(s) {', '.join(ids)} of {host} out")


def osd_empty(ctx: StepContext, step: Step) -> None:
    mon = ctx.first("ceph_mon")
    if mon is None:
        return
    for host in step.hosts:
        ids = _osd_ids(ctx, host)

        def pending(ids: list[str] = ids) -> str | None:
            safe = shlex.join(ceph.osd_argv("safe-to-destroy", ids))
            if ids and ctx.sh(mon, safe).rc != 0:
                return f"holding data (`{safe}` says no)"
            problem = _ceph_health(ctx, mon).problem
            return None if problem is None else f"not healthy: {problem}"

        ctx.wait(f"emptying the OSDs of {host}", ctx.osd_empty_timeout_s, pending)


def osd_purge(ctx: StepContext, step: Step) -> None:
    mon = ctx.first("ceph_mon")
    if mon is None:
        return
    for host in step.hosts:
        for osd in _osd_ids(ctx, host):
            # asked again right before: nothing is destroyed that holds the only copy
            safe = ctx.sh(mon, shlex.join(ceph.osd_argv("safe-to-destroy", [osd])))
            if safe.rc != 0:
                raise StepFailed(f"osd.{osd} of {host} is not safe to destroy: "
                                 f"{(safe.stderr or safe.stdout).strip()[-300:]}")  # fmt: skip
            ctx.sh(host, f"systemctl disable --now ceph-osd@{osd}", timeout=120)
            ctx.must(mon, shlex.join(ceph.osd_purge_argv(osd)))
        ctx.must(mon, f"{shlex.join(ceph.crush_remove_argv(host))} 2>/dev/null || true")
    # the purge changes the OSD map: the step ends when Ceph is healthy again, which no other
    # host's storage stage waits for (an OSD host's going runs none)
    wait_ceph_healthy(ctx)


def cephfs_evict(ctx: StepContext, step: Step) -> None:
    """End the host's CephFS client sessions before it goes away or is re-provisioned. A
    client that vanishes without unmounting keeps its capabilities, and Ceph 16 defers its
    eviction while any OSD is laggy: every other client then waits on those files."""
    mon = ctx.first("ceph_mon")
    if mon is None or ctx.first("ceph_mds") is None:
        return
    listed = ctx.must(mon, shlex.join(ceph.client_sessions_argv()))
    try:
        sessions = ceph.sessions_by_host(listed)
    except ValueError:
        raise StepFailed(f"on {mon}: `ceph tell mds.0 session ls` did not answer JSON") from None
    for host in step.hosts:
        for session in sessions.get(host, []):
            ctx.must(mon, shlex.join(ceph.client_evict_argv(session)))
            ctx.say(f"  CephFS session {session} of {host} evicted")


def osd_ok_to_stop(ctx: StepContext, step: Step) -> None:
    """An upgrade restarts a host's OSDs: only when Ceph stays available without them."""
    mon = ctx.first("ceph_mon")
    if mon is None:
        return
    ids = [i for host in step.hosts for i in _osd_ids(ctx, host)]
    if ids:
        ctx.must(mon, shlex.join(ceph.osd_argv("ok-to-stop", ids)))


def _ceph_health(ctx: StepContext, mon: str) -> ceph.Health:
    return ceph.health_of_text(ctx.sh(mon, shlex.join(ceph.health_argv())).stdout)


def wait_ceph_healthy(ctx: StepContext) -> None:
    mon = ctx.first("ceph_mon")
    if mon is None:
        return
    timeout = ctx.osd_empty_timeout_s
    health = ceph.wait_healthy(lambda: _ceph_health(ctx, mon), timeout, ctx.poll_s, ctx.sleep)
    if health.problem is not None:
        raise StepFailed(f"Ceph health: still {health.problem} after {timeout:g} s")
