# The README's two commands. Each installs what is missing, configures, builds (ccache, -j2), then runs.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
# The project's Python (scripts/install-python-deps): its tests, the numpy emulations and the msa_oracle module.
VENV ?= $(CURDIR)/.venv
PYTHON_FLAGS = -DPython3_EXECUTABLE=$(VENV)/bin/python
CONFIGURE = cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache $(PYTHON_FLAGS) $(CMAKE_FLAGS)
CLANG ?= clang++-14
# make sanitize: the unit tests under ASan + UBSan (clang, RelWithDebInfo with line tables only, all that the
# sanitizers' reports need), UBSan fatal. UBSan's pointer-overflow check (pointer arithmetic that wraps around the
# address space) is left out: with it clang 14 took 304 s on simd/fp32.cc instead of 95, and the slowest tests ran up to
# twice as long. ASan still reports every access out of bounds, and `make fuzz` keeps the check.
SANITIZE_FLAGS = -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-sanitize=pointer-overflow \
  -fno-omit-frame-pointer
SANITIZE_OPT_FLAGS = -O2 -gline-tables-only -DNDEBUG
# The ASan build leaves out Highway's SSE4 target: its simd sources, compiled once per target, are most of that
# build's time, and SSSE3 and EMU128 keep the 16-byte vectors (AVX2 and AVX3 the 32- and 64-byte ones) under ASan.
SANITIZE_HWY_FLAGS = -DHWY_DISABLED_TARGETS=HWY_SSE4
SANITIZE_LABELS ?= unit|reference|property|golden|fuzz
# Left out of those: package_consumer (an outside project without the sanitizer flags), the full golden suite's
# shard identity (M3-sized cases: minutes under ASan; the normal build runs it) and the checks that run no compiled
# code of the project (format_check, quote_check_test: Python alone).
SANITIZE_EXCLUDE ?= ^(package_consumer|format_check|quote_check_test|GoldenShardTest\.ThreeShardsOfFullMergeToTheWholeRunsManifest)$$
# The simd backend's small cases on every Highway target compiled there (EMU128 included, where a vector may read past
# a row's end), its M3-sized canonical cases on EMU128 only (the exclusion: every target whose name does not start
# with E): the simd label's large cases would take too long under ASan.
SANITIZE_SIMD_TESTS ?= ^Canonical/Fp32OnEveryTarget|^Fp32Rank|^Fp32Range|^EveryCompiledTarget/SimdTarget\.(Canonical|NonFinite|Overflowing)
SANITIZE_SIMD_EXCLUDE ?= ^Canonical/Fp32OnEveryTarget\.PassesTheOracle/[A-DF-Z][A-Z0-9_]*_m3_
# The sanitizer and fuzz builds leave the CUDA backend out (device code is not instrumented, and nvcc time
# counts); on a GPU machine `make fuzz FUZZ_CMAKE_FLAGS=` makes the differential fuzzer judge gpu too.
SANITIZE_CMAKE_FLAGS ?= -DMSA_ENABLE_CUDA=OFF -DMSA_BUILD_BENCH=OFF -DMSA_BUILD_PYTHON=OFF
FUZZ_CMAKE_FLAGS ?= -DMSA_ENABLE_CUDA=OFF
# make fuzz: each target runs FUZZ_SECONDS on a copy of its corpus under $(BUILD)-fuzz/corpus.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= fuzz_safetensors fuzz_inputs fuzz_differential
FUZZ_FLAGS ?= -rss_limit_mb=2048 -timeout=10 -max_len=8192 -print_final_stats=1

.PHONY: run test build deps reproducibility-clang sanitize fuzz bench clean

deps:
	@scripts/install-deps

build: deps
	@test -f $(BUILD)/build.ninja || $(CONFIGURE) -S . -B $(BUILD)
	cmake --build $(BUILD) -j $(JOBS)

# The main job on its embedded default (an M3-like layer with a planted needle); prints a short report.
run: build
	$(BUILD)/tools/msa/msa run

# Every CPU test. The reproducibility hashes are also checked from a clang++ build (SPEC section 4), and
# the unit tests once under ASan + UBSan (sanitize); the full suite's summary comes last, then, if any failed, their
# output again (a log cut to its tail still shows why).
test: build reproducibility-clang sanitize
	cd $(BUILD) && { ctest --output-on-failure -j $(JOBS) || { $(CURDIR)/scripts/print-failed-tests .; exit 1; }; }

reproducibility-clang: deps
	@test -f $(BUILD)-clang/build.ninja || \
	  $(CONFIGURE) -DCMAKE_CXX_COMPILER=clang++-14 -DMSA_ENABLE_CUDA=OFF -DMSA_BUILD_PYTHON=OFF -S . -B $(BUILD)-clang
	cmake --build $(BUILD)-clang -j $(JOBS) --target reproducibility_test
	cd $(BUILD)-clang && ctest --output-on-failure -j $(JOBS) -L golden

# The tests of SANITIZE_LABELS (fuzz: the corpus replays) but SANITIZE_EXCLUDE, built with clang++ under ASan + UBSan.
sanitize: deps
	@test -f $(BUILD)-asan/build.ninja || \
	  cmake -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache $(PYTHON_FLAGS) $(CMAKE_FLAGS) \
	    $(SANITIZE_CMAKE_FLAGS) -DCMAKE_CXX_COMPILER=$(CLANG) \
	    "-DCMAKE_CXX_FLAGS=$(SANITIZE_FLAGS) $(SANITIZE_HWY_FLAGS)" \
	    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=$(SANITIZE_OPT_FLAGS)" -S . -B $(BUILD)-asan
	cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/fuzz/lsan.supp ctest --output-on-failure -j $(JOBS) -L "$(SANITIZE_LABELS)" -E '$(SANITIZE_EXCLUDE)'
	cd $(BUILD)-asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/fuzz/lsan.supp ctest --output-on-failure -j $(JOBS) -R "$(SANITIZE_SIMD_TESTS)" \
	  -E '$(SANITIZE_SIMD_EXCLUDE)'

# libFuzzer with ASan + UBSan (fuzz/CMakeLists.txt, MSA_FUZZ=ON): builds fuzz_<target> for each of FUZZ_TARGETS,
# then runs them one after the other for FUZZ_SECONDS each, on a copy of the checked-in corpus (new entries
# accumulate under $(BUILD)-fuzz/corpus, never in the tree); crashes go to $(BUILD)-fuzz/artifacts.
# Example: make fuzz FUZZ_TARGETS=fuzz_inputs FUZZ_SECONDS=600
fuzz: deps
	@test -f $(BUILD)-fuzz/build.ninja || \
	  cmake -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache $(PYTHON_FLAGS) $(CMAKE_FLAGS) \
	    $(FUZZ_CMAKE_FLAGS) -DCMAKE_CXX_COMPILER=$(CLANG) -DMSA_FUZZ=ON -DBUILD_TESTING=OFF -S . -B $(BUILD)-fuzz
	cmake --build $(BUILD)-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	@mkdir -p $(BUILD)-fuzz/artifacts
	@set -e; for target in $(FUZZ_TARGETS); do \
	  mkdir -p $(BUILD)-fuzz/corpus/$$target; \
	  cp fuzz/corpus/$$target/* $(BUILD)-fuzz/corpus/$$target/; \
	  case $$target in fuzz_safetensors|fuzz_inputs) dict=-dict=fuzz/safetensors.dict;; *) dict=;; esac; \
	  echo "fuzz: $$target for $(FUZZ_SECONDS) s"; \
	  LSAN_OPTIONS=suppressions=$(CURDIR)/fuzz/lsan.supp \
	  $(BUILD)-fuzz/fuzz/$$target $(BUILD)-fuzz/corpus/$$target -max_total_time=$(FUZZ_SECONDS) $(FUZZ_FLAGS) \
	    $$dict -artifact_prefix=$(BUILD)-fuzz/artifacts/$$target- ; \
	done

# The CPU benchmarks of bench/ (Google Benchmark): ceilings, the simd branches, exact / fp32 / reference end to
# end and the Eigen dense peer; JSON and a markdown table under bench/results/ (a few minutes; run on a quiet machine).
BENCH_STAMP ?= $(shell date +%F)
bench: build
	@mkdir -p bench/results
	$(BUILD)/bench/cpu_bench --benchmark_out=bench/results/cpu_bench_$(BENCH_STAMP).json --benchmark_out_format=json
	python3 bench/cpu_table.py bench/results/cpu_bench_$(BENCH_STAMP).json --commit $$(git rev-parse --short HEAD) \
	  > bench/results/cpu_bench_$(BENCH_STAMP).md
	@cat bench/results/cpu_bench_$(BENCH_STAMP).md

clean:
	rm -rf $(BUILD) $(BUILD)-clang $(BUILD)-asan $(BUILD)-fuzz
