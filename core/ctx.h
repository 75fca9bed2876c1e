/* ctx.h - the context's layout and what every C file of idxlab does through it: record an
 * error message, retain the context, allocate counted memory and borrow op scratch
 * (core/ctx.c, core/status.c). Private to the library; kernels/ reach it through internal.h. */
#ifndef IXL_CTX_H
#define IXL_CTX_H

#include "idxlab.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IXL_MAX_TIMERS 256
#define IXL_ERRLEN 1024
#define IXL_SCRATCH_SLOTS 8

#define IXL_MAX_FAMILIES 8 /* room for the registry's families (kernels/variants.h) */

struct ixl_ctx {
  ixl_backend backend;      /* resolved: CPU or CUDA */
  int device;
  uint64_t seed;
  int threads;
  int poisoned;             /* sticky device fault seen */
  void *stream;             /* cudaStream_t */
  void *cuda_events[IXL_MAX_TIMERS];
  double host_times_us[IXL_MAX_TIMERS];
  void *graph;              /* cudaGraph_t */
  void *graph_exec;         /* cudaGraphExec_t */
  int capturing;
  ixl_alloc_stats stats;
  void *scratch[2][IXL_SCRATCH_SLOTS];     /* [host/device][slot]: grow-only op scratch */
  int64_t scratch_bytes[2][IXL_SCRATCH_SLOTS];
  int refs;                 /* owners besides the user: tensors, builders, files */
  int released;             /* ixl_ctx_free was called; freed when refs reaches 0 */
  char device_name[256];
  char device_bus_id[32];   /* the GPU's PCI bus id; "" on the CPU */
  char err[IXL_ERRLEN];
  /* The kernel variant registry's state for this context (kernels/variants.c reads and
   * writes it; core only zeroes it with the context): [family][cpu, cuda] pins, the latest
   * pin set per family, the variant each family's last op ran, the device's sm (0: not yet
   * asked). Opaque pointers to registry entries, which are static. */
  const void *variant_pin[IXL_MAX_FAMILIES][2];
  const void *variant_last_pin[IXL_MAX_FAMILIES];
  const void *variant_ran[IXL_MAX_FAMILIES];
  int variant_sm;
};

/* Records a formatted message (field, value, rule) and returns status. ctx may be NULL. */
ixl_status ixl_set_error(ixl_ctx *ctx, ixl_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Objects that keep a pointer to their context retain it, so ixl_ctx_free from a garbage
 * collector in any order never leaves them dangling. */
void ixl_ctx_retain(ixl_ctx *ctx);
void ixl_ctx_release(ixl_ctx *ctx);

/* Counted allocation. Host memory is 64-byte aligned. bytes == 0 gives NULL and succeeds. */
ixl_status ixl_host_alloc(ixl_ctx *ctx, int64_t bytes, void **out);
void ixl_host_free(ixl_ctx *ctx, void *p, int64_t bytes);
ixl_status ixl_device_alloc(ixl_ctx *ctx, int64_t bytes, void **out);
void ixl_device_free(ixl_ctx *ctx, void *p, int64_t bytes);

/* Temporary memory for one op, owned by the context and reused by every later op: grows only
 * when an op needs more than any before, so a steady stream of steps allocates nothing.
 * `slot` (0..IXL_SCRATCH_SLOTS-1) separates buffers one op needs at the same time; an op
 * must not expect its contents to survive the op, nor call another op that uses the same
 * slot. device: IXL_HOST or IXL_DEVICE. */
ixl_status ixl_ctx_scratch(ixl_ctx *ctx, int slot, int64_t bytes, ixl_device_kind device,
                           void **out);

#ifdef __cplusplus
}
#endif

#endif
