#!/usr/bin/env bash
# Set up everything napari-imagebench needs on a fresh Debian/Ubuntu machine:
# bubblewrap (the sandbox every command: subject runs in; util-linux's prlimit and setpriv set its
# limits and drop it to a uid of its own, mount's umount unmounts its workspace), the system packages for the Qt tests
# (Xvfb, Mesa, xcb libraries) and for the report test (Chromium), then a virtual environment
# with the package and its test extras.
set -euo pipefail
PYTHON=${1:-python3}
VENV=${2:-.venv}

SYSTEM_PACKAGES=(
  bubblewrap util-linux mount
  xvfb xauth
  libgl1 libgl1-mesa-dri libegl1 libglib2.0-0 libfontconfig1 libdbus-1-3
  libxkbcommon-x11-0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
  libxcb-render-util0 libxcb-xinerama0 libxcb-xfixes0 libxcb-shape0 libxcb-cursor0
  libx11-xcb1 libxi6 libxrender1 libxext6 libsm6 libice6
  chromium
)

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
  for p in "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
fi
if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # chromium is named chromium-browser on some Ubuntu releases; try both.
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
      rest=("${missing[@]/chromium}")
      apt-get install -y -qq --no-install-recommends ${rest[@]} >/dev/null
      apt-get install -y -qq --no-install-recommends chromium-browser >/dev/null 2>&1 \
        || echo "setup: no chromium package; the HTML report browser test will be skipped"
    fi
  else
    echo "setup: these system packages are missing: ${missing[*]}" >&2
    echo "setup: run as root (or: sudo apt-get install ${missing[*]}) so the Qt tests can run under Xvfb" >&2
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q -e ".[test]"
# The binding is PyQt6 (the test extra); a PyQt5 left from an older set-up would win qtpy's choice.
if "$VENV/bin/python" -m pip show -q PyQt5 >/dev/null 2>&1; then
  echo "setup: removing PyQt5 from $VENV (the Qt binding is PyQt6 now)"
  "$VENV/bin/python" -m pip uninstall -q -y PyQt5 PyQt5-Qt5 PyQt5_sip
fi
# The pinned stardist wheel the authoring scripts read real nuclei from (tests re-run them).
"$VENV/bin/python" tools/sources.py >/dev/null
if ! command -v bwrap >/dev/null 2>&1; then
  echo "setup: bwrap (package bubblewrap) is missing: command: subjects will be refused unless run with --no-sandbox" >&2
fi
echo "setup: ready ($("$VENV/bin/python" --version), $VENV)"
