# tachyon — the two commands a user needs are `make serve` (or `make run`) and `make test`.
# Everything else here is a step those two call.

SHELL       := /bin/bash
BUILD       ?= build
JOBS        ?= $(shell nproc)
VENV        := .venv
PY          := $(VENV)/bin/python
MODEL       ?= models/SmolLM2-135M-Instruct.Q4_1.gguf
PROMPT      ?= Explain in two sentences why the sky is blue.
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DTACHYON_WERROR=ON
endif

# What building, `make run` and `make serve` need; the test suites add APT_TEST_PKGS (clang + libFuzzer's
# runtime for the fuzzers, valgrind, chromium for the dashboard test, haproxy + nginx + prometheus for the
# scale-out tests: tests/integration/test_cluster.py), installed by `make test` only.
APT_PKGS := build-essential cmake pkg-config libevent-dev libjansson-dev libpcre2-dev libxxhash-dev \
            libcurl4-openssl-dev python3-venv
APT_TEST_PKGS := clang libclang-rt-14-dev valgrind chromium haproxy nginx prometheus
# The ARM64 cross build and its emulator (docs/ARM64.md): the arm64 multiarch libraries (libevent's -dev
# package is not multiarch: scripts/arm64_deps.sh unpacks it into ARM64_DEPS instead).
BUILD_ARM64 ?= build-arm64
ARM64_DEPS  := build-arm64-deps
APT_ARM64_PKGS := gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libjansson-dev:arm64 libpcre2-dev:arm64 \
            libxxhash-dev:arm64 libcurl4-openssl-dev:arm64 libevent-2.1-7:arm64 libevent-pthreads-2.1-7:arm64

.PHONY: all deps apt apt-test apt-arm64 venv build build-arm64 models run serve test unit pytest pytest-isa \
	test-arm64 bench fuzz asan clean

all: build

deps: apt venv

# $(call apt_install,PACKAGES): installs those not installed yet
apt_install = @missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; fi

apt:
	$(call apt_install,$(APT_PKGS))

apt-test:
	$(call apt_install,$(APT_TEST_PKGS))

apt-arm64:
	@dpkg --print-foreign-architectures | grep -qx arm64 || { echo "adding the arm64 architecture"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); $$SUDO dpkg --add-architecture arm64 && $$SUDO apt-get update -qq; }
	$(call apt_install,$(APT_ARM64_PKGS))
	@scripts/arm64_deps.sh $(ARM64_DEPS)

venv: $(VENV)/.stamp
$(VENV)/.stamp: requirements-test.txt requirements-test-nodeps.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q -r requirements-test.txt
	$(VENV)/bin/pip install -q --no-deps -r requirements-test-nodeps.txt
	touch $@

build: apt
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

# tachyon and its unit tests for aarch64 (cmake/aarch64-linux-gnu.cmake); they run under qemu-aarch64.
# ARM64_TARGETS: only these targets (test-arm64 builds the binary and the unit tests it runs); empty: all.
build-arm64: apt-arm64
	cmake -S . -B $(BUILD_ARM64) -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
	  -DTACHYON_ARM64_DEPS=$(abspath $(ARM64_DEPS)) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD_ARM64) -j $(JOBS) $(addprefix --target ,$(ARM64_TARGETS))

models: venv
	scripts/fetch_models.sh

run: build models
	$(BUILD)/tachyon run -m $(MODEL) --chat -p "$(PROMPT)" -n 128

serve: build models
	$(BUILD)/tachyon serve -m $(MODEL) --host 127.0.0.1 --port 8080

unit: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@grep -h "ISA levels tested" $(BUILD)/Testing/Temporary/LastTest.log || true
	@grep -h "SKIPPED" $(BUILD)/Testing/Temporary/LastTest.log || true

# pytest-xdist workers of the pytest suites (pytest, pytest-isa, the ASan server run); 1 runs them serially in one
# process. A serial run keeps about one core busy (its user+sys time is ~95% of its wall time), so two workers
# use CI's two cores. Tests go to the workers a group at a time (--dist loadgroup; the groups: tests/conftest.py).
PYTEST_WORKERS ?= 2
PYTEST_PAR := $(if $(filter-out 0 1,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist loadgroup)

# Timing thresholds (tests marked bench) are left to `make bench`: they need an idle machine.
pytest: build models venv
	TACHYON_BIN=$(abspath $(BUILD))/tachyon $(PY) -m pytest -q -rs $(PYTEST_PAR) -m "not bench" \
	  --ignore=tests/ref/test_arm64.py tests/ref tests/integration

# The integration tests again below the host's best ISA level (scripts/pytest_isa.sh says which run where).
pytest-isa: build models venv
	PYTEST_PAR="$(PYTEST_PAR)" scripts/pytest_isa.sh $(PY) $(abspath $(BUILD))/tachyon

# The ARM64 build under qemu-aarch64 with `-cpu max` (NEON, dotprod, i8mm, SVE): every kernel's unit test
# (matmul with the thread pool, repacking, attention, ops, conversion, KV quantizers) at every ARM level
# against the scalar reference, the thread pool, the header check with the cross compiler, then detection,
# TACHYON_ISA and the logits of SmolLM2 and Gemma 3 at each level against the x86 scalar path
# (tests/ref/test_arm64.py: each emulated forward pass runs on one thread, so its tests go to the pytest-xdist
# workers one at a time, --dist load). Only the binary and the unit tests run here are built for aarch64.
ARM64_UNIT ?= test_cpu_matmul|test_cpu_repack|test_cpu_pool|test_ops|test_attention|test_quant_kv|test_tensor|test_fwd|test_cpu_features|test_cpu_convert|check_headers
test-arm64: ARM64_TARGETS = tachyon $(filter-out check_headers,$(subst |, ,$(ARM64_UNIT)))
test-arm64: build-arm64 build models venv
	cd $(BUILD_ARM64) && QEMU_CPU=max ctest --output-on-failure -j $(JOBS) -R '^($(ARM64_UNIT))$$'
	@grep -h "ISA levels tested" $(BUILD_ARM64)/Testing/Temporary/LastTest.log || true
	TACHYON_BIN=$(abspath $(BUILD))/tachyon TACHYON_ARM64_BIN=$(abspath $(BUILD_ARM64))/tachyon \
	  $(PY) -m pytest -q -rs $(PYTEST_PAR:loadgroup=load) tests/ref/test_arm64.py

# Latency / throughput / measurement-error thresholds; run on an otherwise idle machine.
bench: build models venv
	TACHYON_TIMING_CHECKS=1 $(BUILD)/test_cpu_pool
	TACHYON_BIN=$(abspath $(BUILD))/tachyon $(PY) -m pytest -q -rs -s -m bench tests/ref tests/integration

# Short, fixed-time fuzzing of every untrusted-input parser (clang + libFuzzer). Each target first replays
# its committed seeds, tests/fuzz/seeds/<target>/ (including the inputs of every crash found so far: a
# regression fails the run), then mutates for FUZZ_SECONDS (scripts/fuzz_run.sh). Undefined behaviour is fatal
# in this build; an input that takes over 20 s is reported as a hang. A fuzzer is one process on one core, so
# FUZZ_JOBS of them run at a time (one per core by default): 10 targets x 30 s on 2 cores, about 2.5 minutes
# after the build. Only the fuzz targets are built there (not the binary, unit tests or benchmarks, which other
# builds cover).
FUZZ_SECONDS ?= 30
FUZZ_JOBS ?= $(JOBS)
FUZZ_TARGETS := $(basename $(notdir $(wildcard tests/fuzz/fuzz_*.c)))
fuzz: apt apt-test
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DTACHYON_FUZZ=ON >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	@printf '%s\n' $(addprefix build-fuzz/,$(FUZZ_TARGETS)) | \
	  xargs -P $(FUZZ_JOBS) -n 1 scripts/fuzz_run.sh $(FUZZ_SECONDS) || { echo "make fuzz: a target FAILED"; exit 1; }

# Unit tests and a real generation under AddressSanitizer + UndefinedBehaviorSanitizer (the binary and the
# unit tests are built, not the benchmarks; check_headers compiles headers alone, which `make unit` already did).
UNIT_TARGETS := $(basename $(notdir $(wildcard tests/unit/test_*.c)))
asan: apt apt-test venv models
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DTACHYON_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build build-asan -j $(JOBS) --target tachyon $(UNIT_TARGETS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -E '^check_headers$$'
	ASAN_OPTIONS=detect_leaks=1 build-asan/tachyon run -m ../shared/testdata/models/stories260K.gguf -p "Once upon a time" -n 32 >/dev/null
	# The server under ASan/UBSan through the API and robustness suites (timing thresholds excluded: a
	# Debug+ASan binary is too slow for them); any sanitizer report fails the run.
	ASAN_OPTIONS=detect_leaks=1 TACHYON_BIN=$(abspath build-asan)/tachyon $(PY) -m pytest -q -rs $(PYTEST_PAR) \
	  -m "not bench" tests/integration/test_api.py tests/integration/test_robustness.py

# Within make test the fuzzers run 15 s each (their committed seeds replay in full first); `make fuzz` alone, 30 s.
test: deps apt-test build models unit pytest pytest-isa test-arm64
	$(MAKE) fuzz FUZZ_SECONDS=15
	$(MAKE) asan
	@echo "make test: all suites passed"

clean:
	rm -rf $(BUILD) build-asan build-fuzz $(BUILD_ARM64) $(ARM64_DEPS)
