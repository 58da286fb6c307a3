# napari-imagebench: `make bench` runs the built-in suite, `make test` runs every test.
# Both set themselves up first (system packages when root, a virtual environment in .venv).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.imagebench-installed
SAMPLES ?= 1

.PHONY: setup bench test test-core test-napari benchmarks docs-shots clean

setup: $(STAMP)

$(STAMP): pyproject.toml tools/setup.sh
	bash tools/setup.sh "$(PYTHON)" "$(VENV)"
	touch $@

bench: setup
	$(BIN)/imagebench run --subject reference --samples $(SAMPLES)

test: setup
	bash tools/run_tests.sh "$(BIN)"

test-core: setup
	$(BIN)/python -m pytest tests --ignore=tests/napari

test-napari: setup
	xvfb-run -a -s "-screen 0 1600x1200x24" $(BIN)/python -m pytest tests/napari

benchmarks: setup
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

docs-shots: setup
	xvfb-run -a -s "-screen 0 1600x1200x24" $(BIN)/python tools/make_screenshots.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info outcomes
