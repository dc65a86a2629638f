# lmstream — build, test, run and measure.
#
#   make          build build/liblmstream.so and check the header against it
#   make run      stream an answer from MODEL (PROMPT="..." asks something else);
#                 needs only Go, a C compiler, make and (for the download)
#                 python3 with pip
#   make test     every suite: Go (race detector), fuzz smoke, conformance,
#                 C programs under valgrind; installs what only the tests
#                 need first (make deps-test)
#   make deps-test  Debian packages the tests need, and .venv/ (a virtual
#                 environment inside the repository) with the PyPI packages
#                 every Python step runs with
#   make bench    benchmarks, printing numbers and ratios
#   make fuzz     long fuzzing runs (FUZZTIME per Go target; the C-ABI request
#                 fuzzer for FUZZ_TRIES replay and FUZZ_MODEL_TRIES model tries)
#   make model    fetch MODEL into models/ and verify it
#
# MODEL is a model's name or a path to a .gguf: smollm2-135m (the default),
# qwen2.5-coder-0.5b, qwen2.5-coder-1.5b or gemma3-270m (tests/scripts/fetch_model.sh
# --names), e.g. `make model run MODEL=qwen2.5-coder-1.5b`.
#   make install  the library, lmstream.h, lmstream.hpp and lmstream.pc under
#                 PREFIX (/usr/local), staged under DESTDIR if set, and the
#                 lmstream-serve command in PREFIX/bin; make uninstall
#   make test-serve  the OpenAI-compatible server with real clients (the
#                 openai package, curl), on replay and on the default model
#   make clean

VERSION  := 0.1.0
# go.mod's Go, fetched into ~/sdk by tests/scripts/check_go.sh where the
# system Go is too old to fetch it itself (Debian 12's 1.19), is used first.
GO_WANT  := $(shell sed -n 's/^go //p' go.mod)
GO_SDK   := $(HOME)/sdk/go$(GO_WANT)/bin/go
GO       ?= $(shell test -x $(GO_SDK) && echo $(GO_SDK) || echo go)
CC       ?= gcc
PREFIX   ?= /usr/local
BUILD    := build
# The library is built as liblmstream.so.N with that SONAME, N the header's
# LMS_ABI_VERSION, so programs linked against it record the ABI they were
# built for and a program of another ABI finds no library rather than the
# wrong one; liblmstream.so is the symlink the linker (-llmstream) and the
# bindings look for.
ABI      := $(shell sed -n 's/^\#define LMS_ABI_VERSION \([0-9][0-9]*\).*/\1/p' include/lmstream.h)
SONAME   := liblmstream.so.$(ABI)
LIB      := $(BUILD)/liblmstream.so
LIB_REAL := $(BUILD)/$(SONAME)
# The test tools (pytest, the tokenizer oracles, NVRTC) live in a virtual
# environment inside the repository: Debian's python3 refuses pip installs
# into the system (externally-managed-environment), and nothing outside the
# checkout should change for a test run. VENV_RUN puts it first for a step.
VENV     := .venv
PYTHON   := $(VENV)/bin/python
VENV_RUN := VIRTUAL_ENV=$(abspath $(VENV)) PATH="$(abspath $(VENV))/bin:$$PATH"
MODEL    := smollm2-135m
FETCH    := bash tests/scripts/fetch_model.sh
# MODEL_PATH is the file MODEL names (MODEL itself when it is a path).
MODEL_PATH := $(shell $(FETCH) --path '$(MODEL)')
MODEL_NAMES := $(shell $(FETCH) --names)
# The models `make test` fetches: the engine's correctness tests run on them.
TEST_MODELS := smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b gemma3-270m
FUZZTIME ?= 5m
# CI and `make test` fuzz each target briefly, by execution count (about 15 s
# each here); `make fuzz` for real. FUZZ_SMOKE=N sets one count for all.
# Counts, not durations: go1.26's coordinator can fail a duration-bound run
# with a bare "context deadline exceeded" at the deadline on a loaded machine
# (golang/go#75804, fixed in go1.27), which a count has no deadline to race.
FUZZ_SMOKE ?=
# Damaged GGUF files `make fuzz` loads in child processes (tests/modelfile).
MUTATOR_TRIES ?= 5000
GO_SOURCES := $(shell find . -path ./build -prune -o -path ./$(VENV) -prune -o -name '*.go' -print) go.mod go.sum
CAPI_C     := $(wildcard capi/*.c) include/lmstream.h

# Fuzz targets as package:FuzzName:smoke-executions.
FUZZ_TARGETS := ./streaming:FuzzSanitizer:250000 ./streaming:FuzzStopMatcher:250000 \
                ./core/gguf:FuzzParse:350000 ./core/tokenizer:FuzzRoundTrip:25000 \
                ./core/grammar:FuzzGrammar:150000 ./core/jinja:FuzzTemplate:15000 \
                ./core/reply:FuzzReply:80000

.PHONY: bench-decode bench-adaserve adaserve-plots all lib check-header check-links check-deps lint run test test-go test-py test-c test-elixir wheel fuzz-smoke fuzz bench deps deps-test model \
        test-models clean vet install uninstall test-install go-version test-readme serve test-serve gpu-baseline

all: lib check-header check-links serve

lib: $(LIB)

# Before anything is built: a Go older than go.mod's gets go.mod's toolchain
# (its own GOTOOLCHAIN download, or tests/scripts/check_go.sh's for a Go
# too old for that), or make stops with the command that installs one.
go-version:
	@bash tests/scripts/check_go.sh $(GO)

# A cold build is silent for a while (the Go toolchain compiles the engine),
# so say what is going on first.
$(LIB_REAL): $(GO_SOURCES) $(CAPI_C) | go-version
	@mkdir -p $(BUILD)
	@echo "building $@ (a cold build takes a minute or so) ..."
	$(GO) build -buildmode=c-shared -ldflags=-extldflags=-Wl,-soname,$(SONAME) -o $@ ./capi
	@rm -f $(BUILD)/liblmstream.so.h  # the public header is include/lmstream.h

$(LIB): $(LIB_REAL)
	ln -sf $(SONAME) $@

# lmstream-serve: the OpenAI-compatible HTTP server (core/serve), a plain Go
# program over the same runtime the library drives; it needs no liblmstream.
SERVE := $(BUILD)/lmstream-serve
serve: $(SERVE)
$(SERVE): $(GO_SOURCES) | go-version
	@mkdir -p $(BUILD)
	$(GO) build -o $@ ./core/cmd/lmstream-serve

check-header: $(LIB)
	python3 tests/scripts/check_header.py $(LIB) include/lmstream.h

# The library must load where there is no CUDA: the driver and NVRTC are
# opened at run time (core/cuda), so no NEEDED entry may name them.
check-links: $(LIB)
	@if readelf -d $(LIB) | grep NEEDED | grep -Ei 'cuda|nvrtc|cublas'; then \
	  echo "check-links: $(LIB) links a CUDA library (above)"; exit 1; fi
	@echo "check-links: $(LIB) links no CUDA library"

# What only the tests need: `make run` never comes here.
$(BUILD)/.deps: tests/scripts/setup.sh go.mod | go-version
	bash tests/scripts/setup.sh $(VENV)
	@mkdir -p $(BUILD) && touch $@

deps-test: $(BUILD)/.deps
deps: deps-test

model: $(MODEL_PATH)

test-models: $(foreach m,$(TEST_MODELS),$(shell $(FETCH) --path $(m)))

# One rule per known model: fetched again (and verified) when the committed
# sums change. A MODEL given as a path has no rule: it must exist.
define model_rule
$(shell $(FETCH) --path $(1)): models/models.sha256
	$(FETCH) $(1)
endef
$(foreach m,$(MODEL_NAMES),$(eval $(call model_rule,$(m))))

$(BUILD)/stream: examples/stream.c include/lmstream.h $(LIB)
	$(CC) -O2 -Wall -Wextra -Werror -Iinclude $< -L$(BUILD) -llmstream -Wl,-rpath,'$$ORIGIN' -o $@

# PROMPT="..." make run asks something else.
PROMPT ?= What is the capital of Japan?
run: go-version model $(BUILD)/stream
	$(BUILD)/stream --model $(MODEL_PATH) "$(PROMPT)"

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags noasm ./core/...

# staticcheck is a Go module fetched by version (a tool, not a dependency of
# the library); ruff and mypy --strict check the Python package, which
# declares itself typed (py.typed), with the settings in its pyproject.toml.
# v0.8.2 is the module version of staticcheck 2026.2.2.
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint: deps-test
	$(GO) run $(STATICCHECK) ./...
	cd bindings/python && $(abspath $(VENV))/bin/ruff check lmstream tests
	cd bindings/python && $(abspath $(VENV))/bin/mypy lmstream

# The library must not link the simulator (spec/sim, and with it
# encoding/csv and the SVG writer): the engine takes its serving systems
# from spec/serving.
check-deps:
	@if $(GO) list -deps ./capi | grep -E '^(github.com/lmstream/lmstream/spec/sim|encoding/csv)$$'; then \
	  echo "check-deps: liblmstream links the above"; exit 1; fi
	@echo "check-deps: liblmstream links no simulator"

test: deps-test test-models all vet lint check-deps test-go fuzz-smoke test-py test-c test-elixir test-readme test-serve

# The real-model tests of the engine (greedy speculative equality, golden
# logits, perplexity; SmolLM2, Qwen2.5-Coder 0.5B, Gemma 3 270M) are too slow under the
# race detector and skip there, so those packages also run without it.
# NVRTC comes from the PyPI wheel (make deps), so the kernel compile tests
# must find it, not skip.
# KERNELS_AVX2 caps the CPU kernels at AVX2 (quant.KernelsEnv), so that
# the kernels of CPUs without AVX-512 VNNI are tested on those with it too;
# KERNELS_VNNI likewise keeps an AMX Xeon off its tiles, as CPUs with
# AVX-512 VNNI but no AMX (AMD Zen 4, Ice Lake) run.
# KERNELS_AVXVNNI runs the AVX-VNNI kernels where the CPU has them and no
# AVX-512 VNNI would take precedence (elsewhere TestEmulatedAVXVNNI runs
# them on an emulator in every run of the package).
# core/model's real-model tests take many minutes on the portable kernels:
# the tiny models' equalities cover them (a minute all told with the rest).
NOASM_MODEL_TESTS := ^Test(TinyModelsMatchReference|ChainEqualsStepwise|DecodeEqualsRecompute|TreeEqualsChains|TwoSequencesInOneBatch|GemmaWindowMasks|GemmaSoftcap)$$
KERNELS_AVX2 := LMSTREAM_CPU_KERNELS=avx2
KERNELS_AVXVNNI := LMSTREAM_CPU_KERNELS=avxvnni
KERNELS_VNNI := LMSTREAM_CPU_KERNELS=avx512vnni
# LMSTREAM_REQUIRE_MODELS=1: `make test` fetched the test models first, so a
# test that finds its model absent fails instead of skipping. The race
# run's timeout is per package: the engine's took 1,709 s of 1,800 on a
# loaded two-core machine. core/sample and spec run without the race
# detector too, for the statistical tests it makes too slow to run. The
# no-assembly build (-tags noasm: the portable kernels every other
# architecture runs) is tested on the packages that have assembly, short.
test-go:
	$(VENV_RUN) LMSTREAM_REQUIRE_NVRTC=1 LMSTREAM_REQUIRE_MODELS=1 $(GO) test -race -count=1 -timeout=50m ./...
	LMSTREAM_REQUIRE_MODELS=1 $(GO) test -count=1 -timeout=45m ./core/model ./core/engine ./core/cpu ./core/sample ./spec/... ./tests/modelfile
	$(GO) test -tags noasm -short -count=1 -timeout=20m ./core/sample ./core/quant
	$(GO) test -tags noasm -short -count=1 -timeout=20m -run='$(NOASM_MODEL_TESTS)' ./core/model
	$(KERNELS_AVX2) $(GO) test -count=1 ./core/quant
	if grep -qw avx_vnni /proc/cpuinfo; then $(KERNELS_AVXVNNI) $(GO) test -count=1 ./core/quant; fi
	$(KERNELS_VNNI) $(GO) test -count=1 ./core/quant
	$(GO) test -count=1 -run='^TestEngineSmoke$$' ./core/cmd/lmsadaserve

fuzz-smoke:
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$(or $(FUZZ_SMOKE),$${rest#*:}); \
	  echo "fuzz $$name ($$n executions)"; \
	  $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$${n}x $$pkg || exit 1; \
	done

# `make fuzz` also runs the runtime leak check long: LEAK_CYCLES create /
# generate / destroy cycles of the default model (CI runs 40 in test-go).
LEAK_CYCLES ?= 400
fuzz: $(LIB)
	@for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; \
	  $(GO) test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	done
	LMSTREAM_MUTATOR_TRIES=$(MUTATOR_TRIES) $(GO) test -count=1 -timeout=0 -v -run='^TestGGUFMutator$$' ./tests/modelfile
	LMSTREAM_LEAK_CYCLES=$(LEAK_CYCLES) $(GO) test -count=1 -timeout=0 -v -run='^TestRuntimeCyclesDoNotLeak$$' ./core/engine
	$(MAKE) -C tests/c fuzz MODEL=$(abspath $(MODEL_PATH))

# pytest exits 5 when it collects nothing; that is a failure here too.
test-py: $(LIB)
	$(VENV_RUN) $(PYTHON) -m pytest -q tests/tokenizer bindings/python/tests

test-elixir: $(LIB)
	cd bindings/elixir && MIX_ENV=test mix test

# The server's Go tests (core/serve) run in test-go; these start the built
# command and talk to it as users do: the openai package and curl. The
# Ray Serve deployment's test (lmstream.ray_serve, on a local Ray) drives
# the Python binding, so the library too.
test-serve: $(SERVE) $(LIB) $(MODEL_PATH) deps-test
	$(VENV_RUN) LMSTREAM_SERVE=$(abspath $(SERVE)) LMSTREAM_MODEL=$(abspath $(MODEL_PATH)) $(PYTHON) -m pytest -q tests/serve

# Every code block of README.md compiled, run or checked as written: the
# C, C++, Python and Elixir ones are examples/hello.* (the README must hold
# them verbatim) and must stream from the default model; see
# tests/scripts/check_readme.py for the other kinds.
test-readme: $(LIB) test-install $(MODEL_PATH)
	cd bindings/elixir && MIX_ENV=test mix compile
	$(VENV_RUN) $(PYTHON) tests/scripts/check_readme.py README.md --prefix $(TI)/prefix --python $(abspath $(PYTHON))

# tests/c/tools.c needs a model whose template renders tools.
TOOL_MODEL_PATH := $(shell $(FETCH) --path qwen2.5-coder-0.5b)
test-c: $(LIB) test-install $(TOOL_MODEL_PATH)
	$(MAKE) -C tests/c all test valgrind MODEL=$(abspath $(MODEL_PATH)) TOOL_MODEL=$(abspath $(TOOL_MODEL_PATH))

# Installed files, for C and C++ programs that find them with pkg-config.
# lmstream.pc is written from lmstream.pc.in at install time, so it always
# names the PREFIX it was installed with (DESTDIR only stages the files).
INSTALL_LIB = $(DESTDIR)$(PREFIX)/lib
INSTALL_INC = $(DESTDIR)$(PREFIX)/include
INSTALL_BIN = $(DESTDIR)$(PREFIX)/bin
install: $(LIB) $(SERVE)
	install -d $(INSTALL_LIB)/pkgconfig $(INSTALL_INC) $(INSTALL_BIN)
	install -m 755 $(SERVE) $(INSTALL_BIN)/lmstream-serve
	install -m 755 $(LIB_REAL) $(INSTALL_LIB)/$(SONAME)
	ln -sf $(SONAME) $(INSTALL_LIB)/liblmstream.so
	install -m 644 include/lmstream.h include/lmstream.hpp $(INSTALL_INC)/
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' lmstream.pc.in > $(INSTALL_LIB)/pkgconfig/lmstream.pc
	chmod 644 $(INSTALL_LIB)/pkgconfig/lmstream.pc

uninstall:
	rm -f $(INSTALL_LIB)/liblmstream.so $(INSTALL_LIB)/$(SONAME) $(INSTALL_LIB)/pkgconfig/lmstream.pc \
	      $(INSTALL_INC)/lmstream.h $(INSTALL_INC)/lmstream.hpp $(INSTALL_BIN)/lmstream-serve

# Proves an installation is complete and usable: installs under build/, then
# builds examples/stream.c (gcc) and examples/stream.cpp (g++) with nothing but
# what `pkg-config --cflags --libs lmstream` says, streams the replay demo
# through both (their output must be identical), checks that a missing model
# fails with exit status 1, and that DESTDIR staging and uninstall work.
# The installed library must carry its SONAME and the programs must ask for
# liblmstream.so.$(ABI) by it; a program built with the README's plain pkg-config
# line (no rpath) must run with LD_LIBRARY_PATH, the README's other way for
# a prefix outside the loader's path.
TI := $(abspath $(BUILD))/install-test
test-install: $(LIB)
	@command -v pkg-config >/dev/null || { echo "test-install needs pkg-config (make deps)"; exit 1; }
	rm -rf $(TI)
	$(MAKE) --no-print-directory install PREFIX=$(TI)/prefix DESTDIR=
	@set -e; export PKG_CONFIG_PATH=$(TI)/prefix/lib/pkgconfig; \
	test "$$(pkg-config --modversion lmstream)" = "$(VERSION)"; \
	flags="$$(pkg-config --cflags --libs lmstream) -Wl,-rpath,$$(pkg-config --variable=libdir lmstream)"; \
	echo "pkg-config: $$flags"; \
	set -x; \
	$(CC) -O2 -Wall -Wextra -Werror examples/stream.c $$flags -o $(TI)/stream-c; \
	$(CXX) -std=c++17 -O2 -Wall -Wextra -Werror examples/stream.cpp $$flags -o $(TI)/stream-cpp; \
	$(TI)/stream-c --replay > $(TI)/out-c.txt; \
	$(TI)/stream-cpp --replay > $(TI)/out-cpp.txt; \
	cmp $(TI)/out-c.txt $(TI)/out-cpp.txt; \
	grep -q '^Hello from lmstream!' $(TI)/out-cpp.txt; \
	rc=0; $(TI)/stream-cpp --model $(TI)/no-such-model.gguf 2>/dev/null || rc=$$?; test $$rc = 1; \
	rc=0; $(TI)/stream-c --model $(TI)/no-such-model.gguf 2>/dev/null || rc=$$?; test $$rc = 1; \
	readelf -d $(TI)/prefix/lib/$(SONAME) | grep -q 'SONAME.*\[$(SONAME)\]'; \
	test "$$(readlink $(TI)/prefix/lib/liblmstream.so)" = $(SONAME); \
	readelf -d $(TI)/stream-c | grep -q 'NEEDED.*\[$(SONAME)\]'; \
	$(CC) -O2 -Wall -Wextra -Werror examples/stream.c $$(pkg-config --cflags --libs lmstream) -o $(TI)/stream-plain; \
	LD_LIBRARY_PATH=$$(pkg-config --variable=libdir lmstream) $(TI)/stream-plain --replay | cmp - $(TI)/out-c.txt
	$(MAKE) --no-print-directory install PREFIX=/usr DESTDIR=$(TI)/stage
	grep -qx 'prefix=/usr' $(TI)/stage/usr/lib/pkgconfig/lmstream.pc
	test -f $(TI)/stage/usr/lib/$(SONAME) -a -L $(TI)/stage/usr/lib/liblmstream.so -a -f $(TI)/stage/usr/include/lmstream.hpp
	$(TI)/stage/usr/bin/lmstream-serve --help 2>&1 | grep -q -- '-model'
	$(MAKE) --no-print-directory uninstall PREFIX=/usr DESTDIR=$(TI)/stage
	test -z "$$(find $(TI)/stage -type f -o -type l)"
	@echo "test-install: installed files build and run C and C++ programs"

# LMSTREAM_PEER_PYTHON=/path/to/python (with llama-cpp-python installed)
# adds llama.cpp's decode and prefill, measured in the same run, with ratios.
# lmsbench on each of BENCH_MODELS (fetched if missing). Set
# LMSTREAM_PEER_LLAMA_BENCH to a llama-bench binary (or LMSTREAM_PEER_PYTHON
# to a Python with llama-cpp-python) built outside this repository to get
# llama.cpp's figures side by side; BENCH_ROUNDS measurements per figure.
# LMSTREAM_PEER_LLAMA_SERVER (a llama-server binary, built outside this
# repository) adds llama-server to the serving benchmarks (tests/serve's
# bench_turns.py, a 20-turn chat, and bench_agents.py, 32 conversations
# sharing a system prompt; bench_start.py, start-up to the first token of
# each of BENCH_MODELS, cold and warm) on the same GGUF.
BENCH_MODELS ?= smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b gemma3-270m
BENCH_ROUNDS ?= 3
bench: deps all $(foreach m,$(BENCH_MODELS),$(shell $(FETCH) --path $(m)))
	$(GO) build -o $(BUILD)/lmsbench ./core/cmd/lmsbench
	@for m in $(BENCH_MODELS); do \
	  $(BUILD)/lmsbench -model $$($(FETCH) --path $$m) -rounds $(BENCH_ROUNDS) || exit 1; echo; \
	done
	$(GO) test -run='^$$' -bench='Text|StreamChunk|ChunkThroughput' -count=3 ./streaming ./core/loop
	$(GO) test -run='^$$' -bench='MatMulScaling|ForwardMatMuls|ReadBand|MultiDot' -benchtime=20x ./core/quant
	$(GO) test -run='^$$' -bench='LongChat|AttentionLayer' -benchtime=5x ./core/model
	$(GO) test -run='^$$' -bench='ScoresT' ./core/model
	$(GO) test -run='^$$' -bench=ConstrainedDecode -benchtime=3x ./core/engine
	$(MAKE) -C tests/c all bench MODEL=$(abspath $(MODEL_PATH))
	$(VENV_RUN) $(PYTHON) bindings/python/bench.py
	$(VENV_RUN) LMSTREAM_SERVE=$(abspath $(SERVE)) LMSTREAM_MODEL=$(abspath $(MODEL_PATH)) $(PYTHON) tests/serve/bench_serve.py
	$(VENV_RUN) LMSTREAM_SERVE=$(abspath $(SERVE)) LMSTREAM_MODEL=$(abspath $(MODEL_PATH)) $(PYTHON) tests/serve/bench_prefix.py
	$(VENV_RUN) LMSTREAM_SERVE=$(abspath $(SERVE)) LMSTREAM_MODEL=$(abspath $(MODEL_PATH)) $(PYTHON) tests/serve/bench_turns.py
	$(VENV_RUN) LMSTREAM_SERVE=$(abspath $(SERVE)) LMSTREAM_MODEL=$(abspath $(MODEL_PATH)) $(PYTHON) tests/serve/bench_agents.py
	$(VENV_RUN) LMSTREAM_SERVE=$(abspath $(SERVE)) LMSTREAM_MODEL=$(abspath $(MODEL_PATH)) $(PYTHON) tests/serve/bench_start.py $(foreach m,$(BENCH_MODELS),$(abspath $(shell $(FETCH) --path $(m))))
	cd bindings/elixir && mix run bench/bench.exs

# The decode table of CPUs without AVX-512: decode (tg128, and 64 tokens at
# depth 256) and prefill pp512 on 1 and 2 threads, lmstream on the kernel
# set KERNELS (default avx2; quant.KernelSetNames) beside llama.cpp's
# llama-bench (LMSTREAM_PEER_LLAMA_BENCH, built for the same instruction
# set: GGML_NATIVE=OFF GGML_AVX2=ON GGML_FMA=ON GGML_F16C=ON for avx2), with
# the weight bytes a decode step reads over the measured read bandwidth.
# Each model's table names the CPU and the load average before and after:
# run it on a quiet machine.
DECODE_MODELS ?= smollm2-135m qwen2.5-coder-0.5b qwen2.5-coder-1.5b
KERNELS ?= avx2
bench-decode: $(foreach m,$(DECODE_MODELS),$(shell $(FETCH) --path $(m)))
	$(GO) build -o $(BUILD)/lmsbench ./core/cmd/lmsbench
	@for m in $(DECODE_MODELS); do \
	  $(BUILD)/lmsbench -model $$($(FETCH) --path $$m) -rounds $(BENCH_ROUNDS) -kernels $(KERNELS) -no-forward || exit 1; echo; \
	done

# The wheel a package registry accepts, in dist/: liblmstream.so built
# against glibc 2.17 (zig cc from PyPI's ziglang) and tagged
# manylinux2014_x86_64 by auditwheel; the tools go into build/wheel-tools.
# (bindings/python's own `make wheel` still builds a linux_x86_64 wheel of
# build/liblmstream.so for local use.)
wheel:
	bash tests/scripts/build_wheel.sh

# The pulls from the real PyPI (98 MB, seconds): the Go puller and the
# Python CLI. They need the network, so plain `make test` skips them;
# .ci/run runs them, since PyPI's API is what a user's first pull meets.
.PHONY: test-pull
test-pull: $(LIB)
	LMSTREAM_PULL_NETWORK=1 $(GO) test -count=1 -v -run '^TestPullFromPyPI$$' ./core/pull
	$(VENV_RUN) LMSTREAM_PULL_NETWORK=1 $(PYTHON) -m pytest -q bindings/python/tests/test_pull.py

# What a mix user does, checked outside the repository: new mix projects
# with a path, a git (subdir) and a sparse git dependency (found through
# pkg-config after make install) compile and stream; `mix release` carries
# the library. Tests the committed HEAD.
.PHONY: test-mix-dep
test-mix-dep:
	bash tests/scripts/test_mix_dep.sh

# What a pip user does, checked outside the repository: the wheel into a
# fresh venv, `lmstream pull smollm2-135m` from PyPI, `lmstream "Say hi"`.
.PHONY: test-wheel
test-wheel: wheel
	bash tests/scripts/test_wheel.sh

clean:
	rm -rf $(BUILD)

# The CUDA backend's GPU check, for a machine with an NVIDIA GPU and no Go:
# `make gpu-bundle` builds the GPU test binaries (cgo off: purego needs no
# cgo), a 4-layer copy of the default model (small enough to carry), the
# library with two C programs (the conformance vectors, and a stream
# through the C ABI with "backend": "cuda"), lmsadaserve (the AdaServe run
# on the GPU engine), and the skeletons of the Qwen2.5-Coder 1.5B and 0.5B
# files (tests/gpu/shapes: their metadata and tensor list, and the shared
# vocabulary) from which `shape -fill` writes full-size files of their
# exact shapes there. `tests/gpu/check.sh` runs it all there with
# LMSTREAM_REQUIRE_GPU=1. The device machine takes 64 MiB a call, the
# working tree included, so the bundle travels as $(GPU_BUNDLE).tar.xz
# (about 50 MB; the folder is about 100).
GPU_BUNDLE := $(BUILD)/gpu
GPU_SHAPES := qwen2.5-coder-1.5b qwen2.5-coder-0.5b
gpu-bundle: $(MODEL_PATH) $(LIB) $(BUILD)/stream $(foreach m,$(GPU_SHAPES),$(shell $(FETCH) --path $(m)))
	rm -rf $(GPU_BUNDLE) && mkdir -p $(GPU_BUNDLE)
	CGO_ENABLED=0 $(GO) test -ldflags="-s -w" -c -o $(GPU_BUNDLE)/cuda.test ./core/cuda
	CGO_ENABLED=0 $(GO) test -ldflags="-s -w" -c -o $(GPU_BUNDLE)/cu.test ./core/cuda/cu
	CGO_ENABLED=0 $(GO) test -ldflags="-s -w" -c -o $(GPU_BUNDLE)/nvrtc.test ./core/cuda/nvrtc
	$(GO) run ./tests/gpu/trim -layers 4 $(MODEL_PATH) $(GPU_BUNDLE)/model.gguf
	$(MAKE) -C tests/c ../../$(BUILD)/tests/conformance
	strip --strip-unneeded -o $(GPU_BUNDLE)/$(SONAME) $(LIB_REAL)
	cp $(BUILD)/stream $(BUILD)/tests/conformance $(GPU_BUNDLE)/
	CGO_ENABLED=0 $(GO) build -ldflags="-s -w" -o $(GPU_BUNDLE)/trim ./tests/gpu/trim
	CGO_ENABLED=0 $(GO) build -ldflags="-s -w" -o $(GPU_BUNDLE)/shape ./tests/gpu/shape
	CGO_ENABLED=0 $(GO) build -ldflags="-s -w" -o $(GPU_BUNDLE)/lmsadaserve ./core/cmd/lmsadaserve
	for m in $(GPU_SHAPES); do \
	  $(GPU_BUNDLE)/shape -skeleton -no-vocab $$($(FETCH) --path $$m) $(GPU_BUNDLE)/$$m.skel.gguf || exit 1; done
	$(GPU_BUNDLE)/shape -vocab-only $(shell $(FETCH) --path $(firstword $(GPU_SHAPES))) $(GPU_BUNDLE)/qwen2.5-coder.vocab.gguf
	tar -C $(BUILD) -cJf $(GPU_BUNDLE).tar.xz gpu
	@ls -l $(GPU_BUNDLE).tar.xz

# `make gpu-baseline REV=<commit>` builds that commit's CUDA test binary
# into build/gpu-base, for `tests/gpu/ab.sh` to time against the bundle's
# on the same GPU in one call.
GPU_BASE := $(BUILD)/gpu-base
gpu-baseline:
	@test -n "$(REV)" || { echo "usage: make gpu-baseline REV=<commit>"; exit 2; }
	@mkdir -p $(GPU_BASE)
	rm -rf $(BUILD)/baseline-tree && git worktree add --detach $(BUILD)/baseline-tree $(REV)
	cd $(BUILD)/baseline-tree && CGO_ENABLED=0 $(GO) test -ldflags="-s -w" -c -o $(abspath $(GPU_BASE))/cuda.test ./core/cuda; \
	  status=$$?; cd $(CURDIR) && git worktree remove --force $(BUILD)/baseline-tree; exit $$status

# The AdaServe evaluation in the simulator (spec/sim): request-rate sweeps of
# every policy on a GPU-like curve, on the curve the CUDA backend measured on
# an H200 (sim.H200) and on the curve the CPU engine measures
# for MODEL_PATH, the §6.3 strategies and the §6.4 urgent-only study: CSV and
# SVG plots in build/adaserve (PNGs too: adaserve-plots). CI runs its smoke version
# (core/cmd/lmsadaserve TestQuickRun) in test-go. Then the same workload on
# the real engine (-engine): MODEL_PATH with the n-gram drafter, and the
# Qwen2.5-Coder pair with its draft model on a shorter sweep (about 15
# minutes on two cores), each point replayed in the simulator on the
# measured curve (engine-vs-sim.csv); CI's smoke is TestEngineSmoke. Last,
# the pair's whole sweep in the simulator on that run's curves and fitted
# acceptance (build/adaserve-qwen-sim, cpu-measured-pair-rates.csv). A kept
# run checks a changed simulator in a second, without the engine:
# go run ./core/cmd/lmsadaserve -replay build/adaserve -out build/replay.
ADASERVE_QWEN := $(shell $(FETCH) --path qwen2.5-coder-1.5b)
ADASERVE_QWEN_DRAFT := $(shell $(FETCH) --path qwen2.5-coder-0.5b)
bench-adaserve: $(MODEL_PATH) $(ADASERVE_QWEN) $(ADASERVE_QWEN_DRAFT)
	$(GO) run ./core/cmd/lmsadaserve -out $(BUILD)/adaserve -model $(MODEL_PATH)
	$(GO) run ./core/cmd/lmsadaserve -engine -out $(BUILD)/adaserve -model $(MODEL_PATH)
	$(GO) run ./core/cmd/lmsadaserve -engine -out $(BUILD)/adaserve-qwen -model $(ADASERVE_QWEN) \
	  -draft $(ADASERVE_QWEN_DRAFT) -requests 16 -max-tokens 64 -loads 0.5,1 -policies adaserve,specinfer,incremental,vllm
	$(GO) run ./core/cmd/lmsadaserve -out $(BUILD)/adaserve-qwen-sim -model $(ADASERVE_QWEN) \
	  -draft $(ADASERVE_QWEN_DRAFT) -curves $(BUILD)/adaserve-qwen -max-tokens 64
	$(MAKE) adaserve-plots

# PNG plots of every sweep CSV in the bench-adaserve folders (matplotlib,
# from PyPI into .venv on first use; the test runs never need it).
adaserve-plots: $(BUILD)/.deps
	$(VENV_RUN) $(PYTHON) -c 'import matplotlib' 2>/dev/null || $(VENV_RUN) $(PYTHON) -m pip install -q matplotlib
	$(VENV_RUN) $(PYTHON) core/cmd/lmsadaserve/plot.py $(BUILD)/adaserve $(wildcard $(BUILD)/adaserve-qwen $(BUILD)/adaserve-qwen-sim)
