#!/bin/sh
# Install vidpipe from a built wheel into a fresh virtualenv: the install step of the
# container image (Dockerfile), also run by tests/deploy/test_container.py so that the image's
# install steps are proven without a Docker engine.
#   usage: scripts/install-runtime.sh WHEEL_DIR PREFIX [PYTHON]
set -eu
wheels=$1
prefix=$2
python=${3:-python3}
"$python" -m venv "$prefix"
# --no-cache-dir keeps pip's cache out of the image layer; the test sets VIDPIPE_PIP_CACHE=1
# to reuse the machine's cache instead of downloading OpenVINO and OpenCV again.
cache_opt=--no-cache-dir
if [ "${VIDPIPE_PIP_CACHE:-0}" = 1 ]; then cache_opt=; fi
# shellcheck disable=SC2086 # cache_opt is one option or nothing
"$prefix/bin/pip" install $cache_opt --disable-pip-version-check "$wheels"/vidpipe-*.whl
"$prefix/bin/vidpipe" --version
