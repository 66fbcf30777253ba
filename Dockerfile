# vidpipe container image: a build stage makes the wheel, a slim runtime stage installs it
# into /opt/vidpipe with scripts/install-runtime.sh (the same script the tests run).
#
#   docker build -t vidpipe .                              OpenVINO (CPU, Intel GPU/NPU)
#   docker build --target tensorrt -t vidpipe:trt .        on NVIDIA's TensorRT runtime image
#
#   docker run -d --name vidpipe -p 9108:9108 \
#     -v /srv/vidpipe/etc:/etc/vidpipe:ro \        vidpipe.yaml (see deploy/container/)
#     -v /srv/vidpipe/models:/models:ro \          yolox_nano.onnx, coco80.txt
#     -v vidpipe-state:/var/lib/vidpipe \          JSONL, snapshots
#     vidpipe
#   docker kill -s HUP vidpipe                     reload the config (only the diff applies)
#
# Intel GPU: add --device /dev/dri --group-add "$(stat -c %g /dev/dri/renderD128)".

ARG PYTHON_IMAGE=python:3.11-slim-bookworm
# Any tag whose Python is 3.11 or newer; TensorRT itself comes with the image.
ARG TENSORRT_IMAGE=nvcr.io/nvidia/tensorrt:25.01-py3

# ---------------------------------------------------------------------------------- build
FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY vidpipe ./vidpipe
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---------------------------------------------------------------- shared runtime settings
# Config under /etc/vidpipe, models under /models, state under /var/lib/vidpipe, all volumes.
# The example config reads the model directory from VIDPIPE_MODEL_DIR.

# ------------------------------------------------------------------------------- tensorrt
# The TensorRT variant: NVIDIA's runtime image (CUDA, TensorRT) with vidpipe on top.
# Run it with --gpus all. Not built in CI (no GPU, no NVIDIA registry).
FROM ${TENSORRT_IMAGE} AS tensorrt
COPY --from=build /wheels /wheels
COPY scripts/install-runtime.sh /usr/local/bin/install-runtime
RUN install-runtime /wheels /opt/vidpipe python3 \
    && /opt/vidpipe/bin/pip install --no-cache-dir "cuda-python>=12,<13" "onnx>=1.15" \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin vidpipe \
    && install -d -o vidpipe -g vidpipe -m 0750 /var/lib/vidpipe
COPY deploy/container/vidpipe.yaml /etc/vidpipe/vidpipe.yaml
ENV PATH=/opt/vidpipe/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    VIDPIPE_MODEL_DIR=/models
WORKDIR /var/lib/vidpipe
USER 10001
VOLUME ["/etc/vidpipe", "/models", "/var/lib/vidpipe"]
EXPOSE 9108
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["/opt/vidpipe/bin/python", "-c", "import sys, urllib.request as u; sys.exit(0 if u.urlopen('http://127.0.0.1:9108/healthz', timeout=4).status == 200 else 1)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/vidpipe/bin/vidpipe"]
CMD ["run", "--config", "/etc/vidpipe/vidpipe.yaml"]

# -------------------------------------------------------------------------------- runtime
# The default target (last stage): slim Debian + Python, OpenVINO from its wheel.
FROM ${PYTHON_IMAGE} AS runtime
COPY --from=build /wheels /wheels
COPY scripts/install-runtime.sh /usr/local/bin/install-runtime
RUN install-runtime /wheels /opt/vidpipe \
    && rm -rf /wheels \
    && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin vidpipe \
    && install -d -o vidpipe -g vidpipe -m 0750 /var/lib/vidpipe
COPY deploy/container/vidpipe.yaml /etc/vidpipe/vidpipe.yaml
ENV PATH=/opt/vidpipe/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    VIDPIPE_MODEL_DIR=/models
WORKDIR /var/lib/vidpipe
USER 10001
VOLUME ["/etc/vidpipe", "/models", "/var/lib/vidpipe"]
EXPOSE 9108
# /healthz answers 503 when inference makes no progress (the systemd watchdog's condition).
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["/opt/vidpipe/bin/python", "-c", "import sys, urllib.request as u; sys.exit(0 if u.urlopen('http://127.0.0.1:9108/healthz', timeout=4).status == 200 else 1)"]
# SIGTERM drains inference and flushes sinks within shutdown_timeout_s: give `docker stop`
# more than that (docker stop -t 30).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/vidpipe/bin/vidpipe"]
CMD ["run", "--config", "/etc/vidpipe/vidpipe.yaml"]
