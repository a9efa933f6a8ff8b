"""Secrets a plan may hold, kept out of what validate prints: the userinfo of a URL
(`user:password@`) and the values of fields the schema marks `writeOnly` (a webhook URL
carries its token). A finding that quotes one, or points at its line, shows `***` instead;
a CI log of a refused plan must not print the password it refused."""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "***"
# scheme://userinfo@ : the userinfo runs to the last '@' before the path (a password may hold
# an '@'); an '@' after the first '/' of the path is no userinfo
_USERINFO = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s'\"@]*(?:@[^/\s'\"@]*)*@")
_SHORTEST = 4  # a shorter secret would mask ordinary words too
_CUT = 16  # messages quote a long value cut short (40 or 60 characters): its start is masked


def mask_userinfo(text: str) -> str:
    """``text`` with the userinfo of every URL in it replaced by ***."""
    return _USERINFO.sub(rf"\g<1>{MASK}@", text)


def mask(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without URL userinfo and without any of ``secrets`` (longest first), nor the
    start of one that a message quotes cut short (its first _CUT characters or more)."""
    for secret in sorted((s for s in secrets if len(s) >= _SHORTEST), key=len, reverse=True):
        shown = next(
            (secret[:n] for n in range(len(secret), _CUT - 1, -1) if secret[:n] in text), secret
        )
        text = text.replace(shown, MASK)
    return mask_userinfo(text)
