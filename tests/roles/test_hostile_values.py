"""A plan's strings are data, never configuration: hostile values at every plan key that reaches
a host's file are (a) refused by validate at their $.path, and (b), forced past validate into
the expanded plan, either refused by the role's templates with a clear error or written with
nothing added: every template of every role renders to the same lines, keys and sections as
with the lab plan's own values.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.template import trust_as_template
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from role_render import ROLES, host_variables, templar

from cluster_plan.plan.findings import format_path
from cluster_plan.plan.host_values import UnsafeValue, authorized_key, in_grammar
from cluster_plan.plan.schema import plan_schema
from cluster_plan.plan.validate import validate_text

ROOT = Path(__file__).resolve().parents[2]
LAB_PLAN = ROOT / "inventory" / "lab" / "cluster.yml"

HOSTILE = {
    "quote-break": 'x" y',
    "newline-directive": "/srv/x\nSlurmUser=root",
    # Python's `$` matches before a final newline: the schema's patterns end in `$(?!\n)`
    "trailing-newline": "/srv/x\n",
    "cr-directive": "/srv/x\rPermitRootLogin yes",
    "ganesha-export": '/srv/home"; } EXPORT { Path = "/"; Access_Type = RW; Squash = None; '
    'Pseudo = "/x',
    "apt-pre-invoke": 'http://10.40.0.2:3142"; DPkg::Pre-Invoke {"touch /tmp/pwned";}; x "',
    "traversal": "/srv/../etc",
    "nul-control": "/srv/a\x00b\x1b[2J",
    "trailing-backslash": "/srv/x\\",
    "systemd-specifier": "/srv/%h/$USER",
    "semicolon-command": "/srv/x;rm -rf /",
    "very-long": "/a" * 3000,
    "empty": "",
}
# plan key -> where the value sits (the expanded plan keeps the plan's own sections)
TEAM = ("teams", "vision", "users", 0)
SOFTWARE = ("software", "environments", "pytorch", 0)
TARGETS: dict[str, tuple[Any, ...]] = {
    "nfs export path": ("storage", "nfs", "exports", 0, "path"),
    "nfs export mount": ("storage", "nfs", "exports", 0, "mount"),
    "cephfs mount": ("storage", "ceph", "cephfs", "mount"),
    "slurm state_save": ("scheduler", "slurm", "state_save"),
    "package proxy": ("packages", "proxy"),
    "ansible_user": ("access", "ansible_user"),
    "backup schedule": ("backups", "schedule"),
    "backup target path": ("backups", "target", "path"),
    "backup source": ("backups", "sources", 0),
    "time zone": ("cluster", "timezone"),
    "ntp server": ("networks", "mgmt", "ntp", 0),
    "cluster name": ("cluster", "name"),
    "team user name": (*TEAM, "name"),
    "team user key": (*TEAM, "ssh_keys", 0),
    "rack row": ("racks", "r1", "row"),
    "software module": (*SOFTWARE, "module"),
    "software package": (*SOFTWARE, "packages", 0),
    "software version": (*SOFTWARE, "version"),
}
# The expanded plan gives each host its builds (plan_host.software): the roles read them there.
HOST_COPIES = {
    target: [("hosts", host, "software", "pytorch", *path[4:]) for host in ("gpu01", "gpu02")]
    for target, path in TARGETS.items()
    if path[0] == "software"
}

# A sound value for each, unique in every rendered file: where it shows up is what writes it.
MARKERS = {
    "nfs export path": "/srv/qq00x",
    "nfs export mount": "/mnt/qq01x",
    "cephfs mount": "/mnt/qq02x",
    "slurm state_save": "/var/lib/qq03x",
    "package proxy": "http://qq04x.example:3142",
    "ansible_user": "qq05x",
    "backup schedule": "*-*-* 03:17:41",
    "backup target path": "/srv/qq07x",
    "backup source": "/etc/qq08x",
    "time zone": "Etc/GMT+7",
    "ntp server": "qq10x.example",
    "cluster name": "qq11x",
    "team user name": "qq12x",
    "team user key": "qq13x",
    "rack row": "qq14x",
    "software module": "qq15x/1.13",
    "software package": "qq16x",
    "software version": "9.8.7.6",
}


def _put(data: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        data = data[part]
    if isinstance(data, list) and path[-1] == len(data):
        data.append(value)
    else:
        data[path[-1]] = value


def _put_target(expanded: dict[str, Any], target: str, value: Any) -> None:
    """The value at the target's key of the expanded plan and wherever expand copied it."""
    for path in [TARGETS[target], *HOST_COPIES.get(target, [])]:
        _put(expanded, path, value)


def _lab_plan() -> dict[str, Any]:
    plan: dict[str, Any] = yaml.safe_load(LAB_PLAN.read_text())
    plan["teams"]["vision"]["users"][0].setdefault("ssh_keys", [])
    return plan


# ---- (a) validate refuses each at its $.path -------------------------------------------------


@pytest.mark.parametrize("value_name", sorted(HOSTILE))
def test_validate_refuses_each_hostile_value_at_its_path(value_name: str) -> None:
    plan = _lab_plan()
    for path in TARGETS.values():
        _put(plan, path, HOSTILE[value_name])
    result = validate_text(yaml.safe_dump(plan), "hostile.yml")
    refused = {f.json_path for f in result.findings if f.severity == "error"}
    missed = [format_path(p) for p in TARGETS.values() if format_path(p) not in refused]
    assert not missed, f"{value_name}: validate accepts it at {missed}"
    assert "Traceback" not in "".join(f.message for f in result.findings)


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("backups", "target", "host"), "localhost"),
        (("storage", "nfs", "server"), "all"),
        (("storage", "ceph", "zap", 0, "host"), "ungrouped"),
        (("storage", "ceph", "cephfs", "mount"), "/"),
        (("storage", "nfs", "exports", 0, "mount"), "/"),
        (("packages", "mirror"), "http://deb.example.org/debian?x=1"),
        (("packages", "proxy"), "http://user:secret@proxy:3142"),
        (("scheduler", "reservations", "maint", "users", 0), "root\nx"),
    ],
)
def test_validate_refuses_reserved_names_and_roots(path: tuple[Any, ...], value: str) -> None:
    plan = _lab_plan()
    plan["storage"]["ceph"].setdefault("zap", [{"host": "stor01", "disk": "osd0"}])
    plan["scheduler"]["reservations"].setdefault("maint", {})
    plan["scheduler"]["reservations"]["maint"].setdefault("users", ["root"])
    _put(plan, path, value)
    result = validate_text(yaml.safe_dump(plan), "hostile.yml")
    assert format_path(path) in {f.json_path for f in result.findings if f.severity == "error"}


# ---- (b) the templates refuse or write them as data --------------------------------------------


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


_ED25519 = base64.b64encode(
    b"\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20" + hashlib.sha256(b"lab").digest()
).decode()
# What a play sets before these templates render (registered results, set_fact), as plain
# values or as the play's own expressions.
_PLAY = {
    "backup_targets": trust_as_template("{{ [{'name': 'target'} | combine(backup_plan.target)] }}"),
    "backup_host_keys": {"results": [{"item": "head01", "content": _b64("ssh-ed25519 AAAA")}]},
    "backup_client_key": {"content": _b64(f"ssh-ed25519 {_ED25519} cluster-plan-backup:gpu01")},
    "ceph_fsid": "5b1f4c1e-0000-4000-8000-000000000001",
    "ceph_keyring_entity": "client.admin",
    "ceph_keyring_key": "AQBkZXZpY2Uta2V5LWZvci10ZXN0cw==",
    "containerd_snapshotter_used": "overlayfs",
    "containerd_sandbox_image_used": "registry.k8s.io/pause:3.10.2",
    "containerd_plan": {"restrict_oom_score_adj": False},
    "containerd_platform": "amd64",
    "k8s_mirror_plan": {"address": "10.41.0.10", "registry_port": 5000, "files_port": 8080},
    "kubernetes_pod_network": {
        "protocol": 201,
        "routes": [{"node": "gpu02", "dst": "10.244.1.0/24", "via": "10.41.0.12"}],
    },
    "slurm_dbd_pass": {"content": _b64("secret")},
    "kubernetes_rendering": {
        "endpoint": "10.40.0.100:6443",
        "first_control_plane": "head01",
        "config_dir": "/etc/kubernetes/cluster-plan",
        "network": {"pod_cidr": "10.244.0.0/16"},
    },
    "kubernetes_ca": {"content": "Q0EK"},
    "kubernetes_reservation": {
        "name": "maint",
        "start": "2027-01-05T02:00:00",
        "end": "2027-01-05T04:00:00",
        "nodes": ["gpu01", "gpu02"],
        "taint": {"key": "cluster-plan/reservation", "effect": "NoSchedule"},
    },
    "kubernetes_reservation_action": "start",
    "kubernetes_package_host": "pkgs.k8s.io",
    "monitoring_rendering": trust_as_template(
        "{{ cluster_plan | cluster_plan.cluster.monitoring_rendering(dict(groups['all']"
        " | zip(groups['all'] | map('extract', hostvars, 'plan_host'))), groups) }}"
    ),
}
# a host without a collector of its own renders the GPU one
_MONITORING_ITEM = (
    "{{ (monitoring_collectors + [{'name': 'gpu', 'timeout_s': 60,"
    " 'args': ['--node', plan_host.hostname]}]) | first }}"
)
_ITEMS = {
    ("common", "network.j2"): "{{ {'key': 'mgmt', 'value': plan_host.interfaces.mgmt} }}",
    ("nfs", "nfs.mount.j2"): "{{ nfs_exports | first }}",
    ("monitoring", "cluster-plan-exporter.service.j2"): _MONITORING_ITEM,
    ("monitoring", "cluster-plan-exporter.timer.j2"): _MONITORING_ITEM,
    # torch's module; a host without modules renders one of Debian's torch
    ("software", "modulefile.lua.j2"): (
        "{{ ((software_modules | selectattr('environment', 'equalto', 'pytorch') | list)"
        " + ({'pytorch': {'version': '1.13', 'source': 'debian',"
        " 'build': 'cpu', 'packages': ['python3-torch'], 'module': 'pytorch/1.13'}}"
        " | cluster_plan.cluster.software_modules('/m'))) | first }}"
    ),
}
# Plan values written by tasks rather than templates: (role, task file, task name, field path).
_TASK_FIELDS = [
    ("common", "packages.yml", "Send apt through the plan's package proxy", ("content",)),
    ("common", "packages.yml", "Send dnf through the plan's package proxy", ("line",)),
    ("common", "team_users.yml", "Install the team users' SSH keys", ("content",)),
    (
        "backup",
        "client.yml",
        "Let this key run borg serve for this node's repository only",
        ("line",),
    ),
    ("common", "identity.yml", "Set the time zone", ("src",)),
    (
        "kubernetes",
        "packages.yml",
        "Send apt to the Kubernetes package source through the plan's proxy",
        ("content",),
    ),
]
_TASK_ITEMS = {
    "team_users.yml": "{{ [{'home': '/home/alice'}, common_team_users | first] }}",
    "client.yml": "{{ backup_targets | first }}",
}
HOSTS = ("head01", "gpu01", "stor01")  # a controller, a compute node, an OSD host


def _templates() -> list[tuple[str, str]]:
    return sorted((p.parts[-3], p.name) for p in ROLES.glob("*/templates/*.j2"))


def _task_field(role: str, tasks: str, name: str, field: tuple[str, ...]) -> str:
    for task in yaml.safe_load((ROLES / role / "tasks" / tasks).read_text()):
        if task.get("name") == name:
            module = next(v for k, v in task.items() if k.startswith("ansible.builtin."))
            return str(module[field[0]])
    raise LookupError(f"{role}/tasks/{tasks}: no task {name!r}")


def _host_vars(role: str, expanded: dict[str, Any], host: str, item: str | None) -> dict[str, Any]:
    overrides: dict[str, Any] = dict(_PLAY)
    overrides["hostvars"] = {name: {"plan_host": h} for name, h in expanded["hosts"].items()}
    # the join's token, registered on every host of the play (run_once)
    overrides["kubernetes_join_token"] = {"stdout": "abcdef.0123456789abcdef"}
    overrides["ansible_user"] = trust_as_template("{{ cluster_plan.access.ansible_user }}")
    if item:
        overrides["item"] = trust_as_template(item)
    return host_variables(role, expanded, host, overrides)


def _jobs(expanded: dict[str, Any]) -> dict[str, Callable[[], str]]:
    jobs: dict[str, Callable[[], str]] = {}
    for role, template in _templates():
        source = (ROLES / role / "templates" / template).read_text()
        for host in HOSTS:
            item = _ITEMS.get((role, template))
            jobs[f"{role}/{template}@{host}"] = _renderer(role, expanded, host, item, source)
    for role, tasks, name, field in _TASK_FIELDS:
        source = _task_field(role, tasks, name, field)
        for host in HOSTS:
            item = _TASK_ITEMS.get(tasks)
            jobs[f"{role}/tasks/{tasks}:{name}@{host}"] = _renderer(
                role, expanded, host, item, source
            )
    return jobs


def _render_all(
    expanded: dict[str, Any], only: set[str] | None = None
) -> dict[str, str | Exception]:
    """Every template of every role, and the tasks' plan-valued fields, for each of HOSTS (or
    the renders named in `only`): the text, or the error it failed with."""
    out: dict[str, str | Exception] = {}
    for key, job in _jobs(expanded).items():
        if only is not None and key not in only:
            continue
        try:
            out[key] = job()
        except Exception as exc:  # the error is the result under test
            out[key] = exc
    return out


def _renderer(
    role: str, expanded: dict[str, Any], host: str, item: str | None, source: str
) -> Callable[[], str]:
    def run() -> str:
        variables = _host_vars(role, expanded, host, item)
        return str(templar(role, variables).template(trust_as_template(source)))

    return run


_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_KEY = re.compile(r"^\s*([^\s=:({\[]*)")


def structure(text: str) -> list[tuple[str, int, int, int]]:
    """What a file's parser sees apart from its values: per line, the key it starts with and
    the braces and semicolons outside double-quoted strings."""
    shape = []
    for line in text.split("\n"):
        bare = _QUOTED.sub('""', line)
        key = _KEY.match(bare)
        shape.append(
            (key.group(1) if key else "", bare.count("{"), bare.count("}"), bare.count(";"))
        )
    return shape


@pytest.fixture(scope="module")
def lab_expanded_once() -> dict[str, Any]:
    from cluster_plan.api import load_expanded

    expanded = load_expanded(str(LAB_PLAN))
    expanded["teams"]["vision"]["users"][0]["ssh_keys"] = [f"ssh-ed25519 {_ED25519}"]
    expanded["storage"]["ceph"]["failure_domain"] = "row"  # so ceph.conf writes the row
    return expanded


@pytest.fixture(scope="module")
def baseline(lab_expanded_once: dict[str, Any]) -> dict[str, str | Exception]:
    return _render_all(lab_expanded_once)


@pytest.fixture(scope="module")
def writers(lab_expanded_once: dict[str, Any]) -> dict[str, set[str]]:
    """For each plan key, the renders that write its value (where its marker shows up)."""
    expanded = copy.deepcopy(lab_expanded_once)
    for target in TARGETS:
        marker = MARKERS[target]
        _put_target(
            expanded, target, f"ssh-ed25519 {_ED25519} {marker}" if "key" in target else marker
        )
    rendered = _render_all(expanded)
    failed = {k: str(v)[:200] for k, v in rendered.items() if isinstance(v, Exception)}
    assert not failed
    return {
        target: {k for k, text in rendered.items() if MARKERS[target] in str(text)}
        for target in TARGETS
    }


def test_every_template_renders_for_the_lab_plan(baseline: dict[str, str | Exception]) -> None:
    failed = {k: str(v)[:200] for k, v in baseline.items() if isinstance(v, Exception)}
    assert not failed
    assert len(baseline) == len(HOSTS) * (len(_templates()) + len(_TASK_FIELDS))


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_hostile_values_are_refused_or_written_as_data(
    target: str,
    lab_expanded_once: dict[str, Any],
    baseline: dict[str, str | Exception],
    writers: dict[str, set[str]],
) -> None:
    """Each render that writes the key's value, given each hostile value: refused with the
    grammar's error, or the same shape of file as with the lab plan's value."""
    assert writers[target], f"no template writes {target}: drop it from TARGETS"
    for value_name, value in HOSTILE.items():
        expanded = copy.deepcopy(lab_expanded_once)
        _put_target(expanded, target, value)
        for key, result in _render_all(expanded, writers[target]).items():
            normal = baseline[key]
            assert isinstance(normal, str)
            if isinstance(result, Exception):
                assert "refusing to write" in str(result), f"{target}/{value_name}: {key}: {result}"
            else:
                assert structure(result) == structure(normal), (
                    f"{target}/{value_name}: {key} changed shape:\n{result}"
                )


# ---- the grammars the templates apply, fuzzed ---------------------------------------------------

_DEFS = plan_schema()["$defs"]
_STRING_GRAMMARS = sorted(k for k, v in _DEFS.items() if "pattern" in v)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(_STRING_GRAMMARS), text=st.text(max_size=80))
def test_no_grammar_lets_a_line_break_or_a_quote_through(name: str, text: str) -> None:
    """Whatever string a grammar accepts stays one line with no control character, quote or
    backslash, except an SSH key line, whose options carry quoted values."""
    try:
        accepted = in_grammar(text, name)
    except UnsafeValue:
        return
    assert not re.search(r"[\x00-\x1f\x7f]", accepted)
    if name != "ssh_key":
        assert '"' not in accepted and "\\" not in accepted


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_what_a_grammar_generates_it_accepts(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(_STRING_GRAMMARS))
    text = data.draw(st.from_regex(_DEFS[name]["pattern"], fullmatch=True))
    longest = _DEFS[name].get("maxLength")
    if longest is None or len(text) <= longest:
        assert in_grammar(text, name) == text


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=120))
def test_an_authorized_key_the_roles_write_is_one_line(text: str) -> None:
    try:
        written = authorized_key(text)
    except UnsafeValue:
        return
    assert not re.search(r"[\x00-\x1f\x7f]", written)
