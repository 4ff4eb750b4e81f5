# kiln: `make demo` runs the main example, `make test` builds and runs every test, `make install`
# installs the library, headers, CMake package and the `kiln` tool under PREFIX; `make sanitize`
# (ASan+UBSan) and `make sanitize-thread` (TSan) run the tests sanitized in their own build folders.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release
PREFIX ?= /usr/local

.PHONY: all build demo test install sanitize sanitize-thread bench fuzz fuzz-files format check-deps clean

all: build

check-deps:
	@missing=""; \
	command -v cmake >/dev/null || missing="$$missing cmake"; \
	command -v c++ >/dev/null || missing="$$missing g++"; \
	command -v cc >/dev/null || command -v gcc >/dev/null || command -v clang >/dev/null || missing="$$missing gcc"; \
	[ -f /usr/include/gtest/gtest.h ] || missing="$$missing libgtest-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "kiln needs these Debian packages:$$missing"; \
	  echo "install them with: sudo apt-get install$$missing"; exit 1; fi

$(BUILD)/Makefile: CMakeLists.txt | check-deps
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: check-deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS)

demo: check-deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS) --target demo
	$(BUILD)/examples/demo --out $(BUILD)/demo

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

install: check-deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS) --target kiln kiln_cli
	cmake --install $(BUILD) --prefix $(PREFIX)

sanitize: check-deps
	JOBS=$(JOBS) tools/sanitize.sh address

sanitize-thread: check-deps
	JOBS=$(JOBS) tools/sanitize.sh thread

bench: build
	$(BUILD)/bench/bench_compile
	$(BUILD)/bench/bench_c1

# kiln_fuzz (tools/fuzz): FUZZ_COUNT random graphs from FUZZ_SEED; findings print a C++ repro
FUZZ_SEED ?= 1
FUZZ_COUNT ?= 100000
fuzz: check-deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS) --target kiln_fuzz
	$(BUILD)/tools/kiln_fuzz --seed $(FUZZ_SEED) --count $(FUZZ_COUNT) --jobs $(JOBS)

# file-format fuzzing (tests/io/test_file_fuzz.cpp): FUZZ_FILES mutants of each file format
FUZZ_FILES ?= 10000
fuzz-files: check-deps $(BUILD)/Makefile
	cmake --build $(BUILD) -j $(JOBS) --target kiln_tests
	KILN_FUZZ_FILES=$(FUZZ_FILES) $(BUILD)/tests/kiln_tests --gtest_filter='FileFuzz.*'

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) build-sanitize build-sanitize-thread build-sanitize-ci
