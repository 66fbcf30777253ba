"""The capture worker of one camera: open, read, watch, back off, reconnect.

Threads (all daemon threads, all named ``capture-<camera>...``):

* a **supervisor** that owns the state machine, the frame-age watchdog and the backoff. It
  never calls into the decoder, so it never blocks in a read;
* one **reader** per connection attempt (a "session") that opens the source (see
  ``source.Source``), reads frames, feeds the packet tap, and hands frames to the camera's
  mailbox. FFmpeg's log lines on this thread are attributed to the camera.

The supervisor watches the age of the last *timely* frame (one whose read did not run into
the read timeout), not the reads: a read that timed out is retried, and a frozen stream may
still hand out a drained frame. When no timely frame arrives for ``stall_timeout_s``
(``open_timeout + stall_timeout_s`` while opening; a source's wait for its turn to open,
``Source.wait_turn``, is not counted) the supervisor *abandons* the session
instead of waiting: it sets the session's cancel event and starts a fresh reader after the
backoff. The abandoned reader, when its call returns, sees it is stale, closes its source and
exits without emitting anything.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

from vidpipe.capture.backoff import Backoff, BackoffStep
from vidpipe.capture.decoders import CaptureContext
from vidpipe.capture.ffmpeg_log import attributed_to
from vidpipe.capture.group import group_size_of
from vidpipe.capture.group_budget import SharedShare
from vidpipe.capture.mailbox import FrameSink, OnceInARow
from vidpipe.capture.motion import MotionGate
from vidpipe.capture.numbering import FrameNumbers
from vidpipe.capture.pacing import Decimator, Pacer
from vidpipe.capture.session import (
    Outcome,
    Session,
    Undecoded,
    check_transition,
    join_threads,
    watch,
)
from vidpipe.capture.skipping import leave_undecoded
from vidpipe.capture.source import PacketTap, Picture, ReadTimeout, SourceError, as_picture
from vidpipe.capture.take_wait import TakeWait, take_wait_for
from vidpipe.capture.tap import TapSwitch
from vidpipe.config import CameraConfig, CaptureConfig
from vidpipe.metrics import CameraMetrics
from vidpipe.redact import redact_text
from vidpipe.types import CameraState, DeviceImage, Frame

log = logging.getLogger(__name__)

StateCallback = Callable[[str, CameraState], None]
#: Frame.epoch of every successful open, process-wide: a camera restarted by a reload (a new
#: worker) never repeats an epoch its predecessor used. ``next()`` on it is atomic.
_EPOCHS = itertools.count(1)


class CaptureWorker:
    """Reads one camera on its own threads and feeds its mailbox.

    Args:
        camera: the camera's config.
        defaults: timeouts, backoff and decoder settings shared by all cameras.
        mailbox: where frames go; the daemon picks its policy (``block`` for files,
            ``newest`` for streams).
        metrics: the camera's metric children.
        on_state: called as ``on_state(camera_name, state)`` on every state change, on the
            supervisor thread (STREAMING: on the reader, before the first frame is handed on);
            it must not block.
        clock: monotonic clock for frame timestamps and the watchdog.
        context: what the cameras of one pipeline share (None: a context of its own).
        phase: ``realtime`` files: ``free`` (each plays from when it opened) or ``aligned``
            (due on one clock grid of the frame period, as ``vidpipe bench --realtime`` wants).
    """

    _POLL_S = 0.05  # the shortest supervisor sleep: stall detection latency

    def __init__(
        self,
        camera: CameraConfig,
        defaults: CaptureConfig,
        mailbox: FrameSink,
        metrics: CameraMetrics,
        *,
        on_state: StateCallback | None = None,
        clock: Callable[[], float] = time.monotonic,
        context: CaptureContext | None = None,
        phase: Literal["free", "aligned"] = "free",
    ) -> None:
        self.camera = camera
        self._context = CaptureContext() if context is None else context
        self._defaults = defaults
        self._mailbox = mailbox
        self._metrics = metrics
        self._on_state = on_state
        self._clock = clock
        self._is_file = not camera.is_stream
        self._url = redact_text(camera.url)
        self._stop = threading.Event()
        self._wake = threading.Event()  # stop, or the session opened or ended
        self._state = CameraState.CONNECTING
        self._state_lock = threading.Lock()
        self._backoff = Backoff(defaults.backoff_initial_s, defaults.backoff_max_s)
        self._decimator = Decimator(camera.detect_fps)
        self._motion = MotionGate.for_camera(camera, defaults.motion, metrics)
        realtime_file = camera.realtime and not camera.is_stream
        self._pacer = Pacer(aligned=phase == "aligned") if realtime_file else None
        self._group_size = group_size_of(camera, defaults, mailbox.policy)
        self._numbers = FrameNumbers(metrics)
        self._once = OnceInARow(mailbox)  # the live mailbox's drop rule
        self._take_wait: TakeWait | None = None  # set at each open where it applies
        self._supervisor: threading.Thread | None = None
        self._threads: list[threading.Thread] = []
        self._session: Session | None = None
        self._sessions = 0
        self._reconnects = 0
        self._errors = 0
        self._last_error = ""
        self._last_backoff: BackoffStep | None = None
        self._last_frame_s: float | None = None
        self._failure: BaseException | None = None
        self._tap = TapSwitch(camera.name)

    # -- public API --------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.camera.name

    @property
    def state(self) -> CameraState:
        return self._state

    @property
    def failure(self) -> BaseException | None:
        """The unexpected exception that ended the supervisor, if any (a bug)."""
        return self._failure

    def start(self) -> None:
        """Start the supervisor thread; returns at once."""
        if self._supervisor is not None:
            raise RuntimeError(f"capture worker {self.name!r} already started")
        self._metrics.set_state(self._state)
        self._notify(self._state)
        thread = threading.Thread(target=self._run, name=f"capture-{self.name}", daemon=True)
        self._supervisor = thread
        self._threads.append(thread)
        thread.start()

    def stop(self) -> None:
        """Ask the worker to stop; returns at once (see ``join``)."""
        self._stop.set()
        self._wake.set()
        if self._supervisor is None:
            self._set_state(CameraState.STOPPED)

    def join(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for all threads, abandoned readers included.

        Returns:
            True if every thread of this worker has ended.
        """
        return join_threads(self._supervisor, self._threads, timeout_s, self.name)

    def set_packet_tap(self, tap: PacketTap | None) -> None:
        """Send this camera's demuxed packets to ``tap`` (None: stop). Takes effect at once.

        The tap sees ``on_stream`` before its first packet, and again at every reconnect or
        file pass. Without a tap no packet is copied.
        """
        self._tap.tap = tap
        session = self._session
        if session is not None and session.source is not None:
            session.source.packet_listener = self._tap.feed(session.source)

    def stats(self) -> dict[str, Any]:
        """A snapshot for status pages and logs (credentials redacted)."""
        now = self._clock()
        step = self._last_backoff
        return {
            "camera": self.name,
            "url": self._url,
            "state": self._state.value,
            "fps_in": self._numbers.fps(now),
            "frames": self._numbers.count,
            "last_frame_age_s": None if self._last_frame_s is None else now - self._last_frame_s,
            "reconnects": self._reconnects,
            "errors": self._errors,
            "last_error": self._last_error,
            "backoff_attempt": self._backoff.attempt,
            "backoff_ceiling_s": None if step is None else step.ceiling_s,
            "threads": sum(t.is_alive() for t in list(self._threads)),
            "tap_errors": self._tap.errors,
        }

    # -- supervisor --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._supervise()
        except Exception as exc:  # a bug: make it visible, never leave the camera half-alive
            self._failure = exc
            log.exception("camera %s: capture supervisor failed", self.name)
        finally:
            if self._session is not None:
                self._session.cancel.set()
            if self._state is not CameraState.STOPPED:
                self._set_state(CameraState.STOPPED)

    def _supervise(self) -> None:
        while not self._stop.is_set():
            outcome = self._watch(self._start_session())
            if outcome is None:
                return  # stop requested
            if outcome.reason == "eof":
                log.info("camera %s: %s; stopping", self.name, outcome.detail)
                return
            self._errors += 1
            self._metrics.error(outcome.reason)
            self._last_error = redact_text(f"{outcome.reason}: {outcome.detail}")
            if not self._wait_backoff(outcome):
                return
            self._reconnects += 1
            self._metrics.reconnects.inc()
            self._set_state(CameraState.CONNECTING)

    def _start_session(self) -> Session:
        self._sessions += 1
        session = Session(self._sessions, self._clock(), self._wake)
        self._session = session
        self._threads = [t for t in self._threads if t.is_alive()]  # forget ended readers
        reader = threading.Thread(
            target=self._read,
            args=(session,),
            name=f"capture-{self.name}-reader-{session.number}",
            daemon=True,
        )
        self._threads.append(reader)
        reader.start()
        return session

    def _watch(self, session: Session) -> Outcome | None:
        """Supervise one session until it ends, stalls, or the worker stops (None)."""
        stall_s, open_s = self._defaults.stall_timeout_s, self._defaults.open_timeout_ms / 1000.0
        return watch(session, self._stop, self._clock, stall_s, open_s, self._POLL_S)

    def _streaming(self, session: Session) -> None:
        """CONNECTING -> STREAMING, on the reader thread before its first frame is handed on,
        so that no consumer (MQTT's state topic, the status page) sees results from a camera
        still reported as connecting. A session the supervisor has already abandoned (it may
        be in BACKOFF by now) changes nothing."""
        if session.cancel.is_set():
            return
        if not self._set_state(CameraState.STREAMING, only_from=CameraState.CONNECTING):
            return
        self._backoff.reset()
        info = session.info
        size = f"{info.width}x{info.height}" if info else "?"
        fps = f"{info.fps:g}" if info and info.fps else "unknown"
        self._log(logging.INFO, f"streaming {size} at {fps} fps from {self._url}")

    def _wait_backoff(self, outcome: Outcome) -> bool:
        """Enter BACKOFF and sleep the next delay; False if the worker was stopped."""
        step = self._backoff.next()
        self._last_backoff = step
        self._set_state(CameraState.BACKOFF)
        self._log(
            logging.WARNING,
            f"{outcome.reason} ({outcome.detail}); reconnecting in {step.delay_s:.2f} s "
            f"(attempt {step.attempt}, ceiling {step.ceiling_s:.2f} s) to {self._url}",
        )
        return not self._stop.wait(step.delay_s)

    def _set_state(self, new: CameraState, only_from: CameraState | None = None) -> bool:
        """Change the state (checked); with ``only_from``, only from that state. True if it
        changed."""
        with self._state_lock:
            old = self._state
            if old is new or (only_from is not None and old is not only_from):
                return False
            check_transition(old, new)
            self._state = new
        self._metrics.set_state(new)
        self._notify(new)
        return True

    def _notify(self, state: CameraState) -> None:
        if self._on_state is None:
            return
        try:
            self._on_state(self.name, state)
        except Exception:
            log.exception("camera %s: on_state callback failed", self.name)

    def _log(self, level: int, message: str) -> None:
        log.log(level, "camera %s: %s", self.name, redact_text(message))

    # -- reader ------------------------------------------------------------------------------

    def _read(self, session: Session) -> None:
        """Reader thread body: open, read until the session ends, always close."""
        try:
            with attributed_to(self.name):
                if self._open(session):
                    self._read_frames(session)
        except Exception as exc:
            log.exception("camera %s: reader failed", self.name)
            session.finish("read_failed", redact_text(f"{type(exc).__name__}: {exc}"))
        finally:
            if session.source is not None:
                self._numbers.undecoded(session.take_skipped(), self._clock())
                session.source.close()
            session.finish("stopped", "reader ended")

    def _open(self, session: Session) -> bool:
        """Open a source into ``session.source``; False (and the session finished) if not."""
        source = self._context.source(self.camera, self._defaults)
        session.source = source
        wait_turn = getattr(source, "wait_turn", None)  # nvdec: a few cameras start at once
        if wait_turn is not None:
            with session.not_idle(self._clock):  # waiting its turn is no open time
                if not wait_turn(session.cancel):
                    return False  # stopped while waiting
        try:
            info = source.open()
        except SourceError as exc:
            session.finish(exc.reason, exc.detail)
            return False
        if session.cancel.is_set():
            return False  # abandoned while opening
        source.packet_listener = self._tap.feed(source)
        self._take_wait = take_wait_for(
            source, self._defaults, self._mailbox, self._pacer, self._group_size, info.fps,
            self._clock,
        )  # fmt: skip
        held_back = self._once.held_back if self._take_wait is None else self._take_wait.behind
        session.budget = leave_undecoded(
            source, info.fps, self.camera, self._defaults, self._decimator, self._mailbox.policy,
            self._context.shared(SharedShare), held_back, self._mailbox.wait_clock,
        )  # fmt: skip
        session.info = info
        session.epoch = next(_EPOCHS)
        session.opened = True
        session.last_progress_s = self._clock()
        session.wake.set()  # the stall deadline moved: stall_timeout_s from now
        return True

    def _read_frames(self, session: Session) -> None:
        self._decimator.reset()
        self._once.reset()
        if self._motion is not None:
            self._motion.reset()
        if self._pacer is not None:
            self._pacer.reset()
        if self._group_size > 1:  # this thread waits on a lock; a group thread reads
            groups = self._context.groups
            groups.serve(self._group_size, self.name, lambda: self._step(session), session.cancel)
            return
        while (delay_s := self._step(session)) is not None:
            if delay_s > 0 and session.cancel.wait(delay_s):
                return

    def _step(self, session: Session) -> float | None:
        """Read and emit one frame. None: the session is over; else the seconds until the
        next step (a ``realtime`` file's next frame is not due yet)."""
        if session.cancel.is_set() or not self._wait_for_consumer(session):
            return None
        delay_s = self._pace(session)
        if delay_s > 0:
            return delay_s
        if self._take_wait is not None and not self._take_wait.wait(session.cancel):
            return None  # due, but stopped while inference had yet to take the last frame
        t_read = self._clock()
        assert session.source is not None  # _open succeeded
        try:
            decoded = session.source.read()
        except ReadTimeout:
            return 0.0  # no packet yet: the watchdog decides when this is a stall
        except SourceError as exc:
            session.finish(exc.reason, exc.detail)
            return None
        if session.cancel.is_set():
            return None  # stale: the supervisor moved on while we were blocked
        if decoded is None:
            self._numbers.undecoded(session.take_skipped(), self._clock())
            if not self._end_of_pass(session, session.pass_frames):
                return None
            session.pass_frames = 0
            return 0.0
        session.pass_frames += 1
        # A read that ran into the read timeout can still return a frame: FFmpeg drains the
        # decoder's delayed pictures, one per timeout (a frozen stream yields one every
        # read_timeout_ms). Such frames are passed on but are no sign of life for the watchdog.
        fresh = self._clock() - t_read < 0.9 * self._defaults.read_timeout_ms / 1000.0
        undecoded = session.take_skipped()  # frames left undecoded before this one
        if not self._wait_until_due(session, sum(undecoded)):
            return None
        try:
            return 0.0 if self._emit(session, as_picture(decoded), fresh, undecoded) else None
        except SourceError as exc:  # a deferred conversion failed (nvdec's copy out)
            session.finish(exc.reason, exc.detail)
            return None

    def _pace(self, session: Session) -> float:
        """``realtime`` files: seconds until the next frame is due (0: read it now)."""
        if self._pacer is None:
            return 0.0
        return self._pacer.wait_s(self._clock(), session.info.fps if session.info else None)

    def _wait_until_due(self, session: Session, undecoded: int) -> bool:
        """``realtime`` files: a frame read after frames left undecoded is due as late as its
        place in the file (else the file plays faster than its rate). False: stopped."""
        if self._pacer is None or not undecoded:
            return True
        fps = session.info.fps if session.info else None
        delay_s = self._pacer.advance_s(undecoded, self._clock(), fps)
        if delay_s <= 0:  # due already: no wait, so nothing to hide from the stall watchdog
            return True
        with session.not_idle(self._clock):  # a shed group's wait may exceed the stall timeout
            return not session.cancel.wait(delay_s)

    def _wait_for_consumer(self, session: Session) -> bool:
        """Files: decode the next frame only once the last one was taken (no stale frames)."""
        with session.not_idle(self._clock):  # waiting for the consumer is no stall
            return self._mailbox.wait_empty(session.cancel)

    def _end_of_pass(self, session: Session, pass_frames: int) -> bool:
        """``read`` returned False: finish the session, or rewind a looping file (True)."""
        if pass_frames == 0:
            session.finish("no_frames", "the source opened but yielded no frame")
            return False
        if not self._is_file:
            # rtspsrc-style servers end with EOS and never resume: always reconnect.
            session.finish("read_failed", f"stream ended after {session.frames} frame(s)")
            return False
        if not self.camera.loop:
            session.finish("eof", f"end of file after {session.frames} frame(s)")
            return False
        rewind = getattr(session.source, "rewind", None)
        if rewind is not None and rewind():  # a source that can start over without closing
            session.epoch = next(_EPOCHS)
            session.last_progress_s = self._clock()
            return True
        if session.source is not None:
            session.source.close()
        session.source = None
        return self._open(session)

    def _emit(self, session: Session, picture: Picture, fresh: bool, undecoded: Undecoded) -> bool:
        """Count one decoded frame and pass it on if due; False if the session must end.

        ``fresh`` is False for a frame drained after a read timeout: it does not reset the
        frame-age watchdog. The picture is converted (``Picture.image_for`` the model's input
        size) only once the decimator, the mailbox (``unread_seq``) and the motion gate have
        let it through: a dropped frame costs no conversion (nvdec: no copy).
        """
        now = self._clock()
        self._numbers.undecoded(undecoded, now)  # the frames before this one never decoded
        seq = self._numbers.made(now)
        if session.seq0 is None:
            session.seq0 = seq
        session.frames += 1
        if session.frames == 1:
            self._streaming(session)
        if fresh:
            session.last_progress_s = now
            self._last_frame_s = now
        fps = session.info.fps if session.info else None
        t_sched = (seq - session.seq0) / fps if fps else now  # media time when known
        if fps and self._mailbox.policy == "newest":  # live: the reader should keep pace
            self._metrics.lag.set(session.lag_s(now, t_sched))
        if not self._decimator.due(t_sched):
            self._metrics.drop("decimated")
            return True
        if self._mailbox.starting and self._mailbox.policy == "newest":
            self._metrics.drop("starting")  # the camera streams while its model loads
            return True
        # Live, and the due frame before this one still waits: drop this one unmade rather
        # than make it (nvdec: copy out, DeviceImage, Frame) to replace that one; that GIL work
        # of ~100 camera threads starved the H200's scheduler (96 cameras: 224 fps). Once in a
        # row only: the frame inferred is at most one due frame older (a burst ends fresh).
        drop, waiting = self._once.drop(seq, undecoded=undecoded.unread > 0)
        if session.budget is not None:  # what a frame waiting now says of its group
            session.budget.due(taken=waiting is None)
        if drop:
            self._metrics.drop("mailbox_full")
            return True
        # config validation keeps the motion gate (a CPU comparison) off nvdec cameras
        still_frames: int | None = 0
        if self._motion is not None and not self._on_device(picture):
            still_frames = self._motion.admit(picture, t_sched)
        if still_frames is None:
            return True  # the motion gate counted it as no_motion
        fit = self._mailbox.fit if self._defaults.convert_at_model_size else None
        image = picture.image_for(fit)
        with session.not_idle(self._clock):  # waiting for the consumer (block) is no stall
            frame = Frame(self.name, seq, now, image, session.epoch, still_frames)
            return self._mailbox.put(frame, session.cancel)

    @staticmethod
    def _on_device(picture: Picture) -> bool:
        # no host luma: a GPU picture (ready, so asking is free) or one the gate converts anyway
        return picture.luma() is None and isinstance(picture.image(), DeviceImage)
