"""The plan's storage as the Ceph and NFS roles apply it: `ceph` (networks, monitors, OSD
disks, the CRUSH tree and rules, pools, the CephFS and its clients), `nfs` (the exports
NFS-Ganesha serves and who mounts them) and `mounts` (systemd's names for mount points);
and `ceph_commands`, the questions asked of a running Ceph and the reading of its answers.

Pure functions over the plain dicts the inventory plugin gives every host (the `cluster_plan`
group variable and `plan_host`); plugins/filter/ceph_plan.py and nfs_plan.py only adapt them.
"""
