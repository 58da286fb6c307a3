#!/usr/bin/env bash
# Run every check: the import contracts, then the whole test suite (the Qt tests need a display,
# so everything runs under Xvfb).
set -euo pipefail
BIN=${1:-.venv/bin}
# The house's layers first (pyproject.toml [tool.importlinter]): a broken contract fails the run;
# then the lint and import order (pyproject.toml [tool.ruff]).
"$BIN/lint-imports" --no-cache
"$BIN/ruff" check src tests tools benchmarks examples
if command -v xvfb-run >/dev/null 2>&1; then
  exec xvfb-run -a -s "-screen 0 1600x1200x24" "$BIN/python" -m pytest -q
fi
echo "run_tests: xvfb-run is missing; the napari tests will be skipped (install xvfb)" >&2
exec "$BIN/python" -m pytest -q
