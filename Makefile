# `make demo` and `make test` each do all set-up on a fresh machine: create .venv, install, run.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
# CPU wheel of torch (an unpinned torch would pull a multi-GB CUDA build). On a GPU machine,
# install your CUDA build of torch first, then `pip install -e .`.
TORCH_SPEC ?= torch==2.13.0

.PHONY: demo demo-optimize test test-torch211 unit lint install clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	@# kernelsmith[flashinfer]'s schema without flashinfer-python's CUDA wheels (its extra pulls them): the CPU tests need no more.
	@# flashinfer-bench goes in last, with --no-deps, and is out while the others go in (a rerun): pip checks the
	@# installed set after every install that resolves, and would print a resolver ERROR for the flashinfer-python it lacks.
	$(PY) -m pip uninstall -q -y flashinfer-bench 2>/dev/null || true
	$(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test,train,ray,capture]"
	$(PY) -m pip install -q "safetensors>=0.5" "docstring-parser>=0.16"
	$(PY) -m pip install -q --no-deps "flashinfer-bench>=0.1.2,<0.2"
	@# Sandboxes use bubblewrap (Debian's package) for a read-only, network-less view; without it
	@# they still run, less isolated (docs/integrity.md).
	@command -v bwrap >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q bubblewrap || { apt-get update -q && apt-get install -y -q bubblewrap; }; } >/dev/null 2>&1; } || \
	  echo "note: bubblewrap is not installed: candidate sandboxes run without filesystem and network isolation"
	@# load_inline candidates (CUDA C++, and C++ on the CPU) are built with the host's C++ compiler.
	@command -v c++ >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q g++ || { apt-get update -q && apt-get install -y -q g++; }; } >/dev/null 2>&1; } || \
	  echo "note: no C++ compiler (c++): load_inline candidates and their tests cannot build (apt-get install g++)"
	@# The HTML report's tests open it in Debian's headless Chromium (driven by selenium).
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  { apt-get install -y -q chromium chromium-driver || { apt-get update -q && apt-get install -y -q chromium chromium-driver; }; } >/dev/null 2>&1; } || \
	  echo "note: chromium and chromium-driver are not installed: the report tests will fail (apt-get install chromium chromium-driver)"
	touch $(STAMP)

# A short search with the launch-parameter tuner (no LLM needed) on a bundled suite task, at its
# CPU sizes with the Triton interpreter; it prints where the best kernel and the summary went.
# Rerunning resumes the same run directory (and adds nothing once its iterations are done).
DEMO_RUN ?= runs/demo-softmax
demo: $(STAMP)
	$(VENV)/bin/kernelsmith evolve examples/suite/softmax.py --seed examples/suite_seeds/softmax.py \
	  --mutator tune --iterations 6 --device cpu --small --run-dir $(DEMO_RUN)

# `kernelsmith optimize` on the tiny Llama decode step on the CPU: capture, our own seeds (seeds.py), a
# tuner search per region for its share of the budget, the patch checked end to end, and the page
# ($(DEMO_WORK)/report.html). Speeds are the Triton interpreter's: relative only. Rerunning resumes.
DEMO_WORK ?= runs/demo-optimize
demo-optimize: $(STAMP)
	$(VENV)/bin/kernelsmith optimize examples/llama_decode/model.py:tiny_decode_step --device cpu \
	  --seeds examples/llama_decode/seeds.py:seed_for --budget 1m --out $(DEMO_WORK)

# One pytest worker per core; each test file stays on one worker, in file order (some files
# rely on their order). A run that collects no test exits 5, which fails the target.
test: lint
	$(PY) -m pytest -q -n auto --dist loadfile --durations=15 tests

# The tests whose behaviour depends on torch's version (Dynamo's tracing: the eager patch, capture, the
# compiled patch, seeds) under the device image's torch 2.11 and transformers 5.17, in a venv of their own
# (.venv-torch211; not part of `make test` or CI). PyPI's torch 2.11.0 for Linux is the CUDA 13 build (its
# nvidia-* wheels ~2 GB to fetch, ~5 GB installed): it runs on the CPU like the CPU wheel. The editable
# install points at the checkout that made the venv; pytest imports kernelsmith from the working directory.
VENV211 := .venv-torch211
STAMP211 := $(VENV211)/.installed-stamp
TORCH211_SPEC ?= torch==2.11.0
TRANSFORMERS211_SPEC ?= transformers==5.17.0
# tests/seed/test_seed.py is left out: its cases are torch 2.13's recorded Inductor code (2.11 lacks what it imports)
TESTS211 ?= tests/apply/test_apply_eager.py tests/apply/test_apply_compile.py tests/apply/test_apply_outputs.py tests/apply/test_apply_fused.py \
  tests/capture tests/unit/test_seed_trace.py tests/unit/test_patch_interpreter.py

$(STAMP211): pyproject.toml Makefile
	test -x $(VENV211)/bin/python || $(PYTHON) -m venv $(VENV211)
	$(VENV211)/bin/python -m pip install -q --upgrade pip
	$(VENV211)/bin/python -m pip install -q "$(TORCH211_SPEC)"
	@# numpy < 2.4: Triton 3.6's interpreter (the CPU's) converts 1-element arrays to scalars, an error from 2.4
	$(VENV211)/bin/python -m pip install -q -e ".[test,capture]" "$(TORCH211_SPEC)" "$(TRANSFORMERS211_SPEC)" "numpy<2.4"
	touch $(STAMP211)

test-torch211: $(STAMP211)
	$(VENV211)/bin/python -m pytest -q -n auto --dist loadfile --durations=10 $(TESTS211)

# The unit tests alone (tests/unit: no sandbox, subprocess or server): seconds.
unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

# Code health, before any test: the package's layers and kernelsmith/evaluate/'s rooms point one way and
# no package's modules import one another in a circle (import-linter, contracts in pyproject.toml), ruff's
# lint and format, pyright (basic), and sizes (tools/check_sizes.py: modules <= 400 lines, functions <= 80,
# <= 15 modules directly in kernelsmith/evaluate/, whose rooms are subpackages).
lint: $(STAMP)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/ruff check kernelsmith tests benchmarks tools
	$(VENV)/bin/ruff format --check kernelsmith tests benchmarks tools
	$(VENV)/bin/pyright
	$(PY) tools/check_sizes.py

clean:
	rm -rf $(VENV) $(VENV211) build *.egg-info
