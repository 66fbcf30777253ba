"""Keep camera credentials out of every text the daemon writes.

Two layers:

* ``redact_text`` rewrites any ``scheme://user:password@host`` it finds to
  ``scheme://user:***@host``. Passwords may contain ``@``, ``:`` or spaces: the userinfo ends
  at the *last* ``@`` before the host part.
* Secrets registered with ``register_secret`` (every password taken from the config, also in
  its percent-encoded and decoded forms) are replaced wherever they appear, even outside a URL.

``install_log_filter`` applies both to every log record. FFmpeg's own messages arrive as log
records too (``vidpipe.capture.ffmpeg_log``), already passed through ``redact_text``.
"""

from __future__ import annotations

import logging
import re
import threading
import traceback
import urllib.parse

MASK = "***"

# scheme://user:password@host... ; the password runs greedily to the last '@' before the
# path (so it may contain '@', ':' and spaces). The user may hold a raw '@' too
# ("ops@corp:pw@cam": FFmpeg splits at the last '@'), so the user ends at the first ':'.
# In free text this may over-mask, never under.
_URL_CRED = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s:/]*):(?P<pw>[^/\n]*)"
    r"@(?P<host>[^@\s/\"'<>]+)(?=[/\s\"'<>?#]|$)"
)
_MIN_SECRET_LEN = 4  # shorter strings would mangle unrelated text; URLs are masked anyway

_lock = threading.Lock()
_secrets: set[str] = set()
_secret_re: re.Pattern[str] | None = None


def register_secret(secret: str) -> None:
    """Remember a secret so it is masked wherever it appears (also URL-encoded forms)."""
    if not secret or secret == MASK:
        return
    forms = {secret, urllib.parse.quote(secret, safe=""), urllib.parse.unquote(secret)}
    global _secret_re
    with _lock:
        _secrets.update(f for f in forms if len(f) >= _MIN_SECRET_LEN)
        if not _secrets:
            return
        ordered = sorted(_secrets, key=len, reverse=True)
        _secret_re = re.compile("|".join(re.escape(s) for s in ordered))


def url_password(url: str) -> str | None:
    """The password part of a URL's userinfo, or None."""
    m = _URL_CRED.search(url)
    return m.group("pw") if m else None


def redact_text(text: str) -> str:
    """Mask URL passwords and every registered secret in ``text``."""
    if "://" in text:
        text = _URL_CRED.sub(lambda m: f"{m['scheme']}{m['user']}:{MASK}@{m['host']}", text)
    pattern = _secret_re
    if pattern is not None:
        text = pattern.sub(MASK, text)
    return text


class RedactingFilter(logging.Filter):
    """Logging filter that masks credentials in the formatted message and exception text."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        record.msg = redact_text(msg)
        record.args = None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = redact_text("".join(traceback.format_exception(*record.exc_info)))
            record.exc_info = None
        return True


def install_log_filter(logger: logging.Logger | None = None) -> None:
    """Attach the redacting filter to every handler of ``logger`` (root by default)."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
