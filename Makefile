# The front door. `make demo` and `make test` work on a fresh machine: both install
# what they need first (scripts/install-deps.sh is a fast no-op once done).
PYTHON ?= python3
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)

.PHONY: all install-deps build demo test test-release test-asan test-python install format clean \
	fuzz fuzz-smoke fuzz-build

all: build

install-deps:
	@PYTHON=$(PYTHON) scripts/install-deps.sh

# Release build in build/ (build/bin/commfuse, build/lib/libcommfuse.so) and the Python
# package made importable for $(PYTHON) (a .pth file pointing at build/python).
build: install-deps
	cmake --preset release -DPython_EXECUTABLE=$$(command -v $(PYTHON)) >/dev/null
	cmake --build --preset release -j $(JOBS)
	@$(PYTHON) scripts/link_python_package.py build/python

demo: build
	./build/bin/commfuse demo

test: test-release test-asan test-python

# The C++ suite natively, then again with commfuse's kernel choices (and oneDNN's, via the
# same cap) held to AVX2, so one machine checks the paths of older CPUs too.
test-release: build
	ctest --preset release -j $(JOBS)
	COMMFUSE_MAX_CPU_ISA=avx2 ctest --preset release -j $(JOBS)

test-asan: install-deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

# PYTHONPATH: test this tree's build/python, whatever the .pth file points at.
# The tests marked `torch` run in a second pytest pass, with an interpreter that has torch:
# $(TORCH_PYTHON) when set, $(PYTHON) when it has torch, else a venv in $(TORCH_VENV) over
# Debian's python3-torch (scripts/install-torch-python.sh installs it once). There
# COMMFUSE_REQUIRE_TORCH=1 makes a missing torch a failure, not a skip.
TORCH_PYTHON ?=
TORCH_VENV ?= build/torch-venv
test-python: build
	@torch_py=$$(PYTHON=$(PYTHON) TORCH_PYTHON=$(TORCH_PYTHON) TORCH_VENV=$(TORCH_VENV) \
	    scripts/install-torch-python.sh) && \
	export PYTHONPATH=$(CURDIR)/build/python$${PYTHONPATH:+:$$PYTHONPATH} && \
	set -x && $(PYTHON) -m pytest -q -m "not torch" tests/python && \
	COMMFUSE_REQUIRE_TORCH=1 "$$torch_py" -m pytest -q -m torch tests/python

# libFuzzer targets (fuzz/README.md) under ASan + UBSan, built with clang in build-fuzz/.
# `make fuzz` runs each FUZZ_SECONDS from its grown corpus; `make fuzz-smoke` runs each
# FUZZ_SMOKE_RUNS inputs from the tree's seeds. FUZZ_TARGETS picks some (default: all).
# Either fails on any finding and ends with the executions per target.
FUZZ_SECONDS ?= 600
FUZZ_SMOKE_RUNS ?= 2000
FUZZ_TARGETS ?=
fuzz-build:
	@FUZZ=1 PYTHON=$(PYTHON) scripts/install-deps.sh
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)

fuzz: fuzz-build
	scripts/run_fuzz.sh build-fuzz --seconds $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-smoke: fuzz-build
	scripts/run_fuzz.sh build-fuzz --runs $(FUZZ_SMOKE_RUNS) $(FUZZ_TARGETS)

install: build
	cmake --install build --prefix $(PREFIX)

format:
	clang-format -i $$(git ls-files '*.cpp' '*.hpp' '*.h')

clean:
	rm -rf build build-debug build-asan build-fuzz
