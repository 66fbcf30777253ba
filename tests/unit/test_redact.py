"""Credentials never survive redaction, whatever their shape."""

from __future__ import annotations

import logging

import pytest

from vidpipe import redact


@pytest.mark.parametrize(
    ("text", "secret", "kept"),
    [
        ("rtsp://user:pass1234@host/x", "pass1234", "rtsp://user:***@host/x"),
        (
            "rtsp://first.last:pw-xyz@10.0.0.1:554/s",
            "pw-xyz",
            "rtsp://first.last:***@10.0.0.1:554/s",
        ),
        ("rtsp://a%40b.c:pw-enc@cam:554/s", "pw-enc", "rtsp://a%40b.c:***@cam:554/s"),
        ("rtsp://u:p@ss@word@cam/s", "p@ss@word", "rtsp://u:***@cam/s"),
        ("rtsp://u:with space@cam/s", "with space", "rtsp://u:***@cam/s"),
        ("rtsp://u:co:lon@cam/s", "co:lon", "rtsp://u:***@cam/s"),
        (
            "open failed for rtsps://u:Zz9-pw@cam:322/s (timeout)",
            "Zz9-pw",
            "rtsps://u:***@cam:322/s",
        ),
        ("[rtsp @ 0x55] 'rtsp://u:tiny@cam'", "tiny", "rtsp://u:***@cam'"),
    ],
)
def test_redact_url(text: str, secret: str, kept: str) -> None:
    out = redact.redact_text(text)
    assert secret not in out
    assert kept in out


def test_registered_secret_masked_outside_urls() -> None:
    redact.register_secret("Reg1stered P@ss")
    out = redact.redact_text("password Reg1stered P@ss and Reg1stered%20P%40ss leaked")
    assert "Reg1stered" not in out


def test_log_filter_masks_args_and_exceptions(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("test.redact")
    handler = caplog.handler
    handler.addFilter(redact.RedactingFilter())
    try:
        try:
            raise RuntimeError("cannot open rtsp://u:Exc-Secret-1@cam/s")
        except RuntimeError:
            logger.exception("camera %s failed", "rtsp://u:Arg-Secret-2@cam/s")
    finally:
        handler.removeFilter(handler.filters[-1])
    text = caplog.text
    assert "Arg-Secret-2" not in text
    assert "Exc-Secret-1" not in text
    assert "rtsp://u:***@cam/s" in text


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("rtsp://ops@corp:Raw-At-User-1@10.0.0.1:554/s", "Raw-At-User-1"),  # FFmpeg: last '@'
        ("rtsp://a.b@c.d:P@ss w:rd@h/x", "P@ss w:rd"),
        ("rtsp://first.last:Dot-User-2@h/x", "Dot-User-2"),
        ("rtsp://ops%40corp:Enc-User-3@h/x", "Enc-User-3"),
        ("rtsp://u:Enc%20Pw%40%3A4@h:554/x", "Enc%20Pw%40%3A4"),
        ("RTSPS://u:Upper-Scheme-5@h/x", "Upper-Scheme-5"),
        ("rtsp://u:Query?Hash#6@h/x", "Query?Hash#6"),
        ("rtsp://:Only-Pw-7@h/x", "Only-Pw-7"),
    ],
)
def test_url_password_tricky_forms(url: str, password: str) -> None:
    """The password the config loader registers is the whole password, in every form."""
    assert redact.url_password(url) == password
    out = redact.redact_text(f"cannot open {url}: 401 Unauthorized")
    assert password not in out
    assert ":***@" in out


@pytest.mark.parametrize(
    "text",
    [
        "rtsp://user@host:554/path",  # no password: nothing to mask
        "see rtsp://cam@host:554/x, mail user@example.com: hi",
        "plain text with a: colon and an @ sign",
    ],
)
def test_no_password_nothing_masked(text: str) -> None:
    assert redact.redact_text(text) == text
    assert redact.url_password(text) is None


def test_registered_percent_encoded_secret_masks_decoded_form() -> None:
    """A password written encoded in the config is also masked where a library decoded it."""
    redact.register_secret("Enc%20Canary%40%3A9")
    out = redact.redact_text("auth for 'Enc Canary@:9' failed; Enc%20Canary%40%3A9")
    assert "Enc Canary@:9" not in out and "Enc%20Canary" not in out
