"""Ansible plumbing: the expanded plan kept per process, and the roles' generated READMEs."""
