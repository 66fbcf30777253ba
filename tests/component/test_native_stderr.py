"""fd 2 and fd 1 of native libraries through the redacting reader
(vidpipe.capture.native_stderr).

Each test runs a child Python process whose "native library" writes to file descriptor 2 or
1 with libc's ``write`` (through ctypes, below Python's ``sys.stderr`` and ``sys.stdout``),
exactly as PyNvVideoCodec's C++ code does. The child's real stdout and stderr are pipes read
here, so what reaches the terminal or the journal is checked as bytes, out of reach of
pytest's own capture.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)

PASSWORD = "s3cr3t-Pa55"
URL = f"rtsp://admin:{PASSWORD}@10.1.2.3:554/stream1"

PRELUDE = f"""
import ctypes, logging, os, sys
from vidpipe.capture import native_stderr

libc = ctypes.CDLL(None, use_errno=True)

def c_write(text, fd=2):
    data = text.encode()
    assert libc.write(fd, data, len(data)) == len(data)

# No redacting filter on the handler (the daemon has one): the reader must mask by itself.
logging.basicConfig(
    level=logging.DEBUG, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
)
URL = {URL!r}
"""


def run_child(body: str) -> tuple[str, str]:
    """(stdout, stderr) of a child running PRELUDE + body; fails on a non-zero exit."""
    code = PRELUDE + textwrap.dedent(body)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=50, check=False
    )
    assert done.returncode == 0, f"child failed ({done.returncode}):\n{done.stderr}"
    return done.stdout, done.stderr


def test_native_lines_are_redacted_attributed_and_logged() -> None:
    _, err = run_child(
        """
        native_stderr.attribute_camera("gate", URL)
        native_stderr.attribute_camera("yard", "/clips/yard.mp4")
        native_stderr.install()
        c_write("[ERROR][18:53:56] General error -1094995529 at line 1337 in file "
                "/project/src/VideoCodecSDKUtils/helper_classes/Utils/FFmpegDemuxer.h\\n")
        c_write(f"[rtsp @ 0x55d0c2a8e1c0] method DESCRIBE failed: 401 {URL}\\n")
        c_write("[h264 @ 0x55d0c2a8e1c0] error in /clips/yard.mp4\\n[INFO] opened\\n")
        native_stderr.attribute_camera("dock", "rtsp://ops:pw@dock.example/live")
        c_write("[rtsp @ 0x55d0c2a8e1c0] rtsp://dock.example/live: Connection refused\\n")
        c_write("some other library says hello\\n")
        logging.getLogger("vidpipe.test").warning("python side")
        native_stderr.uninstall()
        """
    )
    assert PASSWORD not in err, err
    lines = err.splitlines()
    native = [ln for ln in lines if "vidpipe.capture.native" in ln]
    assert len(native) == 6, err
    assert (
        "WARNING" in native[0]
        and "camera ?: [nvdec] [ERROR][18:53:56] General error" in (native[0])
    )
    assert (
        "camera gate: [nvdec] [rtsp @ 0x55d0c2a8e1c0] method DESCRIBE failed: 401 " in (native[1])
    )
    assert "rtsp://admin:***@10.1.2.3:554/stream1" in native[1]
    assert "camera yard: [nvdec] [h264 @" in native[2]
    assert "INFO" in native[3] and "[nvdec] [INFO] opened" in native[3]
    assert "camera dock: [nvdec] [rtsp @ 0x55d0c2a8e1c0] rtsp://dock.example/live" in native[4]
    assert "camera ?: [native] some other library says hello" in native[5]
    # Python's own logging still reaches the real stderr, once, not through the pipe.
    python_side = [ln for ln in lines if "python side" in ln]
    assert python_side == ["WARNING vidpipe.test python side"], err
    # Nothing reached the real fd 2 unlogged: every line is a log record of the handler.
    assert all(ln.split(" ")[1].startswith("vidpipe.") for ln in lines), err


def test_one_camera_gets_every_nvdec_line_and_a_flood_is_limited() -> None:
    _, err = run_child(
        """
        native_stderr.attribute_camera("only", URL)
        native_stderr.install()
        for i in range(500):
            c_write(f"Decode Error occurred for picture {i}\\n")
        native_stderr.uninstall()
        """
    )
    assert PASSWORD not in err
    passed = [ln for ln in err.splitlines() if "Decode Error occurred" in ln]
    assert 1 <= len(passed) <= 5, err
    assert all("camera only: [native] Decode Error" in ln for ln in passed), err


def test_python_stderr_and_handlers_move_to_the_original_fd() -> None:
    out, err = run_child(
        """
        before = os.readlink("/proc/self/fd/2")
        handler = logging.getLogger().handlers[0]
        native_stderr.install()
        assert sys.stderr.fileno() != 2 and handler.stream is sys.stderr
        print("stderr print", file=sys.stderr, flush=True)
        c_write("raw line\\n")
        native_stderr.uninstall()
        assert os.readlink("/proc/self/fd/2") == before and sys.stderr.fileno() == 2
        c_write("after uninstall\\n")
        print(os.readlink(f"/proc/self/fd/{handler.stream.fileno()}") == before)
        """
    )
    assert out.strip() == "True"
    lines = err.splitlines()
    assert "stderr print" in lines, err  # straight through, not re-logged as native
    assert any("camera ?: [native] raw line" in ln for ln in lines), err
    assert "after uninstall" in lines, err  # fd 2 is the real stderr again


def test_fd2_taken_over_by_someone_else_is_left_to_them() -> None:
    """A test runner's capture (or any code) that sets fd 2 after ``install`` ends the pipe;
    ``uninstall`` then leaves fd 2 alone, and ``install`` sets the reader up again."""
    out, err = run_child(
        """
        import tempfile, time
        native_stderr.install()
        other = tempfile.TemporaryFile()
        os.dup2(other.fileno(), 2)  # the pipe's last write end is gone: the reader stops
        deadline = time.monotonic() + 10
        while native_stderr.installed() and time.monotonic() < deadline:
            time.sleep(0.01)
        print(native_stderr.installed())
        native_stderr.uninstall()
        c_write("into the other file\\n")
        other.seek(0)
        print(other.read().decode().strip())
        native_stderr.install()  # over the other file, which is fd 2 now
        print(native_stderr.installed())
        c_write(f"again {URL}\\n")
        native_stderr.uninstall()
        other.seek(0)
        print(other.read().decode().strip().splitlines()[-1])
        """
    )
    lines = out.splitlines()
    assert lines[:3] == ["False", "into the other file", "True"], out
    assert lines[3].endswith("camera ?: [native] again rtsp://admin:***@10.1.2.3:554/stream1")
    assert PASSWORD not in out + err


def test_long_lines_are_cut_at_a_space_and_never_split_a_url() -> None:
    _, err = run_child(
        """
        native_stderr.install()
        filler = "x " * (native_stderr.MAX_LINE_BYTES // 2 - 20)
        c_write(filler + URL + " tail " * 2000 + "\\n")
        c_write("next line\\n")
        native_stderr.uninstall()
        """
    )
    assert PASSWORD not in err and "admin:" not in err.replace("admin:***", ""), err
    assert "[line truncated]" in err and "next line" in err, err


def test_nothing_is_installed_without_nvdec() -> None:
    out, _ = run_child(
        """
        before = os.readlink("/proc/self/fd/2")
        import vidpipe.assemble, vidpipe.capture.nvdec_source
        from vidpipe.capture.nvdec import load_codec, NvdecError
        sys.modules["PyNvVideoCodec"] = None  # absent, as on CPU CI
        try:
            load_codec()
        except NvdecError:
            pass
        print(native_stderr.installed(), os.readlink("/proc/self/fd/2") == before)
        """
    )
    assert out.split() == ["False", "True"]


def test_loading_pynvvideocodec_installs_the_reader_fake_nvdec(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A stand-in PyNvVideoCodec (a module that writes to fd 2 from C when its demuxer
    opens) loaded by the real ``load_codec`` and read through ``NvdecSource``."""
    fake = tmp_path / "PyNvVideoCodec.py"
    fake.write_text(
        textwrap.dedent(
            """
            import ctypes
            _libc = ctypes.CDLL(None)

            def CreateDemuxer(filename):
                line = f"[ERROR] cannot open {filename}: 401\\n".encode()
                _libc.write(2, line, len(line))
                raise RuntimeError("demuxer failed")
            """
        )
    )
    _, err = run_child(
        f"""
        sys.path.insert(0, {str(tmp_path)!r})
        from vidpipe.capture.nvdec_source import NvdecSource
        from vidpipe.capture.source import SourceError
        from vidpipe.config import CameraConfig, CaptureConfig
        cam = CameraConfig(name="door", url=URL, decoder="nvdec")
        import contextlib, types
        no_cuda = types.SimpleNamespace(
            context=None, handle=None, current=contextlib.nullcontext, own_copy=lambda s: (s, None)
        )
        src = NvdecSource(cam, CaptureConfig(), cuda=lambda gpu: no_cuda)  # no GPU here
        try:
            src.open()
        except SourceError as exc:
            print("source error:", exc, file=sys.stderr)
        src.close()
        assert native_stderr.installed()
        native_stderr.uninstall()
        """
    )
    assert PASSWORD not in err, err
    assert "camera door: [nvdec] [ERROR] cannot open rtsp://admin:***@10.1.2.3" in err, err
    assert "source error:" in err


SDK_LINE = f"[ERROR][18:53:56] General error -1094995529 at line 1337 in file {URL}"


def fake_pynvvideocodec(where: Path) -> str:
    """The directory of a stand-in PyNvVideoCodec that imports (CPU CI has none):
    ``load_codec`` succeeds and installs the reader; the GPU check after it then fails (no
    PyTorch or no CUDA here)."""
    (where / "PyNvVideoCodec.py").write_text("# a stand-in: importing it is all it does\n")
    return str(where)


def test_the_daemon_routes_stdout_and_python_prints_still_reach_it_fake_nvdec(
    tmp_path: Path,
) -> None:
    """``vidpipe.daemon.run`` with an nvdec camera loads PyNvVideoCodec (a stand-in) at
    start-up: from then on what C code writes to fd 1, as PyNvVideoCodec 2.2.4 prints its
    own error lines, is logged redacted on stderr, while Python's prints reach stdout."""
    out, err = run_child(
        f"""
        sys.path.insert(0, {fake_pynvvideocodec(tmp_path)!r})
        from vidpipe.config import Config, ConfigError
        from vidpipe.daemon import run
        from vidpipe.infer.base import BackendError

        before = os.readlink("/proc/self/fd/1")
        cfg = Config.model_validate({{
            "model": {{"path": "m.onnx"}},
            "inference": {{"type": "torch"}},
            "cameras": [{{"name": "door", "url": URL, "decoder": "nvdec"}}],
        }})
        try:
            run(cfg)  # fails after the nvdec check has loaded the library: no GPU here
        except (ConfigError, BackendError) as exc:
            logging.getLogger("vidpipe.test").warning("start-up refused: %s", exc)
        assert os.readlink("/proc/self/fd/1") != before, "fd 1 is not routed"
        c_write({SDK_LINE!r} + "\\n", fd=1)
        print("result line")
        c_write("Decode Error occurred for picture 171\\n", fd=1)
        sys.stdout.write("second result line\\n")
        """
    )
    assert PASSWORD not in out and PASSWORD not in err, out + err
    assert out == "result line\nsecond result line\n", out
    native = [ln for ln in err.splitlines() if ln.startswith("WARNING vidpipe.capture.native")]
    assert len(native) == 2, err
    assert "camera ?: [nvdec] [ERROR][18:53:56] General error" in native[0], err
    assert "rtsp://admin:***@10.1.2.3:554/stream1" in native[0], err
    assert native[1].endswith("camera ?: [native] Decode Error occurred for picture 171"), err
    assert "start-up refused" in err, err


def test_a_command_that_prints_results_keeps_fd1_fake_nvdec(tmp_path: Path) -> None:
    """``vidpipe check`` loads PyNvVideoCodec (a stand-in) for an nvdec camera but never opts
    in: fd 2 is routed, fd 1 stays the process's own stdout."""
    config = tmp_path / "config.yaml"
    config.write_text(
        json.dumps(
            {
                "model": {"path": "m.onnx"},
                "inference": {"type": "torch"},
                "cameras": [{"name": "door", "url": URL, "decoder": "nvdec"}],
            }
        )
    )
    out, err = run_child(
        f"""
        sys.path.insert(0, {fake_pynvvideocodec(tmp_path)!r})
        from vidpipe.cli import main
        before = os.readlink("/proc/self/fd/1")
        code = main(["check", "--config", {str(config)!r}])
        c_write("raw library line\\n", fd=1)
        print(code, native_stderr.installed(2), native_stderr.installed(1),
              os.readlink("/proc/self/fd/1") == before)
        """
    )
    assert out.splitlines() == ["raw library line", "2 True False True"], out + err
    assert "camera 'door' decodes with nvdec" in err, err


def test_routed_stdout_moves_its_handlers_and_is_given_back() -> None:
    """``route_stdout`` after ``install`` routes fd 1 at once; a log handler on stdout moves
    to the original fd 1 (no loop through the pipe); ``uninstall`` gives fd 1 back."""
    out, err = run_child(
        """
        before = os.readlink("/proc/self/fd/1")
        to_stdout = logging.StreamHandler(sys.stdout)
        to_stdout.setFormatter(logging.Formatter("OUT %(name)s %(message)s"))
        logging.getLogger("vidpipe.test").addHandler(to_stdout)
        native_stderr.install()
        assert not native_stderr.installed(1)
        native_stderr.route_stdout()
        assert native_stderr.installed(1) and to_stdout.stream is sys.stdout
        assert sys.stdout.fileno() != 1
        logging.getLogger("vidpipe.test").warning("python side")
        c_write(f"[rtsp @ 0x7f00] 401 {URL}\\n", fd=1)
        native_stderr.uninstall()
        assert sys.stdout.fileno() == 1 and os.readlink("/proc/self/fd/1") == before
        c_write("after uninstall\\n", fd=1)
        """
    )
    assert out.splitlines() == ["OUT vidpipe.test python side", "after uninstall"], out
    assert "camera ?: [nvdec] [rtsp @ 0x7f00] 401 rtsp://admin:***@10.1.2.3" in err, err
    assert PASSWORD not in out + err


@pytest.mark.parametrize(
    ("line", "origin", "level"),
    [
        ("[ERROR][18:53:56] General error -1094995529 at line 1337", "nvdec", "WARNING"),
        ("[FATAL] cuvidCreateDecoder failed", "nvdec", "ERROR"),
        ("[WARN] odd packet", "nvdec", "WARNING"),
        ("[INFO] Using NVENC 13.0", "nvdec", "INFO"),
        ("[TRACE] packet 12", "nvdec", "DEBUG"),
        ("[h264 @ 0x55d0c2a8e1c0] error while decoding MB 3 4", "nvdec", "WARNING"),
        ("[rtsp @ 0x7f00] method DESCRIBE failed: 401 Unauthorized", "nvdec", "WARNING"),
        ("Decode Error occurred for picture 171", "native", "WARNING"),
        ("[W socket.cpp:663] [c10d] hostname", "native", "WARNING"),
    ],
)
def test_classify(line: str, origin: str, level: str) -> None:
    import logging

    from vidpipe.capture.native_stderr import classify

    assert classify(line) == (origin, logging.getLevelName(level))


@pytest.mark.parametrize(
    ("url", "forms"),
    [
        ("/clips/a.mp4", ("/clips/a.mp4",)),
        ("file:///clips/a.mp4", ("/clips/a.mp4",)),
        ("rtsp://cam/s", ("rtsp://cam/s",)),
        ("rtsp://u:p@cam:554/s?x=1", ("rtsp://u:p@cam:554/s?x=1", "rtsp://cam:554/s?x=1")),
        ("rtsp://ops@corp:p@ss w:rd@cam/s", ("rtsp://ops@corp:p@ss w:rd@cam/s", "rtsp://cam/s")),
    ],
)
def test_a_camera_is_recognised_by_its_url_with_or_without_userinfo(
    url: str, forms: tuple[str, ...]
) -> None:
    from vidpipe.capture.native_stderr import _url_forms

    assert _url_forms(url) == forms
