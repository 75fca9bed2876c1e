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
#ifndef IXL_CUDA_LAUNCH_CUH
#define IXL_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>
#include <stdint.h>

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

} // namespace ixl

#endif
