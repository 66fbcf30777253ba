"""CUDA memory, streams and events through NVIDIA's cuda-python (``cuda.bindings.runtime``).

Why cuda-python and not pycuda: it installs as a wheel (no local CUDA toolkit to compile
against), and TensorRT's own Python samples use it since TensorRT 10. It also shares the
runtime API's primary context with PyTorch, so both can work on the same streams.

Every call's return code is checked. A *sticky* error (illegal address, launch failure, ...)
leaves the CUDA context unusable for the rest of the process: ``CudaError.sticky`` says so, and
the stream set turns it into a :class:`FatalDeviceError` (the daemon then exits non-zero so
that systemd restarts it).

``cuda.bindings`` is imported lazily, and importing it needs no driver: without one, calls
fail with ``cudaErrorInsufficientDriver`` or ``cudaErrorNoDevice``, which become a clear
``CudaError`` at start-up.
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np

from vidpipe.infer.base import BackendError, FatalDeviceError

# Errors after which the context is corrupt and every later call fails (CUDA runtime API
# documentation: "the process must be terminated and relaunched"). Unknown errors count too:
# serving errors for hours is worse than a restart.
STICKY_ERRORS = frozenset(
    {
        "cudaErrorECCUncorrectable",
        "cudaErrorIllegalAddress",
        "cudaErrorLaunchTimeout",
        "cudaErrorContextIsDestroyed",
        "cudaErrorAssert",
        "cudaErrorHardwareStackError",
        "cudaErrorIllegalInstruction",
        "cudaErrorMisalignedAddress",
        "cudaErrorInvalidAddressSpace",
        "cudaErrorInvalidPc",
        "cudaErrorLaunchFailure",
        "cudaErrorExternalDevice",
        "cudaErrorUnknown",
    }
)


class CudaError(BackendError):
    """A failed CUDA runtime call: what was called, the error's name and its text."""

    def __init__(self, what: str, name: str, text: str) -> None:
        self.what = what
        self.name = name
        self.sticky = name in STICKY_ERRORS
        super().__init__(f"{what} failed: {name} ({text})")


__all__ = ["CudaError", "CudaRuntime", "FatalDeviceError", "HostBuffer", "check"]


_rt_lock = threading.Lock()
_rt: Any = None


def runtime_module() -> Any:
    """``cuda.bindings.runtime``, imported on first use.

    Raises:
        BackendError: cuda-python is not installed.
    """
    global _rt
    with _rt_lock:
        if _rt is None:
            try:
                from cuda.bindings import runtime
            except ImportError as exc:
                raise BackendError(
                    "the GPU backends need NVIDIA's cuda-python: pip install 'vidpipe[gpu]' "
                    f"({exc})"
                ) from None
            _rt = runtime
    return _rt


def _error_name(rt: Any, err: Any) -> tuple[str, str]:
    name = getattr(err, "name", str(err))
    try:
        _, text = rt.cudaGetErrorString(err)
        return name, text.decode() if isinstance(text, bytes) else str(text)
    except Exception:  # the text is a courtesy; the name is what matters
        return name, "no description"


def check(result: Any, what: str) -> Any:
    """Unpack a cuda-python ``(err, *values)`` tuple; raise ``CudaError`` unless success.

    Returns:
        None, the single value, or a tuple of values.
    """
    rt = runtime_module()
    if isinstance(result, tuple):
        err, values = result[0], result[1:]
    else:
        err, values = result, ()
    if err != rt.cudaError_t.cudaSuccess:
        raise CudaError(what, *_error_name(rt, err))
    if not values:
        return None
    return values[0] if len(values) == 1 else values


def _handle(obj: Any) -> int:
    """The integer value of a cuda-python handle (stream, event) or pointer."""
    if isinstance(obj, int):
        return obj
    try:
        return int(obj)
    except TypeError:
        return int(obj.getPtr())


def device_count() -> int:
    """Number of CUDA devices; CudaError without a driver."""
    return int(check(runtime_module().cudaGetDeviceCount(), "cudaGetDeviceCount"))


class HostBuffer:
    """Page-locked host memory viewed as a numpy array (needed for truly async copies)."""

    def __init__(self, ptr: int, array: np.ndarray) -> None:
        self.ptr = ptr
        self.array = array


class CudaRuntime:
    """The few CUDA runtime calls the stream set makes, for one device, all checked.

    Methods that act on a device first make it current on the calling thread (the current
    device is per thread in the runtime API).
    """

    def __init__(self, device: int) -> None:
        self.device = device
        self._rt = runtime_module()
        count = device_count()
        if not 0 <= device < count:
            raise BackendError(f"CUDA device {device} does not exist ({count} device(s) found)")
        self.activate()
        prop = check(self._rt.cudaGetDeviceProperties(device), "cudaGetDeviceProperties")
        raw = prop.name
        self.name = (raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)).strip(
            "\x00 "
        )
        self.compute_capability = (int(prop.major), int(prop.minor))

    def activate(self) -> None:
        """Make this device current on the calling thread."""
        check(self._rt.cudaSetDevice(self.device), f"cudaSetDevice({self.device})")

    # ------------------------------------------------------------------ memory

    def host_alloc(self, shape: tuple[int, ...], dtype: np.dtype[Any] | type) -> HostBuffer:
        """Pinned host memory of ``shape`` and ``dtype``, zero-filled."""
        dt = np.dtype(dtype)
        nbytes = int(np.prod(shape)) * dt.itemsize
        self.activate()
        ptr = _handle(check(self._rt.cudaMallocHost(nbytes), f"cudaMallocHost({nbytes})"))
        raw = (ctypes.c_uint8 * nbytes).from_address(ptr)
        array = np.frombuffer(memoryview(raw), dtype=dt).reshape(shape)
        array[...] = 0
        return HostBuffer(ptr, array)

    def host_free(self, buf: HostBuffer) -> None:
        check(self._rt.cudaFreeHost(buf.ptr), "cudaFreeHost")

    def device_alloc(self, nbytes: int) -> int:
        self.activate()
        return _handle(check(self._rt.cudaMalloc(nbytes), f"cudaMalloc({nbytes})"))

    def device_free(self, ptr: int) -> None:
        self.activate()
        check(self._rt.cudaFree(ptr), "cudaFree")

    def mem_used(self) -> int:
        """Bytes of device memory in use (all processes), from ``cudaMemGetInfo``."""
        self.activate()
        free, total = check(self._rt.cudaMemGetInfo(), "cudaMemGetInfo")
        return int(total) - int(free)

    # ------------------------------------------------------------------ streams and events

    def stream_create(self) -> int:
        """A non-blocking stream (no implicit sync with the legacy default stream)."""
        self.activate()
        flags = self._rt.cudaStreamNonBlocking
        return _handle(check(self._rt.cudaStreamCreateWithFlags(flags), "cudaStreamCreate"))

    def stream_destroy(self, stream: int) -> None:
        check(self._rt.cudaStreamDestroy(stream), "cudaStreamDestroy")

    def stream_probe(self, stream: int) -> None:
        """Raise the stream's pending error, if any (``cudaErrorNotReady`` is no error)."""
        err = self._rt.cudaStreamQuery(stream)[0]
        if err not in (self._rt.cudaError_t.cudaSuccess, self._rt.cudaError_t.cudaErrorNotReady):
            raise CudaError("cudaStreamQuery", *_error_name(self._rt, err))

    def event_create(self) -> int:
        """An event whose wait blocks the thread (no spinning core) and records no timing."""
        self.activate()
        flags = self._rt.cudaEventBlockingSync | self._rt.cudaEventDisableTiming
        return _handle(check(self._rt.cudaEventCreateWithFlags(flags), "cudaEventCreate"))

    def event_destroy(self, event: int) -> None:
        check(self._rt.cudaEventDestroy(event), "cudaEventDestroy")

    def event_record(self, event: int, stream: int) -> None:
        check(self._rt.cudaEventRecord(event, stream), "cudaEventRecord")

    def event_wait(self, event: int) -> None:
        """Block the calling thread until the event has completed (the GIL is released)."""
        check(self._rt.cudaEventSynchronize(event), "cudaEventSynchronize")

    # ------------------------------------------------------------------ copies

    def copy_h2d(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        kind = self._rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        check(self._rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream), "cudaMemcpyAsync H2D")

    def copy_d2h(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
        check(self._rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream), "cudaMemcpyAsync D2H")

    def copy_d2d(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        kind = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        check(self._rt.cudaMemcpyAsync(dst, src, nbytes, kind, stream), "cudaMemcpyAsync D2D")
