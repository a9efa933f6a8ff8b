#!/usr/bin/python
"""Keep a cephx entity with the caps the plan gives it; return its key (run with no_log)."""

from __future__ import annotations

import errno
from typing import Any

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cluster_plan.cluster.plugins.module_utils.ceph_cli import CephError, ceph

DOCUMENTATION = r"""
module: ceph_auth
short_description: Create a cephx entity or correct its caps, and return its key
description:
  - Reads the entity with C(ceph auth get). Creates it with the given caps when it is
    missing, and sets the caps when they differ. Supports check mode.
  - The key is in the result; call this module with C(no_log: true).
options:
  entity: {description: Entity name, e.g. client.gpu01 or mgr.head01., type: str, required: true}
  caps:
    description: Caps per daemon type (mon, mgr, osd, mds) to their cap string.
    type: dict
    required: true
"""


def caps_args(caps: dict[str, str]) -> list[str]:
    args: list[str] = []
    for daemon, cap in sorted(caps.items()):
        args += [daemon, cap]
    return args


def ensure(module: Any, entity: str, caps: dict[str, str]) -> dict[str, Any]:
    found = ceph(module, "auth", "get", entity, allow=(errno.ENOENT,))
    if not found:
        if module.check_mode:
            return {"changed": True, "key": ""}
        created = ceph(module, "auth", "get-or-create", entity, *caps_args(caps))
        return {"changed": True, "key": created[0]["key"]}
    current = found[0]
    if dict(current.get("caps") or {}) == caps:
        return {"changed": False, "key": current["key"]}
    if not module.check_mode:
        ceph(module, "auth", "caps", entity, *caps_args(caps), as_json=False)
    return {"changed": True, "key": current["key"]}


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "entity": {"type": "str", "required": True},
            "caps": {"type": "dict", "required": True},
        },
        supports_check_mode=True,
    )
    caps = {str(k): str(v) for k, v in module.params["caps"].items()}
    try:
        result = ensure(module, module.params["entity"], caps)
    except CephError as err:
        module.fail_json(msg=str(err))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
