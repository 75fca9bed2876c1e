# idxlab - the only build entry point.
#
#   make            build build/libidxlab.so (CUDA kernels too when nvcc is found)
#   make run        set-up, build, then the quick experiment (GPU when usable, else CPU)
#   make test       set-up, build, every C test and busted spec; ends "N passed, N failed"
#   make CUDA=0     CPU-only build
#   make test SANITIZE=1
#                   ASan+UBSan build (always CUDA=0) and the whole suite under it. The C tests
#                   run with LeakSanitizer. busted runs inside plain LuaJIT with the ASan
#                   runtime preloaded (LD_PRELOAD=libasan), with detect_leaks=0: LuaJIT's own
#                   allocator and the interpreter's exit are not ours to leak-check, so leak
#                   detection is left to the C tests.
#   make check      the tree's static rules (scripts/check.sh: luacheck, the core/ include and
#                   symbol rule, line lengths, ...) over $(BUILD); ends "N passed, N failed"
#   make fuzz SECONDS=N   every libFuzzer harness for N seconds (clang)
#   make gpu-bundle       pack LuaJIT and busted for the GPU machine (no network, no Lua)
#   make install PREFIX=/usr/local
#   SETUP=0         skip the package check (a GPU machine has no network)

SHELL := /bin/bash
BUILD ?= build
PREFIX ?= /usr/local
SETUP ?= 1
SANITIZE ?= 0
SECONDS ?= 20

NVCC ?= $(shell command -v nvcc 2>/dev/null || \
  { test -x /usr/local/cuda/bin/nvcc && echo /usr/local/cuda/bin/nvcc; })
ifeq ($(SANITIZE),1)
  CUDA := 0
  BUILD := build-san
endif
ifeq ($(strip $(NVCC)),)
  CUDA ?= 0
else
  CUDA ?= 1
endif
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))

CC ?= cc
# -ffp-contract=off: no fused multiply-adds the source does not write (gcc's ISO C default, not
# clang's): the workload generator and the references must give the GPU's _rn bits.
# core/ is compiled without -Ikernels: the runtime never includes a kernel header.
# -fvisibility=hidden: libidxlab.so exports only what include/idxlab.h marks IXL_API.
CFLAGS_BASE := -std=c11 -O2 -g -Wall -Wextra -Werror -fPIC -fopenmp -ffp-contract=off \
  -fvisibility=hidden -D_GNU_SOURCE -Iinclude -Icore
LDLIBS := -fopenmp -lopenblas -lm
ifeq ($(SANITIZE),1)
  CC := clang
  # clang runs the OpenMP loops in parallel only with its own runtime (libomp, from
  # libomp-14-dev); -fopenmp=libgomp would compile them as serial code.
  CFLAGS_BASE += -fsanitize=address,undefined -fno-omit-frame-pointer \
    -fno-sanitize-recover=undefined
  LDLIBS := -fsanitize=address,undefined -fopenmp -lopenblas -lm
endif
CFLAGS ?=
ALL_CFLAGS := $(CFLAGS_BASE) $(CFLAGS)

C_SRC := $(wildcard core/*.c) $(wildcard kernels/*.c) $(wildcard kernels/*/*.c)
CU_SRC := $(wildcard kernels/*/*.cu)
HDRS := $(wildcard include/*.h core/*.h core/*/*.h kernels/*.h kernels/*/*.h)
CU_HDRS := $(wildcard kernels/*/*.cuh)
OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(C_SRC))
ifeq ($(CUDA),1)
  ALL_CFLAGS += -DIXL_WITH_CUDA -I$(CUDA_HOME)/include
  CU_OBJ := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CU_SRC))
  NVCCFLAGS ?= -O3 -std=c++17 -lineinfo --expt-relaxed-constexpr \
    -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_80,code=sm_80 \
    -Xcompiler -fPIC -Xcompiler -Wall -Xcompiler -ffp-contract=off -Xcompiler -fvisibility=hidden \
    -Iinclude -Icore -Ikernels -DIXL_WITH_CUDA
  LDLIBS += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcurand -lstdc++
else
  CU_OBJ :=
endif

LIB := $(BUILD)/libidxlab.so
# The same objects as a static archive, for the C white-box tests: they call internal symbols
# (ixl_check_*, ixl_engine_*, ...) that the shared library no longer exports.
LIB_A := $(BUILD)/libidxlab.a
CDEF := $(BUILD)/idxlab_cdef.h
# The test build (kernels/variants.c says why): the same objects with variants.c compiled again
# with -DIXL_TEST_VARIANTS, which registers the test-only variants (ref_alt, v1_alt). $(LIB_A)
# (the C tests) and $(TEST_DIR) (the .so and cdef busted loads) are made of them; $(LIB), the
# library `make` builds and `make install` ships, never holds them.
TEST_DIR := $(BUILD)/test
TEST_VAR_OBJ := $(BUILD)/obj/kernels/variants.test.o
TEST_OBJ := $(filter-out $(BUILD)/obj/kernels/variants.o,$(OBJ)) $(TEST_VAR_OBJ)
C_TESTS := $(patsubst tests/c/%.c,$(BUILD)/tests/%,$(wildcard tests/c/test_*.c))

.PHONY: all setup run test test-c test-lua fuzz clean install gpu-bundle check-setup check sass
all: $(LIB) $(CDEF)

setup:
ifeq ($(SETUP),1)
	@scripts/setup.sh
endif

$(BUILD)/obj/core/%.o: core/%.c $(HDRS)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -c $< -o $@

$(BUILD)/obj/kernels/%.o: kernels/%.c $(HDRS)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Ikernels -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu $(HDRS) $(CU_HDRS)
	@mkdir -p $(dir $@)
	@echo "  NVCC    $<"
	@$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIB): $(OBJ) $(CU_OBJ)
	@echo "  LD      $@"
	@$(CC) -shared -Wl,-z,nodelete -o $@ $^ $(LDLIBS)

$(LIB_A): $(TEST_OBJ) $(CU_OBJ)
	@echo "  AR      $@"
	@rm -f $@
	@ar rcs $@ $^

$(TEST_VAR_OBJ): kernels/variants.c $(HDRS)
	@mkdir -p $(dir $@)
	@echo "  CC      $< (test variants)"
	@$(CC) $(ALL_CFLAGS) -Ikernels -DIXL_TEST_VARIANTS -c $< -o $@

$(TEST_DIR)/libidxlab.so: $(TEST_OBJ) $(CU_OBJ)
	@mkdir -p $(dir $@)
	@echo "  LD      $@"
	@$(CC) -shared -Wl,-z,nodelete -o $@ $^ $(LDLIBS)

$(TEST_DIR)/idxlab_cdef.h: $(CDEF)
	@mkdir -p $(dir $@)
	@cp $< $@

$(CDEF): include/idxlab.h scripts/gen_cdef.sh
	@mkdir -p $(BUILD)
	@CC=$(CC) scripts/gen_cdef.sh include/idxlab.h $@

$(BUILD)/tests/%: tests/c/%.c tests/c/check.h tests/c/rand.h $(LIB_A)
	@mkdir -p $(dir $@)
	@echo "  CC      $<"
	@$(CC) $(ALL_CFLAGS) -Ikernels -Itests/c $< -o $@ $(LIB_A) $(LDLIBS)

run: setup all
	IDXLAB_LIBDIR=$(abspath $(BUILD)) bin/idxlab run experiments/quick.lua

test: setup all $(C_TESTS) $(TEST_DIR)/libidxlab.so $(TEST_DIR)/idxlab_cdef.h
	@BUILD=$(BUILD) SANITIZE=$(SANITIZE) CC=$(CC) scripts/run_tests.sh

# The symbol rule reads $(BUILD)/obj, so the library is built first.
check: setup all
	@if [ -f scripts/check.sh ]; then BUILD=$(BUILD) bash scripts/check.sh; \
	else echo "make check: scripts/check.sh is missing"; echo "0 passed, 1 failed"; exit 1; fi

# The SASS rules of the Hopper kernels (QGMMA, no local memory, registers and shared memory as
# each .cu declares in its sass-limits lines); disassembles with cuobjdump/nvdisasm, from the
# PyPI wheels when the toolkit has none.
sass:
	@bash scripts/sass_check.sh kernels/cuda/sm90_selftest.cu $(wildcard kernels/logits/*_v2*.cu)

fuzz: setup
	@SECONDS_EACH=$(SECONDS) scripts/fuzz.sh

gpu-bundle: setup
	@scripts/gpu_bundle.sh

# Installed layout (also what LuaRocks deploys): PREFIX/bin/idxlab, the Lua modules in
# LUADIR/idxlab, the library and its cdef in LIBDIR/idxlab.
LUADIR ?= $(PREFIX)/share/lua/5.1
LIBDIR ?= $(PREFIX)/lib/lua/5.1
BINDIR ?= $(PREFIX)/bin
INCDIR ?= $(PREFIX)/include
install: all
	install -d $(DESTDIR)$(LIBDIR)/idxlab $(DESTDIR)$(LUADIR)/idxlab/cmd $(DESTDIR)$(BINDIR) \
	  $(DESTDIR)$(INCDIR)
	install -m 755 $(LIB) $(DESTDIR)$(LIBDIR)/idxlab/
	install -m 644 $(CDEF) $(DESTDIR)$(LIBDIR)/idxlab/
	install -m 644 include/idxlab.h $(DESTDIR)$(INCDIR)/
	install -m 644 lua/idxlab/*.lua $(DESTDIR)$(LUADIR)/idxlab/
	install -m 644 lua/idxlab/cmd/*.lua $(DESTDIR)$(LUADIR)/idxlab/cmd/
	sed -e 's|^IDXLAB_INSTALLED=.*|IDXLAB_INSTALLED=1|' bin/idxlab > $(DESTDIR)$(BINDIR)/idxlab
	chmod 755 $(DESTDIR)$(BINDIR)/idxlab

clean:
	rm -rf build build-san build-fuzz
