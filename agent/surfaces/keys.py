"""API keys: compared as UTF-8 bytes in constant time, so any Unicode key works and no other key matches it."""

from __future__ import annotations

import hashlib
import hmac


def key_matches(given: bytes, key: str | None) -> bool:
    """Whether ``given`` (raw header or form bytes) is ``key``; no key configured: anything matches."""
    if not key:
        return True
    return hmac.compare_digest(given, key.encode("utf-8"))


def login_token(key: str) -> str:
    """What a browser's login cookie holds: derived from the key, so the key itself is never stored or echoed."""
    return hmac.new(key.encode("utf-8"), b"ambigqa-login-cookie", hashlib.sha256).hexdigest()
