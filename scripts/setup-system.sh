#!/usr/bin/env bash
# Install the Debian 12 system packages vidpipe needs (GStreamer RTSP server for the tests,
# ffmpeg, mosquitto, chromium for the web UI tests, systemd-analyze for the unit-file gates,
# promtool (package prometheus; its service is not started) for the alert rules, make, Python).
#
# Only what is missing is installed, checked with dpkg-query, so a re-run is fast and works
# offline. `apt-get update` runs only when something has to be installed. Run it as root; as
# another user it only reports what is missing (exit 1) or that nothing is (exit 0).
set -euo pipefail

PACKAGES=(
  python3
  python3-venv
  python3-gi
  gir1.2-gst-rtsp-server-1.0
  gstreamer1.0-rtsp
  gstreamer1.0-plugins-base
  gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad
  gstreamer1.0-libav
  gstreamer1.0-tools
  ffmpeg
  mosquitto
  chromium
  chromium-driver
  systemd
  prometheus
  make
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != "installed" ]]; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

if ((EUID != 0)); then
  echo "setup-system: missing Debian packages: ${missing[*]}" >&2
  echo "setup-system: install them as root:" >&2
  echo "  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
echo "setup-system: installing ${missing[*]}" >&2
# Wait for another apt or dpkg run (unattended upgrades, a parallel setup) instead of failing.
apt-get -o DPkg::Lock::Timeout=300 update
apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${missing[@]}"
