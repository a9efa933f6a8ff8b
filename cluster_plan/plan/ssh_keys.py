"""authorized_keys lines, read as sshd reads them: options, key type, base64 blob, comment.

Pure functions: `key_problem` says what sshd would refuse in a line (or None), so validate
can name the mistake before a user finds they cannot log in, or, worse, that a newline in a
key added a line of its own.
"""

from __future__ import annotations

import binascii
import re

KEY_TYPES = (
    "ssh-ed25519",
    "ssh-rsa",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "sk-ssh-ed25519@openssh.com",
    "sk-ecdsa-sha2-nistp256@openssh.com",
)
# the options sshd(8) documents under AUTHORIZED_KEYS FILE FORMAT; an unknown one makes sshd
# ignore the whole line
FLAG_OPTIONS = frozenset(
    {
        "agent-forwarding",
        "cert-authority",
        "no-agent-forwarding",
        "no-port-forwarding",
        "no-pty",
        "no-user-rc",
        "no-x11-forwarding",
        "port-forwarding",
        "pty",
        "no-touch-required",
        "verify-required",
        "restrict",
        "user-rc",
        "x11-forwarding",
    }
)
VALUE_OPTIONS = frozenset(
    {
        "command",
        "environment",
        "expiry-time",
        "from",
        "permitlisten",
        "permitopen",
        "principals",
        "tunnel",
    }
)
_OPTION_NAME = re.compile(r"[A-Za-z0-9-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# a word like these is a key type (ssh-dss, ssh-ed448), not an option, even where unknown
_LOOKS_LIKE_TYPE = re.compile(r"^(ssh|ecdsa|sk)-[^=,]*$")


def _quoted_end(line: str, start: int) -> int:
    """Index just past the closing quote of the string opening at line[start], -1 if none.
    Inside, sshd takes a backslash-escaped quote as part of the value."""
    at = start + 1
    while at < len(line):
        if line[at] == "\\" and at + 1 < len(line) and line[at + 1] == '"':
            at += 2
        elif line[at] == '"':
            return at + 1
        else:
            at += 1
    return -1


def split_options(line: str) -> tuple[list[str], str] | str:
    """(option names, the rest of the line) of a line that starts with options, or what is
    wrong with them."""
    names: list[str] = []
    at = 0
    while True:
        match = _OPTION_NAME.match(line, at)
        if not match:
            return f"an option name is expected at character {at + 1}"
        name = match.group().lower()
        at = match.end()
        if line.startswith("=", at):
            if name not in VALUE_OPTIONS:
                return (
                    f"option {name!r} takes no value"
                    if name in FLAG_OPTIONS
                    else (f"unknown option {name!r}")
                )
            if not line.startswith('"', at + 1):
                return f"the value of option {name!r} must be in double quotes"
            end = _quoted_end(line, at + 1)
            if end < 0:
                return f"the value of option {name!r} has no closing quote"
            at = end
        elif name not in FLAG_OPTIONS:
            return (
                f"option {name!r} needs a value"
                if name in VALUE_OPTIONS
                else (f"unknown option {name!r}")
            )
        names.append(name)
        if line.startswith(",", at):
            at += 1
        elif line.startswith(" ", at):
            return names, line[at:].lstrip(" ")
        else:
            return "the options are not followed by a key"


def _blob_strings(blob: bytes) -> list[bytes] | None:
    """The length-prefixed strings a public key blob is made of, None if it is not one."""
    strings = []
    at = 0
    while at < len(blob):
        if at + 4 > len(blob):
            return None
        size = int.from_bytes(blob[at : at + 4], "big")
        if at + 4 + size > len(blob):
            return None
        strings.append(blob[at + 4 : at + 4 + size])
        at += 4 + size
    return strings


def blob_problem(key_type: str, encoded: str) -> str | None:
    """What is wrong with a key's base64 blob, None if it decodes to a key of its type."""
    try:
        blob = binascii.a2b_base64(encoded, strict_mode=True)
    except (binascii.Error, ValueError):
        return "its key is not valid base64 (cut short or mistyped when copied?)"
    strings = _blob_strings(blob)
    if not strings:
        return "its key does not decode to an SSH public key (cut short when copied?)"
    embedded = strings[0].decode("ascii", "replace")
    if embedded != key_type:
        return f"the key says it is {key_type} but its data is a {embedded} key"
    if key_type == "ssh-ed25519" and (len(strings) != 2 or len(strings[1]) != 32):
        return "its ed25519 key is not 32 bytes (cut short when copied?)"
    return None


def key_problem(line: str) -> str | None:
    """What sshd would refuse in one authorized_keys line, None when it is a sound key."""
    if _CONTROL.search(line):
        return "it contains a newline or another control character"
    rest = line.strip(" ")
    if not rest:
        return "it is empty"
    first = rest.split(" ", 1)[0]
    if first not in KEY_TYPES and not _LOOKS_LIKE_TYPE.match(first):
        split = split_options(rest)
        if isinstance(split, str):
            return f"{split} (a key line is: [options] type key [comment])"
        rest = split[1]
    parts = rest.split(" ", 2)
    if parts[0] not in KEY_TYPES:
        return f"unknown key type {parts[0][:40]!r} (known: {', '.join(KEY_TYPES)})"
    if len(parts) < 2 or not parts[1]:
        return "the key itself is missing after its type"
    return blob_problem(parts[0], parts[1])
