# The front door. `make demo` and `make test` work on a fresh machine: both install
# what they need first (scripts/install-deps.sh is a fast no-op once done).
PYTHON ?= python3
PREFIX ?= /usr/local
JOBS ?= $(shell nproc)
# The tests labelled waits (tests/CMakeLists.txt) sleep through deadlines most of their time:
# they run after the others, this many at once.
WAIT_JOBS ?= $(shell echo $$(( 2 * $(JOBS) )))

.PHONY: bench all install-deps build demo test test-release test-asan test-python test-wheel test-tsan soak install \
	format clean fuzz fuzz-smoke fuzz-build

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

test: test-release test-asan test-python test-wheel

# The C++ suite natively, at this CPU's newest ISA; the tests that wait out a deadline (label
# waits) in a pass of their own, at more jobs than cores.
test-release: build
	ctest --preset release -j $(JOBS) -LE waits
	ctest --preset release -j $(WAIT_JOBS) -L waits

# Under ASan + UBSan, less the tests labelled heavy (repeats of paths the W=2..4 tests cover,
# see tests/ops/CMakeLists.txt), plus the fuzz targets replaying their seed corpus. With
# commfuse's kernel choices (and oneDNN's, via the same cap) held to AVX2, so that one machine
# checks the paths of older CPUs too while the release run checks this CPU's newest: the
# capped pass used to be a third run of the release suite (2 minutes of CI's 30). Then the
# unit tests and the fuzz replays (label unit), less the bootstrap's and communicator
# creation's (TCP groups and their waits, no kernel), once more under ASan at this CPU's
# newest ISA, so that its vector loops run under the sanitizers too. On a CPU
# whose newest ISA is AVX2 or older the cap changes nothing. The SSE4.1 paths are tested on
# every CPU, in both builds (unit_tests_isa_sse41).
test-asan: install-deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	@echo "test-asan: with COMMFUSE_MAX_CPU_ISA=avx2 (commfuse info names this CPU's newest ISA)"
	COMMFUSE_MAX_CPU_ISA=avx2 ctest --preset asan -j $(JOBS) -LE "heavy|waits"
	COMMFUSE_MAX_CPU_ISA=avx2 ctest --preset asan -j $(WAIT_JOBS) -L waits -LE heavy
	ctest --preset asan -j $(JOBS) -L unit -E '^(Bootstrap|CommInit|InitMethod)\.'

# ThreadSanitizer over the multi-rank tests (shm, MPI with its progress thread, operators,
# recovery, soak, fault injection). Not part of `make test`: the tsan build and run take
# about 8 minutes on 2 cores, which CI's budget does not have. Open MPI is not built with
# TSan: tests/multirank/tsan.supp hides reports whose stack passes through it.
TSAN_TESTS ?= ^(shm|mpi)_|_recover_|_soak_|ops_(shm|mpi)_numerics_(fused_)?w2|quant_(shm|mpi)_numerics_w2|ops_(shm|mpi)_alltoall_w2|fault_(all_reduce|all_gather_matmul|alltoall_quant_matmul)
test-tsan: install-deps
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS) --target commfuse_cli commfuse_rank_tests \
	    commfuse_alloc_rank_tests commfuse_ops_rank_tests commfuse_quant_rank_tests
	TSAN_OPTIONS=suppressions=$(CURDIR)/tests/multirank/tsan.supp \
	    ctest --preset tsan -j $(JOBS) -R '$(TSAN_TESTS)'

# `pip install .` from this tree into a fresh venv, then two ranks from the installed
# package (scripts/check-wheel.sh; about 2 minutes, the library built once more).
test-wheel: install-deps
	PYTHON=$(PYTHON) scripts/check-wheel.sh

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
	export COMMFUSE_CLI=$(CURDIR)/build/bin/commfuse && \
	set -x && $(PYTHON) -m pytest -q -m "not torch" tests/python && \
	COMMFUSE_REQUIRE_TORCH=1 "$$torch_py" -m pytest -q -m torch tests/python

# The benchmark report: every operator and collective over a grid of shapes, dtypes and
# world sizes (shm, MPI/TCP, a rate-limited network between namespaces, PyTorch + gloo),
# rows in bench/results/<time>/, then REPORT.md with plots there. A full run (19.5 minutes
# on the 2-core AMX Xeon, 32.5 on the Zen 4 VM, whose GEMMs are slower) also refreshes the committed bench/REPORT.md, bench/report/ and the README's
# performance section; QUICK=1 (about a minute after the build) a smaller grid, once.
# BENCH_ARGS: more bench/run.py options (--only, --skip, --reps).
QUICK ?=
BENCH_ARGS ?=
bench: build
	@py=$$(PYTHON=$(PYTHON) TORCH_PYTHON=$(TORCH_PYTHON) TORCH_VENV=$(TORCH_VENV) \
	    scripts/install-bench-deps.sh) && \
	"$$py" bench/run.py --build $(CURDIR)/build $(if $(QUICK),--quick) $(BENCH_ARGS)

# 10^5 mixed calls (every operator and collective, random shapes and dtypes, bad arguments
# now and then) at W = 4 on shared memory, then over MPI, with results sampled against
# exact references; fails if RSS grows 5% after warm-up or /dev/shm gains entries.
SOAK_OPS ?= 100000
soak: build
	COMMFUSE_SOAK_OPS=$(SOAK_OPS) ./build/bin/commfuse launch -n 4 -- \
	    ./build/bin/commfuse_ops_rank_tests soak
	OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 COMMFUSE_SOAK_OPS=$(SOAK_OPS) \
	    mpirun --oversubscribe --mca btl tcp,self -x COMMFUSE_TRANSPORT=mpi -x COMMFUSE_SOAK_OPS \
	    -n 4 ./build/bin/commfuse_ops_rank_tests soak

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
	rm -rf build build-debug build-asan build-tsan build-fuzz
