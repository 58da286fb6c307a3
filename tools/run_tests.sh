#!/usr/bin/env bash
# Run the whole test suite: the Qt tests need a display, so everything runs under Xvfb.
set -euo pipefail
BIN=${1:-.venv/bin}
if command -v xvfb-run >/dev/null 2>&1; then
  exec xvfb-run -a -s "-screen 0 1600x1200x24" "$BIN/python" -m pytest -q
fi
echo "run_tests: xvfb-run is missing; the napari tests will be skipped (install xvfb)" >&2
exec "$BIN/python" -m pytest -q
