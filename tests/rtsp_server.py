#!/usr/bin/python3
"""A test RTSP server: serves every ``*.mp4`` of a directory on 127.0.0.1.

Run it with Debian's system Python (``/usr/bin/python3``), which has ``gi``; the project's
virtualenv does not. ``tests/rtsp.py`` wraps it for the tests.

Each clip ``DIR/NAME.mp4`` is served at ``rtsp://127.0.0.1:PORT/NAME`` as H.264 without
re-encoding. With ``--loop`` each clip starts again at its end, forever, with continuous
timestamps (the demuxed access units are re-stamped and fed through an ``appsrc``), so that
long tests never see the end of the stream. With ``--loop --stagger`` the clips do not all start
at their first frame: the mount whose name ends in the number k (else: the k-th in sorted order)
starts at the keyframe at or before ``frac(k x 0.618...)`` of its duration, so that any first N
mounts start spread evenly over the clip, as real cameras are not in step with each other.
With ``--user``/``--password`` every request needs RTSP basic authentication.

When it serves, it prints ``READY <port>`` on stdout. It exits on SIGTERM, SIGINT or when its
stdin reaches end of file (the parent died), and with ``--parent-pid`` the kernel kills it when
its parent dies even while it is frozen by SIGSTOP, so it never outlives the test that started
it.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import sys
import threading
from pathlib import Path

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstApp", "1.0")
gi.require_version("GstRtspServer", "1.0")
gi.require_version("GstRtsp", "1.0")
from gi.repository import GLib, Gst, GstApp, GstRtsp, GstRtspServer  # noqa: E402

_PLAIN = (
    "( filesrc location={path} ! qtdemux ! h264parse config-interval=-1 "
    "! rtph264pay name=pay0 pt=96 )"
)
_LOOPED = (
    "( appsrc name=src format=time is-live=false block=true max-bytes=1000000 "
    "! h264parse config-interval=-1 ! rtph264pay name=pay0 pt=96 )"
)
_READER = (
    "filesrc location={path} ! qtdemux ! h264parse "
    "! video/x-h264,stream-format=byte-stream,alignment=au ! appsink name=sink sync=false"
)
_ROLE = "user"
_GOLDEN = 0.6180339887498949  # k x this, mod 1: start points spread evenly for any k = 0..N-1


def _quote(path: Path) -> str:
    """``path`` as a double-quoted gst-launch property value."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


class _LoopFeeder:
    """Feeds one media's ``appsrc`` with a clip's access units, again and again."""

    def __init__(self, path: Path, appsrc: GstApp.AppSrc, start: float = 0.0) -> None:
        self._appsrc = appsrc
        self._start = start  # fraction of the clip at which the first pass starts
        self._reader = Gst.parse_launch(_READER.format(path=_quote(path)))
        self._sink = self._reader.get_by_name("sink")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loop-feeder", daemon=True)

    def start(self) -> None:
        if self._start > 0:
            self._reader.set_state(Gst.State.PAUSED)
            self._reader.get_state(10 * Gst.SECOND)  # prerolled: the duration is known
            ok, duration = self._reader.query_duration(Gst.Format.TIME)
            if ok and duration > 0:
                flags = Gst.SeekFlags.FLUSH | Gst.SeekFlags.KEY_UNIT
                self._reader.seek_simple(Gst.Format.TIME, flags, int(self._start * duration))
        self._reader.set_state(Gst.State.PLAYING)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._reader.set_state(Gst.State.NULL)

    def _run(self) -> None:
        offset: int | None = None  # added to the clip's timestamps; the stream starts at 0
        end = 0
        caps_set = False
        while not self._stop.is_set():
            sample = self._sink.try_pull_sample(Gst.SECOND)
            if sample is None:
                if self._sink.is_eos():
                    offset = end  # next pass starts where this one ended
                    self._reader.seek_simple(
                        Gst.Format.TIME, Gst.SeekFlags.FLUSH | Gst.SeekFlags.KEY_UNIT, 0
                    )
                continue
            if not caps_set:
                self._appsrc.set_caps(sample.get_caps())
                caps_set = True
            buf = sample.get_buffer().copy()
            if offset is None:  # the first pass may start mid-clip (--stagger)
                offset = -(buf.dts if buf.dts != Gst.CLOCK_TIME_NONE else buf.pts)
            duration = buf.duration if buf.duration != Gst.CLOCK_TIME_NONE else Gst.SECOND // 25
            buf.pts = offset + buf.pts
            buf.dts = buf.pts if buf.dts == Gst.CLOCK_TIME_NONE else offset + buf.dts
            end = max(end, buf.pts + duration)
            if self._appsrc.push_buffer(buf) != Gst.FlowReturn.OK:
                return  # the media was shut down (flushing)


class LoopingFactory(GstRtspServer.RTSPMediaFactory):
    """Media factory whose clip loops forever."""

    def __init__(self, path: Path, start: float = 0.0) -> None:
        super().__init__()
        self._path = path
        self._start = start
        self.set_launch(_LOOPED)
        self.connect("media-configure", self._on_configure)

    def _on_configure(self, _factory: object, media: GstRtspServer.RTSPMedia) -> None:
        appsrc = media.get_element().get_by_name("src")
        feeder = _LoopFeeder(self._path, appsrc, self._start)
        media.connect("unprepared", lambda *_: feeder.stop())
        feeder.start()


def _start_points(clips: list[Path]) -> dict[Path, float]:
    """``--stagger``: where each clip's first pass starts, as a fraction of its duration."""
    out = {}
    for k, clip in enumerate(clips):
        digits = re.search(r"(\d+)$", clip.stem)
        index = int(digits.group(1)) if digits else k
        out[clip] = (index * _GOLDEN) % 1.0
    return out


def _make_factory(
    path: Path, loop: bool, auth: bool, start: float = 0.0
) -> GstRtspServer.RTSPMediaFactory:
    if loop:
        factory: GstRtspServer.RTSPMediaFactory = LoopingFactory(path, start)
    else:
        factory = GstRtspServer.RTSPMediaFactory()
        factory.set_launch(_PLAIN.format(path=_quote(path)))
    factory.set_shared(True)
    if auth:
        permissions = GstRtspServer.RTSPPermissions()
        permissions.add_permission_for_role(_ROLE, "media.factory.access", True)
        permissions.add_permission_for_role(_ROLE, "media.factory.construct", True)
        factory.set_permissions(permissions)
    return factory


def _make_auth(user: str, password: str, digest: bool) -> GstRtspServer.RTSPAuth:
    auth = GstRtspServer.RTSPAuth()
    token = GstRtspServer.RTSPToken()
    token.set_string("media.factory.role", _ROLE)
    if digest:
        auth.add_digest(user, password, token)
        auth.set_supported_methods(GstRtsp.RTSPAuthMethod.DIGEST)
    else:
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(user, password), token)
    return auth


def _die_with_parent(parent_pid: int) -> None:
    """SIGKILL us when the parent dies (Linux), even while we are stopped by SIGSTOP."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # not Linux: the stdin watch still ends us, unless frozen
    if os.getppid() != parent_pid:
        sys.exit(1)  # the parent died before prctl took effect


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--videos", type=Path, required=True, help="directory of *.mp4 clips")
    parser.add_argument("--user", help="require RTSP basic auth with this user")
    parser.add_argument("--password", help="password for --user")
    parser.add_argument("--digest", action="store_true", help="digest instead of basic auth")
    parser.add_argument("--loop", action="store_true", help="each clip loops forever")
    parser.add_argument(
        "--stagger", action="store_true", help="with --loop: clips start at different points"
    )
    parser.add_argument("--parent-pid", type=int, help="exit when this process (our parent) dies")
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        _die_with_parent(args.parent_pid)
    if (args.user is None) != (args.password is None):
        parser.error("--user and --password go together")

    Gst.init(None)
    clips = sorted(args.videos.glob("*.mp4"))
    if not clips:
        parser.error(f"no *.mp4 in {args.videos}")
    server = GstRtspServer.RTSPServer()
    server.set_address("127.0.0.1")
    server.set_service(str(args.port))
    # one thread per client (the default pool has one thread: clients queue behind a slow one)
    server.get_thread_pool().set_max_threads(64)
    auth = args.user is not None
    if auth:
        server.set_auth(_make_auth(args.user, args.password, args.digest))
    mounts = server.get_mount_points()
    starts = _start_points(clips) if args.stagger else {}
    for clip in clips:
        factory = _make_factory(clip.resolve(), args.loop, auth, starts.get(clip, 0.0))
        mounts.add_factory(f"/{clip.stem}", factory)

    loop = GLib.MainLoop()
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{args.port}", file=sys.stderr)
        return 1
    for signum in (signal.SIGTERM, signal.SIGINT):
        GLib.unix_signal_add(GLib.PRIORITY_HIGH, signum, loop.quit)
    # The parent holds our stdin open; end of file means it is gone.
    GLib.io_add_watch(
        GLib.IOChannel.unix_new(sys.stdin.fileno()),
        GLib.PRIORITY_DEFAULT,
        GLib.IOCondition.IN | GLib.IOCondition.HUP | GLib.IOCondition.ERR,
        lambda *_: _stdin_closed(loop),
    )
    print(f"READY {server.get_bound_port()}", flush=True)
    loop.run()
    return 0


def _stdin_closed(loop: GLib.MainLoop) -> bool:
    if not sys.stdin.buffer.read1(4096):
        loop.quit()
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
