#!/usr/bin/python
"""Whether each role's last converge still holds on a host: the record role_manifest left
there, read back from the live host, from the same inputs, and recent enough.

site.yml asks this before each stage (playbooks/tasks/stage_gate.yml) and skips a stage
whose roles still hold on every host; it reads and changes nothing else.
"""

from __future__ import annotations

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.cluster_plan.cluster.plugins.module_utils.role_record import (
    Runner,
    differences,
    run,
)

DOCUMENTATION = r"""
module: role_converged
short_description: Whether roles' last converge still holds on a host
description:
  - Reads DIR/ROLE.json, the record the module C(role_manifest) wrote at the end of the
    role's last converge, and reads back from the host everything it names (files, services
    and whether they start at boot, held packages, nftables tables, probes).
  - A role holds when it has a record, converged from the same C(inputs), no longer ago than
    C(max_age_s), and nothing the record names differs now.
  - Read-only; runs in check mode too.
options:
  inputs:
    description:
      - Each role's inputs now, C({role: digest}) (lookup C(cluster_plan.cluster.converge_inputs)).
    type: dict
    required: true
  max_age_s:
    description: A converge older than this no longer holds (0 for no limit).
    type: int
    default: 86400
  dir: {description: Where the records live., type: path, default: /var/lib/cluster-plan/manifest}
"""

RETURN = r"""
converged:
  description: Every role holds on this host.
  type: bool
  returned: always
roles:
  description: Per role, C(converged) and the C(reasons) it does not hold.
  type: dict
  returned: always
"""


def role_holds(
    role: str, inputs: str, max_age_s: int, directory: str, runner: Runner, now: float
) -> list[str]:
    """Why `role` no longer holds on this host (empty: it does)."""
    path = os.path.join(directory, f"{role}.json")
    try:
        with open(path) as handle:
            record = json.load(handle)
        converged_at = os.stat(path).st_mtime
    except FileNotFoundError:
        return ["no record of a converge here"]
    except (OSError, ValueError) as exc:
        return [f"its record {path} is unreadable: {exc}"]
    if not isinstance(record, dict):
        return [f"its record {path} is not a JSON object"]
    if not inputs or record.get("inputs") != inputs:
        return ["its code, variables, plan or host facts changed since the last converge"]
    if max_age_s and now - converged_at > max_age_s:
        hours = (now - converged_at) / 3600
        return [f"its last converge was {hours:.1f} h ago (more than {max_age_s / 3600:g} h)"]
    return differences(record, runner)


def main() -> None:
    module = AnsibleModule(
        argument_spec={
            "inputs": {"type": "dict", "required": True},
            "max_age_s": {"type": "int", "default": 86400},
            "dir": {"type": "path", "default": "/var/lib/cluster-plan/manifest"},
        },
        supports_check_mode=True,
    )
    now = time.time()
    roles = {}
    for role, inputs in sorted(module.params["inputs"].items()):
        reasons = role_holds(
            role, str(inputs or ""), module.params["max_age_s"], module.params["dir"], run, now
        )
        roles[role] = {"converged": not reasons, "reasons": reasons}
    module.exit_json(
        changed=False,
        converged=all(result["converged"] for result in roles.values()),
        roles=roles,
    )


if __name__ == "__main__":
    main()
