"""The shared stage: preprocessing, the asynchronous inference scheduler and postprocessing.

Threads and hand-offs::

    scheduler thread:  hub.take() (round-robin) -> backend.lend() (a free slot's own input
                       memory) -> letterbox into it -> in-flight cap -> age check
                       -> backend.submit()
    backend thread:    completion callback: outputs copied, Completion queued (inbox)
    scheduler thread, between submissions (``SchedulingHints.completions_on_scheduler``),
    or a postprocess thread of its own:
                       decode + NMS + filters -> FrameResult -> on_result (tracking, sinks)

Completions can arrive out of order (several requests run at once), so results are handed
to ``on_result`` in each camera's submission order: a result waits for the camera's earlier
frames still in flight (at most ``pipeline_depth``). Stateful consumers such as the tracker
rely on it.

Requests in flight are capped by the cameras that have frames (``vidpipe.schedule.inflight``): one
per OpenVINO stream, then requests queued behind them as cameras are added.

The backend owns the input memory and lends it (``InferenceBackend``): the frame is
letterboxed straight into the OpenVINO request's input tensor or a row of the GPU stream
set's pinned batch, never into a buffer of our own that would then be copied again. The
backend double-buffers: OpenVINO keeps about two requests per stream, so a stream's next
request is queued while the scheduler fills a third; the stream set has two pinned batches
per CUDA stream, one filled while the other is copied and run. A device frame (NVDEC) is
not letterboxed here: the GPU backend letterboxes it into its device batch.

File cameras decode only when the hub gives them a turn: at most ``decode_ahead`` of them
decode or hold a decoded frame at once (``FrameHub.set_ahead_limit``), and where the backend's
hints ask for it (``time_turns``: OpenVINO) a turn is given only when the frame will be needed
soon (``TurnClock``, fed by the scheduler's submissions and completions), so frames do not age
in the hub while earlier ones are inferred.

The scheduler drives every backend alike: what differs is in the backend's
``SchedulingHints``, never in a question of which backend it is.

The scheduler is the only thread that submits (AsyncInferQueue is not safe otherwise). The
number of frames between submission and the end of postprocessing is bounded by
``pipeline_depth``; when postprocessing falls behind, the scheduler waits and the capture
mailboxes drop the oldest frames (counted), so nothing queues without bound.

Lifecycle: ``start`` (threads), ``stop`` (take no more frames from the hub; finish what is in
flight) and ``close`` (stop, end the threads, close the backend). ``submit`` feeds frames
directly (``vidpipe detect``, tests), without a hub.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from vidpipe.infer.base import FatalDeviceError, InferenceBackend, SchedulingHints
from vidpipe.labels import Labels
from vidpipe.metrics import Metrics
from vidpipe.postprocess.decode import DECODER_NAMES, DecodeParams, Decoder
from vidpipe.postprocess.pipeline import postprocess
from vidpipe.preprocess.buffers import InputBuffer
from vidpipe.schedule import inflight
from vidpipe.schedule.completions import CompletionInbox
from vidpipe.schedule.hub import FrameHub
from vidpipe.schedule.turn_clock import TurnClock
from vidpipe.types import (
    Completion,
    Detections,
    Frame,
    FrameResult,
    Letterbox,
    ModelTag,
    PostprocessRequest,
    SubmitTag,
)

log = logging.getLogger(__name__)

_POLL_S = 0.05
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class CameraRules:
    """Per-camera postprocessing settings."""

    params: DecodeParams
    class_ids: frozenset[int] | None


@dataclass(frozen=True, slots=True)
class _Ticket(SubmitTag):
    frame: Frame
    letterbox: Letterbox
    t_submit: float


class Scheduler:
    """Preprocess, infer and postprocess frames from every camera."""

    def __init__(
        self,
        backend: InferenceBackend,
        decoder: Decoder,
        labels: Labels,
        metrics: Metrics,
        on_result: Callable[[FrameResult], None],
        *,
        default_rules: CameraRules,
        iou_threshold: float,
        max_frame_age_s: float,
        keep_images: bool = False,
        on_fatal: Callable[[BaseException], None] | None = None,
        model: ModelTag | None = None,
    ) -> None:
        self.backend = backend
        # records and the model label of the metrics name it so
        self.model = model or ModelTag(DECODER_NAMES.get(decoder, "custom"), backend.info.model)
        self.decoder = decoder
        self.labels = Labels.of(labels)
        self.metrics = metrics
        self.on_result = on_result
        self.iou_threshold = iou_threshold
        self.max_frame_age_s = max_frame_age_s
        self.keep_images = keep_images
        self._on_fatal = on_fatal
        self.fatal: BaseException | None = None
        self._default_rules = default_rules
        self._rules: dict[str, CameraRules] = {}
        hints = backend.hints
        # With a hub, the scheduler's thread postprocesses between submissions
        # (``vidpipe.schedule.completions``) if the backend's hints ask for it; else, and
        # always without a hub, a thread of its own does.
        self.completions_on_scheduler = hints.completions_on_scheduler
        self._init_flow_control(hints)
        self._init_hand_off_state()
        self._bind_metrics(metrics, backend)

    def _init_flow_control(self, hints: SchedulingHints) -> None:
        """The bounds on frames in the pipeline, decoded ahead and in the backend."""
        self.capacity = hints.capacity
        self.pipeline_depth = 4 * hints.capacity
        # File cameras decoding (or holding a decoded frame) at once. Frames decoded ahead
        # wait in the hub, and by Little's law each one adds a frame interval to every
        # frame's latency; an unlimited hub kept one per camera (8 cameras: 8 frames ahead,
        # p95 latency 2x the naive loop's). One ready frame per OpenVINO stream (half the
        # request pool) keeps the streams fed (`vidpipe bench`, benchmarks/README.md).
        self.decode_ahead = max(2, hints.capacity // 2)
        self._depth = threading.BoundedSemaphore(self.pipeline_depth)
        # In-flight cap (module docstring); None (a backend without a floor): the pool's size.
        self.in_flight_floor = hints.in_flight_floor
        self._in_backend = 0  # submitted, completion not yet called back
        self._backend_cond = threading.Condition()
        self._last_submit: dict[str, float] = {}  # camera -> monotonic time (scheduler thread)
        # Times file cameras' turns (hub), in the clock's model of one request per stream.
        floor = self.in_flight_floor
        self.turn_clock = (
            None
            if floor is None or not hints.time_turns
            else TurnClock(floor, decode_beside=not hints.uses_every_core)
        )
        self._cap = hints.capacity  # the in-flight cap at the last submission

    def _init_hand_off_state(self) -> None:
        """Completion inbox, stop events, threads, per-camera ordering and counters."""
        self._inbox = CompletionInbox(self._finish)
        self._stop = threading.Event()  # close(): waits for a slot or buffer give up
        self._stop_taking = threading.Event()  # stop(): the hub is no longer read
        self._scheduler_thread: threading.Thread | None = None
        self._idle = threading.Condition()
        # Per camera: seqs submitted and not yet handed on, in submission order, and the
        # results (None: failed) that completed ahead of an earlier frame.
        self._order: dict[str, deque[int]] = {}
        self._held: dict[str, dict[int, FrameResult | None]] = {}
        self._order_lock = threading.Lock()
        self._unfinished = 0
        self.submitted = 0
        self.completed = 0
        self.delivered = 0  # results handed to on_result (counted where postprocessed)
        self.last_completion = time.monotonic()

    def _bind_metrics(self, metrics: Metrics, backend: InferenceBackend) -> None:
        """Pool size, in-flight gauge, batch sizes and the backend's identity, by model."""
        self._model_metrics = mm = metrics.model(self.model.name)
        mm.pool_size.set(self.capacity)
        mm.inflight.set_function(lambda: self._in_backend)
        backend.observe_batches(mm.batch_size.observe)
        info = backend.info
        metrics.inference_info.labels(
            backend=info.backend,
            device=info.device,
            precision=info.precision,
            hint=info.hint,
            model=self.model.name,
        ).set(1)

    def set_rules(self, camera: str, rules: CameraRules | None) -> None:
        """Per-camera thresholds and class filter (None: the model's defaults)."""
        if rules is None:
            self._rules.pop(camera, None)
        else:
            self._rules[camera] = rules

    # ------------------------------------------------------------------ threads

    def start(self, hub: FrameHub | None = None) -> None:
        """Start postprocessing and, with a hub, the scheduler thread that reads it."""
        self._inbox.start()
        if hub is not None:
            spec = self.backend.input_spec
            hub.fit = (spec.width, spec.height)
            hub.set_ahead_limit(self.decode_ahead)
            hub.set_turn_clock(self.turn_clock)
            hub.starting = False
            self._scheduler_thread = self._spawn("scheduler", lambda: self._schedule_loop(hub))

    @staticmethod
    def _spawn(name: str, target: Callable[[], None]) -> threading.Thread:
        t = threading.Thread(target=target, name=f"vidpipe-{name}", daemon=True)
        t.start()
        return t

    def _schedule_loop(self, hub: FrameHub) -> None:
        if self.completions_on_scheduler:
            self._inbox.adopt(hub.nudge)
        try:
            self._take_and_submit(hub)
        finally:
            # What is still in flight, and what arrives after, goes to the inbox's thread.
            self._inbox.release()

    def _take_and_submit(self, hub: FrameHub) -> None:
        while not self._stop.is_set() and not self._stop_taking.is_set():
            self._inbox.drain_if_adopted()
            frame = hub.take(_POLL_S)
            if frame is None:
                continue
            clock = self.turn_clock
            if clock is not None:
                clock.taken()
            submitted = False
            try:
                submitted = self.submit(frame)
            except Exception:
                log.exception("scheduler failed to submit a frame of %s", frame.camera)
                self.metrics.camera(frame.camera).drop("inference_error")
            if clock is not None and not submitted:
                clock.released()

    def stop(self, timeout_s: float) -> bool:
        """Take no more frames from the hub and finish what is in flight: the frame already
        taken is submitted (a pool rebuild hands the hub to a new scheduler without losing a
        frame), and every submitted frame is postprocessed and handed on.

        True if all of it finished within ``timeout_s``. Frames may still be submitted
        directly afterwards (``submit``); ``stop`` again waits for them.
        """
        deadline = time.monotonic() + timeout_s
        self._stop_taking.set()
        thread = self._scheduler_thread
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                return False
        with self._idle:
            left = max(0.0, deadline - time.monotonic())
            return self._idle.wait_for(lambda: self._unfinished == 0, left)

    # ------------------------------------------------------------------ submission

    def submit(self, frame: Frame, stop: threading.Event | None = None) -> bool:
        """Preprocess and submit one frame; blocks while the pipeline is full.

        Returns False if the frame was dropped (too old) or ``stop`` was set while waiting.
        """
        stop = stop or self._stop
        cam = self.metrics.camera(frame.camera)
        if not self._wait(lambda: self._depth.acquire(timeout=_POLL_S), stop):
            cam.drop("shutdown")
            return False
        try:
            prepared = self._prepare(frame, stop)
        except BaseException:
            self._depth.release()
            raise
        too_old = prepared is not None and time.monotonic() - frame.t_capture > self.max_frame_age_s
        if prepared is None or too_old:
            # A buffer lent and not submitted stays lent: the next frame fills it again.
            self._depth.release()
            cam.drop("too_old" if too_old else "shutdown")
            return False
        self._submit(frame, *prepared)
        return True

    def _prepare(self, frame: Frame, stop: threading.Event) -> tuple[InputBuffer, Letterbox] | None:
        """Letterbox ``frame`` into the input memory the backend lends, then wait until the
        in-flight cap allows one more request (None: ``stop`` was set meanwhile).

        The letterbox comes before the cap: while the cap holds requests back (fewer cameras
        than requests), an idle request is there to be filled, and the filled one starts the
        moment a running one completes, as it did when frames waited in buffers of our own.
        """
        buf = self._wait(lambda: self.backend.lend(_POLL_S), stop)
        if buf is None:
            return None
        t0 = time.monotonic()
        lb = buf.fill(frame.image)
        if self.turn_clock is not None:
            self.turn_clock.filled(time.monotonic() - t0)
        if not self._wait(lambda: self._wait_cap(frame.camera, _POLL_S), stop):
            return None
        return buf, lb

    def _submit(self, frame: Frame, buf: InputBuffer, lb: Letterbox) -> None:
        """Hand a filled buffer to the backend, with the bookkeeping its completion undoes."""
        with self._idle:
            self._unfinished += 1
            self.submitted += 1
        with self._order_lock:
            self._order.setdefault(frame.camera, deque()).append(frame.seq)
        with self._backend_cond:
            self._in_backend += 1
        ticket = None
        try:
            ticket = _Ticket(self._request(frame.camera, lb), frame, lb, time.monotonic())
            if self.turn_clock is not None:  # before the completion can come
                self.turn_clock.submitted(id(ticket), ticket.t_submit, self._cap)
            self.backend.submit(buf, ticket, self._on_done)
        except BaseException:
            if self.turn_clock is not None and ticket is not None:
                self.turn_clock.withdrawn(id(ticket), time.monotonic())
            self._backend_done()
            # Refused before it was queued (e.g. a closed backend): no completion will come.
            with self._order_lock:
                self._order[frame.camera].remove(frame.seq)
            self._depth.release()
            with self._idle:
                self._unfinished -= 1
                self.submitted -= 1
                self._idle.notify_all()
            raise

    def in_flight_cap(self, camera: str) -> int:
        """Requests that may be in flight when ``camera`` submits (see the module docstring)."""
        if self.in_flight_floor is None:
            return self.capacity
        now = time.monotonic()
        self._last_submit[camera] = now
        window = inflight.ACTIVE_WINDOW_S
        active = sum(1 for t in list(self._last_submit.values()) if now - t <= window)
        return inflight.in_flight_cap(active, self.in_flight_floor, self.capacity)

    def _wait_cap(self, camera: str, timeout_s: float) -> bool:
        cap = self._cap = self.in_flight_cap(camera)
        with self._backend_cond:
            return self._backend_cond.wait_for(lambda: self._in_backend < cap, timeout_s)

    def _backend_done(self) -> None:
        with self._backend_cond:
            self._in_backend -= 1
            self._backend_cond.notify()

    def _request(self, camera: str, lb: Letterbox) -> PostprocessRequest | None:
        """What a GPU backend needs to postprocess this frame on the device."""
        name = DECODER_NAMES.get(self.decoder)
        if name is None:
            return None
        rules = self._rules.get(camera, self._default_rules)
        threshold = rules.params.score_threshold
        return PostprocessRequest(name, lb, threshold, rules.class_ids, self.iou_threshold)

    def _wait(self, attempt: Callable[[], _T | None], stop: threading.Event) -> _T | None:
        """Retry a short blocking ``attempt`` until it yields something or ``stop`` is set;
        the scheduler's thread postprocesses what completed between attempts."""
        while True:
            got = attempt()
            if got:
                return got
            if stop.is_set():
                return None
            self._inbox.drain_if_adopted()

    def _on_done(self, completion: Completion) -> None:
        """Backend callback thread: count the request done and hand on. Nothing else."""
        if self.turn_clock is not None:
            self.turn_clock.completed(id(completion.tag), time.monotonic())
        # Queued before the slot is counted free: the scheduler, woken by the free slot,
        # finds the completion to postprocess after its next submission.
        self._inbox.put(completion)
        self._backend_done()

    # ------------------------------------------------------------------ postprocessing

    def _finish(self, completion: Completion) -> None:
        """Postprocess one completion and hand the result on (the inbox's handler)."""
        frame = completion.tag.frame
        result = None
        try:
            result = self._postprocess(completion)
        except Exception:
            log.exception("postprocessing failed")
            self.metrics.camera(frame.camera).drop("inference_error")
        try:
            self._hand_on(frame.camera, frame.seq, result)
        finally:
            self._depth.release()
            self.last_completion = time.monotonic()
            with self._idle:
                self._unfinished -= 1
                self.completed += 1
                self._idle.notify_all()

    def _hand_on(self, camera: str, seq: int, result: FrameResult | None) -> None:
        """Pass results to ``on_result`` in the camera's submission order (None: nothing)."""
        ready: list[FrameResult] = []
        with self._order_lock:
            order = self._order[camera]
            held = self._held.setdefault(camera, {})
            held[seq] = result
            while order and order[0] in held:
                done = held.pop(order.popleft())
                if done is not None:
                    ready.append(done)
        for item in ready:
            try:
                self.on_result(item)
            except Exception:
                log.exception("handing on a result of %s failed", camera)
            else:
                self.delivered += 1

    def _postprocess(self, completion: Completion) -> FrameResult | None:
        ticket: _Ticket = completion.tag
        frame = ticket.frame
        cam = self.metrics.camera(frame.camera)
        got = completion.result
        if isinstance(got, BaseException):
            self._model_metrics.errors.inc()
            cam.drop("inference_error")
            if isinstance(got, FatalDeviceError) and self.fatal is None:
                self.fatal = got
                if self._on_fatal is not None:
                    self._on_fatal(got)
            return None
        self._model_metrics.latency.observe(completion.infer_s)
        rules = self._rules.get(frame.camera, self._default_rules)
        if isinstance(got, Detections):  # postprocessed on the device already
            dets = got
        else:
            dets = postprocess(
                [o[0] for o in got],
                ticket.letterbox,
                self.decoder,
                rules.params,
                self.iou_threshold,
                rules.class_ids,
            )
        t_done = time.monotonic()
        self.last_completion = t_done
        result = FrameResult(
            camera=frame.camera,
            seq=frame.seq,
            t_capture=frame.t_capture,
            t_done=t_done,
            wall_time=time.time(),
            width=frame.width,
            height=frame.height,
            detections=dets,
            labels=self.labels,
            image=frame.image if self.keep_images else None,
            epoch=frame.epoch,
            still_frames=frame.still_frames,
            model=self.model,
        )
        cam.infer_done()
        cam.e2e_latency.observe(t_done - frame.t_capture)
        for cid, n in Counter(dets.class_id.tolist()).items():
            cam.detections(self.labels.name(cid), n)
        return result

    # ------------------------------------------------------------------ shutdown

    def progress(self) -> tuple[float, int]:
        """(monotonic time of the last completion, frames submitted but not finished)."""
        return self.last_completion, self._unfinished

    def close(self, timeout_s: float = 5.0) -> bool:
        """``stop``, then end the threads and close the backend. A frame still waiting for
        a slot after ``timeout_s`` is dropped (counted). True if everything finished."""
        finished = self.stop(timeout_s)
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        t = self._scheduler_thread
        if t is not None:
            t.join(max(0.0, deadline - time.monotonic()))
            if t.is_alive():
                log.warning("thread %s still alive after %.1f s", t.name, timeout_s)
        if not self._inbox.close(max(0.0, deadline - time.monotonic())):
            log.warning("thread vidpipe-postprocess still alive after %.1f s", timeout_s)
        self.backend.close()
        return finished
