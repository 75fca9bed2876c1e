-- LuaRocks: `luarocks make` builds with the project's Makefile and installs the library, the
-- Lua modules and the command, as `make install` does.
rockspec_format = "3.0"
package = "idxlab"
version = "0.1.0-1"
source = { url = "git+file://." }
description = {
  summary = "A research harness for DeepSeek V4.1's two-level sparse indexer (C, CUDA, LuaJIT)",
  detailed = "Runs the sparse-logits path (MXFP4/MXFP8/FP8 formats, kernels K1-K7, metadata builder, prefill chunker) on the CPU and on NVIDIA GPUs, and measures it against the dense path from Lua experiment files.",
  license = "MIT",
}
dependencies = { "lua == 5.1" }
build = {
  type = "make",
  build_variables = { SETUP = "0" },
  install_variables = { PREFIX = "$(PREFIX)", LUADIR = "$(LUADIR)", LIBDIR = "$(LIBDIR)", BINDIR = "$(BINDIR)",
    SETUP = "0" },
  install_pass = true,
}
