"""MQTT sink (paho-mqtt): detections, camera states and availability on a broker.

Topics, with ``<prefix>`` from the config (``vidpipe`` by default):

* ``<prefix>/<camera>/detections``: the frame record (``vidpipe.sinks.record``) of each frame
  with detections (of every frame with ``only_with_detections: false``);
* ``<prefix>/<camera>/events``: the record of each zone or line event (``enter``, ``leave``,
  ``cross``), also from frames without detections;
* ``<prefix>/<camera>/state``: the capture state (``streaming``, ``backoff``, ...), retained;
* ``<prefix>/available``: ``online`` once connected, ``offline`` at shutdown or, through the
  Last Will, when the daemon vanishes; retained.

paho's network thread connects, and reconnects with exponential backoff
(``reconnect_min_s`` .. ``reconnect_max_s``). While disconnected, messages wait in a bounded
buffer (oldest dropped, ``vidpipe_sink_dropped{reason="buffer_full"}``) and are published
on reconnect, after the retained states are published again (a restarted broker without
persistence has lost them). The password is a registered secret and never logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections import deque
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from vidpipe.config import MqttSinkConfig
from vidpipe.metrics import Metrics
from vidpipe.redact import redact_text
from vidpipe.sinks.record import encode, event_record, frame_record
from vidpipe.types import CameraState, FrameResult

log = logging.getLogger(__name__)

#: How long ``close`` waits for the ``offline`` message to reach the broker.
_CLOSE_WAIT_S = 2.0
#: Room in paho's queue beyond the buffer size (states, availability, in-flight messages).
_PAHO_HEADROOM = 256


class MqttSink:
    """Publishes frame and event records and camera states to an MQTT broker.

    The connection starts in the constructor (asynchronously: an unreachable broker does not
    stop the daemon; it is retried in the background).

    Args:
        name: the sink's unique name (metric label, client id suffix).
        cfg: broker, topics, QoS, TLS, credentials, buffer.
        metrics: connection gauge and drop counters.
    """

    wants_images = False

    def __init__(self, name: str, cfg: MqttSinkConfig, metrics: Metrics) -> None:
        self.name = name
        self.queue_size = cfg.queue_size
        self._cfg = cfg
        self._prefix = cfg.topic_prefix.rstrip("/")
        self._lock = threading.Lock()  # _connected, _closed, _buffer, _states
        self._connected = False
        self._closed = False
        self._buffer: deque[tuple[str, bytes, bool]] = deque()
        self._states: dict[str, str] = {}
        self._connected_gauge = metrics.mqtt_connected.labels(sink=name)
        self._dropped = {
            r: metrics.sink_dropped.labels(sink=name, reason=r)
            for r in ("buffer_full", "broker_backlog", "shutdown")
        }
        self._skipped = metrics.sink_skipped.labels(sink=name, reason="no_detections")
        self._client = self._make_client()
        self._client.connect_async(cfg.host, cfg.port, keepalive=cfg.keepalive_s)
        self._client.loop_start()

    @property
    def available_topic(self) -> str:
        return f"{self._prefix}/available"

    def _make_client(self) -> mqtt.Client:
        cfg = self._cfg
        client_id = cfg.client_id or f"vidpipe-{socket.gethostname()}-{os.getpid()}-{self.name}"
        client = mqtt.Client(
            CallbackAPIVersion.VERSION2,
            client_id=client_id.replace(":", "-"),
            protocol=mqtt.MQTTv311,
        )
        if cfg.username is not None:
            client.username_pw_set(cfg.username, cfg.password)
        if cfg.tls is not None:
            client.tls_set(
                ca_certs=str(cfg.tls.ca_file) if cfg.tls.ca_file else None,
                certfile=str(cfg.tls.cert_file) if cfg.tls.cert_file else None,
                keyfile=str(cfg.tls.key_file) if cfg.tls.key_file else None,
            )
            client.tls_insecure_set(cfg.tls.insecure)
        client.will_set(self.available_topic, "offline", qos=cfg.qos, retain=True)
        client.reconnect_delay_set(
            min_delay=max(1, round(cfg.reconnect_min_s)), max_delay=round(cfg.reconnect_max_s)
        )
        # paho's own queue holds unacknowledged QoS 1/2 messages, the buffer flushed on
        # reconnect included: room for all of it plus the retained states and availability
        client.max_queued_messages_set(cfg.buffer_size + _PAHO_HEADROOM)
        client.on_connect = self._on_connect
        client.on_disconnect = self._on_disconnect
        return client

    # -- Sink --------------------------------------------------------------------------------

    def handle(self, result: FrameResult) -> None:
        """Publish ``result``'s zone and line events, then its detections (frames without any
        only if configured)."""
        for event in result.events:
            payload = encode(event_record(event))
            self._publish(f"{self._prefix}/{result.camera}/events", payload, retain=False)
        if result.events_only:
            return
        if self._cfg.only_with_detections and len(result.detections) == 0:
            self._skipped.inc()
            return
        payload = encode(frame_record(result))
        self._publish(f"{self._prefix}/{result.camera}/detections", payload, retain=False)

    def camera_state(self, camera: str, state: CameraState) -> None:
        """Publish a camera's new capture state (retained). Never blocks."""
        with self._lock:
            self._states[camera] = state.value
        self._publish(f"{self._prefix}/{camera}/state", state.value.encode(), retain=True)

    def close(self) -> None:
        """Publish ``offline``, disconnect and stop the network thread. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            left = len(self._buffer)
            self._buffer.clear()
            connected = self._connected
        if left:
            self._dropped["shutdown"].inc(left)
            log.warning("mqtt %s: %d message(s) not published at shutdown", self.name, left)
        if connected:
            info = self._client.publish(self.available_topic, "offline", self._cfg.qos, True)
            # lost the connection meanwhile: the broker then sends the Last Will instead
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(_CLOSE_WAIT_S)
        self._client.disconnect()
        self._client.loop_stop()
        self._connected_gauge.set(0)

    # -- publishing --------------------------------------------------------------------------
    # Lock order: paho calls our callbacks holding its callback mutex, and ``publish`` may take
    # that mutex. So ``_lock`` only guards our own state and is never held while calling paho.

    def _publish(self, topic: str, payload: bytes, *, retain: bool) -> None:
        with self._lock:
            if self._closed:
                self._dropped["shutdown"].inc()
                return
            if not self._connected:
                self._buffer_locked(topic, payload, retain)
                return
        self._send(topic, payload, retain)

    def _buffer_locked(self, topic: str, payload: bytes, retain: bool) -> None:
        """Keep a message for the next connection (``_lock`` held); drop the oldest if full."""
        if len(self._buffer) >= self._cfg.buffer_size:
            self._buffer.popleft()
            self._dropped["buffer_full"].inc()
        self._buffer.append((topic, payload, retain))

    def _send(self, topic: str, payload: bytes, retain: bool) -> None:
        """Hand one message to paho; buffer it if the connection dropped just now."""
        info = self._client.publish(topic, payload, self._cfg.qos, retain)
        if info.rc == MQTTErrorCode.MQTT_ERR_SUCCESS:
            return
        if info.rc == MQTTErrorCode.MQTT_ERR_QUEUE_SIZE:
            self._dropped["broker_backlog"].inc()  # paho's own queue is full: the broker lags
            return
        # MQTT_ERR_NO_CONN: paho keeps QoS 1/2 messages and sends them after the reconnect;
        # a QoS 0 message would be lost, so it waits in our buffer.
        if self._cfg.qos == 0:
            with self._lock:
                self._buffer_locked(topic, payload, retain)

    # -- paho callbacks (network thread) ------------------------------------------------------

    def _on_connect(
        self, client: mqtt.Client, _userdata: Any, _flags: Any, reason: Any, _props: Any
    ) -> None:
        if reason.is_failure:
            log.warning(
                "mqtt %s: broker %s:%d refused the connection: %s",
                self.name,
                self._cfg.host,
                self._cfg.port,
                redact_text(str(reason)),
            )
            return
        with self._lock:
            self._connected = True
            states = dict(self._states)
            pending = list(self._buffer)
            self._buffer.clear()
        self._connected_gauge.set(1)
        client.publish(self.available_topic, "online", self._cfg.qos, True)
        for camera, state in states.items():
            client.publish(f"{self._prefix}/{camera}/state", state, self._cfg.qos, True)
        for topic, payload, retain in pending:
            self._send(topic, payload, retain)
        log.info(
            "mqtt %s: connected to %s:%d%s",
            self.name,
            self._cfg.host,
            self._cfg.port,
            f", {len(pending)} buffered message(s) sent" if pending else "",
        )

    def _on_disconnect(
        self, _client: mqtt.Client, _userdata: Any, _flags: Any, reason: Any, _props: Any
    ) -> None:
        with self._lock:
            was_connected, self._connected = self._connected, False
            closing = self._closed
        self._connected_gauge.set(0)
        if was_connected and not closing:
            log.warning(
                "mqtt %s: disconnected from %s:%d (%s); reconnecting with backoff",
                self.name,
                self._cfg.host,
                self._cfg.port,
                redact_text(str(reason)),
            )
