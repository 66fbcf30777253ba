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
