# The README's two commands. Each installs what is missing, configures, builds (ccache, -j2), then runs.
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=
CONFIGURE = cmake -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER_LAUNCHER=ccache $(CMAKE_FLAGS)

.PHONY: run test build deps reproducibility-clang clean

deps:
	@scripts/install-deps

build: deps
	@test -f $(BUILD)/build.ninja || $(CONFIGURE) -S . -B $(BUILD)
	cmake --build $(BUILD) -j $(JOBS)

# The main job on its embedded default (an M3-like layer with a planted needle); prints a short report.
run: build
	$(BUILD)/oracle/msa run

# Every CPU test. The reproducibility hashes are also checked from a clang++ build (SPEC section 4).
test: build reproducibility-clang
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

reproducibility-clang: deps
	@test -f $(BUILD)-clang/build.ninja || \
	  $(CONFIGURE) -DCMAKE_CXX_COMPILER=clang++-14 -S . -B $(BUILD)-clang
	cmake --build $(BUILD)-clang -j $(JOBS) --target reproducibility_test
	cd $(BUILD)-clang && ctest --output-on-failure -j $(JOBS) -L golden

clean:
	rm -rf $(BUILD) $(BUILD)-clang
