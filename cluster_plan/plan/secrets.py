"""Secrets a plan may hold, kept out of what validate prints: the userinfo of a URL
(`user:password@`) and the values of fields the schema marks `writeOnly` (a webhook URL
carries its token). A finding that quotes one, or points at its line, shows `***` instead;
a CI log of a refused plan must not print the password it refused."""

from __future__ import annotations

from collections.abc import Iterable

MASK = "***"
_AUTHORITY_ENDS = frozenset("/'\"")
_SHORTEST = 4  # a shorter secret would mask ordinary words too
_CUT = 16  # messages quote a long value cut short (40 or 60 characters): its start is masked


def mask_userinfo(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced by ***: what runs from a '://'
    to the last '@' before the path, a space or a quote (a password may hold an '@'). In
    one pass: a long value in a message must not cost more than its length."""
    if "://" not in text:
        return text
    first, *rest = text.split("://")
    out = [first]
    for part in rest:
        end = next((i for i, c in enumerate(part) if c in _AUTHORITY_ENDS or c.isspace()), None)
        at = part.rfind("@", 0, len(part) if end is None else end)
        out.append(part if at < 0 else MASK + part[at:])
    return "://".join(out)


def mask(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without URL userinfo and without any of ``secrets`` (longest first), nor the
    start of one that a message quotes cut short (its first _CUT characters or more)."""
    for secret in sorted((s for s in secrets if len(s) >= _SHORTEST), key=len, reverse=True):
        text = text.replace(_longest_start(secret, text), MASK)
    return mask_userinfo(text)


def _longest_start(secret: str, text: str) -> str:
    """The secret, or its longest start of _CUT characters or more that ``text`` holds (a
    start held implies every shorter one is: a binary search), or the secret when none is."""
    if secret in text or len(secret) < _CUT or secret[:_CUT] not in text:
        return secret
    low, high = _CUT, len(secret) - 1  # secret[:low] is in text, secret[:high + 1] is not
    while low < high:
        middle = (low + high + 1) // 2
        if secret[:middle] in text:
            low = middle
        else:
            high = middle - 1
    return secret[:low]
