# GDPA kernel suite — build, test, run, benchmark.
#
#   make test     CPU unit tests (GPU tests run too when an NVIDIA GPU is present, else are skipped)
#   make run      forward + backward on the default production-like batch (CPU reference without a GPU)
#   make bench    the seed's benchmark sets for every kernel, JSON under experiments/results/
#   make kernels  compile every kernel's default variants to build/kernels/<arch>/*.cubin and *.ptx
#   make sass     disassemble them (needs cuobjdump, installed from PyPI when missing)
#   make ablate   every ablation script (one optimization switched off at a time), JSON + figures data
#   make plots    figures from the committed JSON
#
# Missing system packages (doctest, matplotlib) are installed with apt-get when run as root.

CUDA_HOME ?= $(shell p=$$(command -v nvcc 2>/dev/null); if [ -n "$$p" ]; then dirname $$(dirname $$(readlink -f $$p)); else echo /usr/local/cuda; fi)
CXX       ?= g++
CXXFLAGS  ?= -O2 -g
CXXFLAGS  += -std=c++17 -Wall -Wextra -pthread -MMD -MP -I. -I$(CUDA_HOME)/include
LDFLAGS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64
# libcuda is NOT linked: host/driver.cpp loads it at run time so the binaries start without a GPU.
LDLIBS    += -lnvrtc -lcublas -lcudart -ldl
PYTHON    ?= $(shell for p in /usr/bin/python3 python3; do $$p -c 'import matplotlib' 2>/dev/null && { echo $$p; break; }; done)
BUILD     := build
OBJ       := $(BUILD)/obj

HOST_SRC   := $(filter-out host/main.cpp,$(wildcard host/*.cpp))
VERIFY_SRC := $(wildcard verify/*.cpp)
TEST_SRC   := $(wildcard verify/tests/*.cpp)
CLI_SRC    := host/main.cpp $(wildcard host/cli/*.cpp)
HOST_SRC   := $(filter-out $(wildcard host/cli/*.cpp),$(HOST_SRC))

LIB_OBJ  := $(patsubst %.cpp,$(OBJ)/%.o,$(HOST_SRC) $(VERIFY_SRC))
TEST_OBJ := $(patsubst %.cpp,$(OBJ)/%.o,$(TEST_SRC))
CLI_OBJ  := $(patsubst %.cpp,$(OBJ)/%.o,$(CLI_SRC))

.PHONY: all build test run bench ablate reproduce kernels sass plots deps deps-test deps-sass deps-plots clean

all build: $(BUILD)/gdpa $(BUILD)/gdpa_tests

$(OBJ)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/libgdpa.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	ar rcs $@ $^

$(BUILD)/gdpa: $(CLI_OBJ) $(BUILD)/libgdpa.a
	$(CXX) $(CXXFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/gdpa_tests: $(TEST_OBJ) $(BUILD)/libgdpa.a
	$(CXX) $(CXXFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

# Test objects need doctest's header, which `deps-test` provides.
$(TEST_OBJ): | deps-test

# The tests run the experiment scripts' preflight against the command-line binary (GDPA_BIN).
test: deps-test deps-sass $(BUILD)/gdpa_tests $(BUILD)/gdpa
	GDPA_BIN=$(BUILD)/gdpa $(BUILD)/gdpa_tests

run: $(BUILD)/gdpa
	$(BUILD)/gdpa run

bench: $(BUILD)/gdpa
	$(BUILD)/gdpa bench --out experiments/results

ablate: $(BUILD)/gdpa
	experiments/ablate_all.sh experiments/results

reproduce: $(BUILD)/gdpa
	experiments/reproduce.sh experiments/results

kernels: $(BUILD)/gdpa
	$(BUILD)/gdpa kernels --arch 90 --out $(BUILD)/kernels/sm_90a

sass: kernels deps-sass
	@for f in $(BUILD)/kernels/sm_90a/*.cubin; do \
	  verify/tools/cuobjdump.sh -sass $$f > $${f%.cubin}.sass && echo "wrote $${f%.cubin}.sass"; done

plots: deps-plots
	$(PYTHON) experiments/plot.py

# --- dependencies: installed only when missing -------------------------------------------------
deps: deps-test deps-sass deps-plots

deps-test:
	@if [ ! -f /usr/include/doctest/doctest.h ]; then \
	  echo "doctest missing: installing doctest-dev"; \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq doctest-dev) >/dev/null; \
	  else echo "run as root or install doctest-dev (apt-get install doctest-dev)"; exit 1; fi; fi

deps-sass:
	@verify/tools/cuobjdump.sh --found || \
	  { echo "cuobjdump missing: installing it from PyPI"; python3 -m pip install -q nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm; }

deps-plots:
	@if [ -z "$(PYTHON)" ]; then echo "matplotlib missing: installing python3-matplotlib"; \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq python3-matplotlib) >/dev/null; \
	  else echo "install python3-matplotlib"; exit 1; fi; fi

clean:
	rm -rf $(BUILD)

-include $(shell find $(OBJ) -name '*.d' 2>/dev/null)
