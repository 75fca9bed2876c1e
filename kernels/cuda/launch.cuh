// launch.cuh - launch helpers (grid sizing, the context's stream).
//
// Conventions of these kernels:
// - Every launch goes on the context's stream ((cudaStream_t)ctx->stream) and is followed by
//   ixl_cuda_check_launch; no op synchronises, allocates or copies to the host, so a whole
//   step can be captured in a CUDA graph.
// - Row ranges and ids are data that live on the device. The dispatching op (the *_cpu.c
//   file) validates everything it can see from the host; the kernels never read or write
//   outside their tensors whatever the data says (an out-of-range row is clamped or treated
//   as empty, an out-of-range id is ignored), so bad data gives wrong numbers, never a fault.
//
// Programmatic dependent launch (PDL, issue 15): `launch_pdl` below puts
// cudaLaunchAttributeProgrammaticStreamSerialization on a launch when the process switch is on
// and the device is sm_90 or newer; such a grid may start while the previous kernel on the
// stream still runs (once every CTA of that kernel has called pdl_trigger() or exited), so its
// launch latency overlaps the previous kernel's tail. The rule for a kernel launched so: every
// CTA calls pdl_wait() (griddepcontrol.wait: the previous grid has completed and its memory
// operations are visible) before its first read of anything a previous kernel may have written
// and before its first global write (a previous kernel may still read that buffer); only
// shared-memory set-up and arithmetic on the arguments may come before it. Transitivity holds
// because every CTA waits: a grid completes only after its own wait returned. pdl_trigger()
// (griddepcontrol.launch_dependents) lets the next PDL grid start early; where it is called
// does not change any result (a dependent waits for this grid's completion, not for the
// trigger), and it takes effect only once every CTA of this grid has called it or exited, so a
// waiting dependent never takes the SM room of a CTA of this grid that has not started. Both are
// no-ops when the launch carried no attribute, and compile to nothing below sm_90 (the sm_80
// build). After a memset or an event the attribute changes nothing (test_cuda_index's PDL chain
// starts after poisoning memsets, eagerly and in a graph; the step's eager path has events
// between stages: both exact on the H200). Under stream capture the launches become the
// graph's programmatic edges.
//
// The switch, IXL_PDL, is read once per process: "1" on, "0" off, anything else (or unset) the
// default, IXL_PDL_DEFAULT. ixl_cuda_pdl_override (kernels/index/expand.cu) changes it for the
// rest of the process (the tests' A/B in one process); it is read at each launch, so a graph
// keeps what was in force when it was captured.
#ifndef IXL_CUDA_LAUNCH_CUH
#define IXL_CUDA_LAUNCH_CUH

// ---- plain C from here to IXL_LAUNCH_SWITCH_ONLY: tests/c/test_cuda_index.c includes this part
// alone (no CUDA header) to test the parsing on any build.
// On by default (issue 15: every launch with PDL where the kernel supports it; K3, K4, K7,
// select v2 and the v2 logits launch so). On the H200 (2026-12-02, session 8 visit 1) the step
// was exact with it and within noise of PDL off (25,640 against 25,552 us graph replay), and
// select v2's short launches gained ~1 us (64x16384 k512 10.47 -> 9.36 us); the kernels' own
// parity and sanitizer runs with IXL_PDL=1 are in BENCHMARKS.md. IXL_PDL=0 turns it off.
#define IXL_PDL_DEFAULT 1
static inline int ixl_pdl_parse(const char *v) { // 1 on, 0 off
  if (v && v[0] == '0' && v[1] == '\0') return 0;
  if (v && v[0] == '1' && v[1] == '\0') return 1;
  return IXL_PDL_DEFAULT;
}
#ifndef IXL_LAUNCH_SWITCH_ONLY

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

#include <atomic>

#include "internal.h" // C linkage under C++ (its own extern "C" block)
#include "ops.h"

namespace ixl {

// ------------------------------------------------------------------ launch helpers

static inline unsigned grid_for(int64_t n, int threads, int64_t cap = 65535LL * 32) {
  int64_t g = (n + threads - 1) / threads;
  if (g < 1) g = 1;
  if (g > cap) g = cap;
  return (unsigned)g;
}

static inline cudaStream_t stream_of(ixl_ctx *ctx) { return (cudaStream_t)ctx->stream; }

// The context's device's SM count, asked once per device and process (the attribute query
// costs a driver call; a persistent grid sizes itself by it on every launch). 132 (the H200)
// when the query fails; a failed query is not cached, and leaves no error behind.
inline int sm_count(ixl_ctx *ctx) {
  static std::atomic<int> cached[64]; // per device ordinal; 0: not asked yet
  const int dev = ixl_ctx_device(ctx);
  const bool slot = dev >= 0 && dev < 64;
  int sms = slot ? cached[dev].load(std::memory_order_relaxed) : 0;
  if (sms > 0) return sms;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      sms <= 0) {
    cudaGetLastError();
    return 132;
  }
  if (slot) cached[dev].store(sms, std::memory_order_relaxed);
  return sms;
}

// The context's device's major compute capability, asked once per device and process (as
// sm_count; 0 when the query fails, which is not cached).
inline int cc_major(ixl_ctx *ctx) {
  static std::atomic<int> cached[64];
  const int dev = ixl_ctx_device(ctx);
  const bool slot = dev >= 0 && dev < 64;
  int major = slot ? cached[dev].load(std::memory_order_relaxed) : 0;
  if (major > 0) return major;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      major <= 0) {
    cudaGetLastError();
    return 0;
  }
  if (slot) cached[dev].store(major, std::memory_order_relaxed);
  return major;
}

// ------------------------------------------------------------------ PDL (the block above)

// The switch: -1 not read yet, else 0 / 1. One object for the whole library (an inline
// function's static).
inline std::atomic<int> &pdl_state() {
  static std::atomic<int> s{-1};
  return s;
}
inline bool pdl_on() {
  int s = pdl_state().load(std::memory_order_relaxed);
  if (s < 0) {
    int unread = -1;
    pdl_state().compare_exchange_strong(unread, ixl_pdl_parse(getenv("IXL_PDL")));
    s = pdl_state().load(std::memory_order_relaxed);
  }
  return s == 1;
}
// mode 0 / 1: off / on from now on; -1: IXL_PDL's value again. Returns the state before.
inline int pdl_override(int mode) {
  const int before = pdl_on() ? 1 : 0;
  pdl_state().store(mode < 0 ? ixl_pdl_parse(getenv("IXL_PDL")) : (mode ? 1 : 0),
                    std::memory_order_relaxed);
  return before;
}
// Whether a launch on this context carries the attribute.
inline bool pdl_launch(ixl_ctx *ctx) { return pdl_on() && cc_major(ctx) >= 9; }

// Device side: the wait and the trigger (no-ops without a PDL launch; nothing below sm_90).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// kern<<<grid, block, smem>>>(args...) on the context's stream, through cudaLaunchKernelEx:
// with the PDL attribute when pdl_launch(ctx), and as clusters of `cluster` CTAs along x when
// cluster > 1 (sm_90). The launch's error (then ixl_cuda_check_launch's) as an ixl_status,
// named `what`. The kernel must follow the rule above (pdl_wait before its first global access).
template <typename... KArgs, typename... Args>
inline ixl_status launch_pdl(ixl_ctx *ctx, const char *what, void (*kern)(KArgs...), dim3 grid,
                             dim3 block, size_t smem, unsigned cluster, Args... args) {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[2];
  unsigned na = 0;
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream_of(ctx);
  if (cluster > 1) {
    attr[na].id = cudaLaunchAttributeClusterDimension;
    attr[na].val.clusterDim.x = cluster;
    attr[na].val.clusterDim.y = 1;
    attr[na].val.clusterDim.z = 1;
    na++;
  }
  if (pdl_launch(ctx)) {
    attr[na].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[na].val.programmaticStreamSerializationAllowed = 1;
    na++;
  }
  cfg.attrs = na ? attr : nullptr;
  cfg.numAttrs = na;
  const ixl_status st = ixl_cuda_status(ctx, cudaLaunchKernelEx(&cfg, kern, args...), what);
  if (st) return st;
  return ixl_cuda_check_launch(ctx, what);
}

} // namespace ixl

#endif // IXL_LAUNCH_SWITCH_ONLY
#endif
