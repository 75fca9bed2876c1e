/* idxlab.h - the one public header of the idxlab C runtime.
 *
 * idxlab reproduces the two-level sparse indexer of DeepSeek V4.1 (see SPEC.md in the shared
 * folder). The LuaJIT binding's cdef text is generated from this file by the build
 * (scripts/gen_cdef.sh): keep it plain C declarations, with every #include and macro helper
 * inside `#ifndef IXL_CDEF` blocks.
 *
 * Conventions:
 * - Every fallible call returns ixl_status; the human message (field, value, rule) is kept per
 *   context and read with ixl_last_error(ctx).
 * - Lifecycle pairs: ixl_X_new / ixl_X_free; every free accepts NULL.
 * - ixl_tensor is a public descriptor (like DLPack's DLTensor) so that Lua reads its fields at
 *   full speed; treat its fields as read-only. Views are value structs filled in place and own
 *   nothing, so making one allocates nothing.
 * - Kernels dispatch on where their tensors live: all host -> CPU reference, all device ->
 *   CUDA. Mixing is an error.
 * - An op's outputs share no memory with its inputs or with each other: an overlap (of the
 *   tensors' byte ranges, host or device alike) is refused with IXL_ERR_INVALID_ARG naming
 *   both ("out overlaps src: an output must not share memory with an input") before anything
 *   runs. The exceptions are stated where they apply: ixl_remap's out may be cols itself, and
 *   ixl_mask_candidates writes logits in place.
 * - Every function declared here is marked IXL_API: the library is built with
 *   -fvisibility=hidden, so these are the only symbols libidxlab.so exports.
 */
#ifndef IDXLAB_H
#define IDXLAB_H

#ifndef IXL_CDEF
#include <stddef.h>
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
#endif

/* The export marker (LuaJIT's LUA_API). gen_cdef.sh defines it empty for the cdef. */
#ifndef IXL_API
#define IXL_API __attribute__((visibility("default")))
#endif

/* ---------------------------------------------------------------- status codes */
#ifndef IXL_CDEF
/* X(name, value, message): codes and messages come from this one list. */
#define IXL_STATUS_LIST(X)                                               \
  X(IXL_OK, 0, "ok")                                                     \
  X(IXL_ERR_INVALID_ARG, 1, "invalid argument")                          \
  X(IXL_ERR_CONFIG, 2, "invalid config")                                 \
  X(IXL_ERR_SHAPE, 3, "bad shape")                                       \
  X(IXL_ERR_DTYPE, 4, "bad dtype")                                       \
  X(IXL_ERR_OOM, 5, "out of memory")                                     \
  X(IXL_ERR_OVERFLOW, 6, "size overflow")                                \
  X(IXL_ERR_BACKEND, 7, "backend mismatch or unavailable")               \
  X(IXL_ERR_CUDA, 8, "CUDA error")                                       \
  X(IXL_ERR_DEVICE_FAULT, 9, "sticky device fault: restart the process") \
  X(IXL_ERR_IO, 10, "I/O error")                                         \
  X(IXL_ERR_FORMAT, 11, "malformed file")                                \
  X(IXL_ERR_BATCH, 12, "invalid batch")                                  \
  X(IXL_ERR_UNSUPPORTED, 13, "not supported")                            \
  X(IXL_ERR_INTERNAL, 14, "internal error")
#define IXL_STATUS_ENUM_(name, value, msg) name = value,
typedef enum ixl_status { IXL_STATUS_LIST(IXL_STATUS_ENUM_) IXL_STATUS_COUNT_ } ixl_status;
#undef IXL_STATUS_ENUM_
#else
/* Expanded by scripts/gen_cdef.sh from IXL_STATUS_LIST. */
IXL_CDEF_STATUS_ENUM
#endif

/* ---------------------------------------------------------------- enums */
typedef enum ixl_dtype {
  IXL_F32 = 0,
  IXL_F16 = 1,
  IXL_BF16 = 2,
  IXL_E4M3 = 3,   /* one fp8 e4m3 value per byte */
  IXL_E2M1X2 = 4, /* two e2m1 values per byte, element 2i in the LOW nibble; shape counts bytes */
  IXL_I32 = 5,
  IXL_U8 = 6,
  IXL_DTYPE_COUNT = 7
} ixl_dtype;

typedef enum ixl_device_kind { IXL_HOST = 0, IXL_DEVICE = 1 } ixl_device_kind;
typedef enum ixl_backend {
  IXL_BACKEND_AUTO = 0,
  IXL_BACKEND_CPU = 1,
  IXL_BACKEND_CUDA = 2
} ixl_backend;

typedef enum ixl_kv_format { IXL_MXFP4 = 0, IXL_MXFP8 = 1, IXL_FP8 = 2 } ixl_kv_format;
typedef enum ixl_quantizer { IXL_Q_RNE = 0, IXL_Q_TIES_DOWN = 1 } ixl_quantizer;
typedef enum ixl_role { IXL_ROLE_Q = 0, IXL_ROLE_K = 1 } ixl_role;
typedef enum ixl_ks_mode { IXL_KS_UNALIGNED = 0, IXL_KS_ALIGNED = 1 } ixl_ks_mode;
typedef enum ixl_block_score {
  IXL_SCORE_MAX = 0,
  IXL_SCORE_MEAN = 1,
  IXL_SCORE_SUM = 2,
  IXL_SCORE_LOGSUMEXP = 3
} ixl_block_score;
typedef enum ixl_split_width { IXL_SPLIT_BF16 = 0, IXL_SPLIT_BF16_FP32 = 1 } ixl_split_width;
typedef enum ixl_reduction { IXL_REDUCE_FP32 = 0, IXL_REDUCE_BF16 = 1 } ixl_reduction;
typedef enum ixl_layout { IXL_LAYOUT_FULL = 0, IXL_LAYOUT_COMPRESSED = 1 } ixl_layout;

/* ---------------------------------------------------------------- context */
typedef struct ixl_ctx ixl_ctx; /* opaque: backend, device, stream, seed, last error, counters */

typedef struct ixl_alloc_stats {
  int64_t host_bytes_live;   /* bytes of tensor data (and other objects' buffers) held now */
  int64_t host_allocs;       /* allocation calls since the context was made, scratch included */
  int64_t host_frees;
  int64_t device_bytes_live;
  int64_t device_allocs;
  int64_t device_frees;
  int64_t host_scratch_bytes;   /* the context's grow-only op scratch (kept until it is freed) */
  int64_t device_scratch_bytes;
} ixl_alloc_stats;

/* Makes a context. backend: IXL_BACKEND_CPU, _CUDA (an error saying why when it cannot be
 * had) or _AUTO (CUDA when usable, else CPU). On failure *out is still set when memory
 * allowed, so the caller can read ixl_last_error(*out) before ixl_ctx_free. */
IXL_API ixl_status ixl_ctx_new(ixl_backend backend, int device, uint64_t seed, ixl_ctx **out);
IXL_API void ixl_ctx_free(ixl_ctx *ctx);
IXL_API ixl_backend ixl_ctx_backend(const ixl_ctx *ctx);
IXL_API ixl_device_kind ixl_ctx_device_kind(const ixl_ctx *ctx); /* where this context allocates */
IXL_API int ixl_ctx_device(const ixl_ctx *ctx);
/* "cpu (N threads)" or the GPU name */
IXL_API const char *ixl_ctx_device_name(const ixl_ctx *ctx);
/* the GPU's PCI bus id ("0000:19:00.0", cudaDeviceGetPCIBusId); "" on the CPU backend */
IXL_API const char *ixl_ctx_device_bus_id(const ixl_ctx *ctx);
IXL_API uint64_t ixl_ctx_seed(const ixl_ctx *ctx);
IXL_API void ixl_ctx_set_seed(ixl_ctx *ctx, uint64_t seed);
IXL_API int ixl_ctx_threads(const ixl_ctx *ctx);
IXL_API void ixl_ctx_set_threads(ixl_ctx *ctx, int threads); /* CPU kernels; <= 0 means all cores */
IXL_API void *ixl_ctx_stream(const ixl_ctx *ctx);            /* cudaStream_t, NULL on the CPU */
IXL_API int ixl_ctx_poisoned(const ixl_ctx *ctx);            /* 1 after a sticky device fault */
IXL_API void ixl_ctx_alloc_stats(const ixl_ctx *ctx, ixl_alloc_stats *out);
IXL_API ixl_status ixl_ctx_sync(ixl_ctx *ctx);
/* Memory in use on the device as the driver reports it (free/total bytes); CPU: 0/0. */
IXL_API ixl_status ixl_ctx_mem_info(ixl_ctx *ctx, int64_t *free_bytes, int64_t *total_bytes);

IXL_API const char *ixl_last_error(const ixl_ctx *ctx);
IXL_API void ixl_clear_error(ixl_ctx *ctx);
IXL_API const char *ixl_status_name(ixl_status s);
IXL_API const char *ixl_status_message(ixl_status s);
IXL_API const char *ixl_version(void);

/* 1 when a CUDA device is usable; otherwise 0 and why (never fails on a GPU-less machine,
 * and 0 with "built without CUDA" for a CUDA=0 build). */
IXL_API int ixl_cuda_available(char *why, size_t why_len);
IXL_API int ixl_built_with_cuda(void);

/* Timing on the context's stream: CUDA events on the GPU, a monotonic clock on the CPU.
 * Slots 0..255. ixl_timer_elapsed_us synchronises on the later event. */
IXL_API ixl_status ixl_timer_record(ixl_ctx *ctx, int slot);
IXL_API ixl_status ixl_timer_elapsed_us(ixl_ctx *ctx, int slot_start, int slot_end, double *us);
/* The host's monotonic clock (CLOCK_MONOTONIC), in microseconds from an arbitrary origin: the
 * one clock behind CPU timers, the CPU benchmarks and the Lua progress display. */
IXL_API double ixl_now_us(void);
/* Ctrl-C as a flag (core/interrupt.c), for an interactive session: install makes SIGINT only
 * set a flag (no SA_RESTART, so a blocking read returns EINTR) and returns 0, or -1 when
 * sigaction failed; restore puts back the disposition install replaced. Nothing in the
 * library installs it by itself; the REPL does, and the experiment runner and the step poll
 * ixl_interrupt_pending() between points and between kernels. */
IXL_API int ixl_interrupt_install(void);
IXL_API void ixl_interrupt_restore(void);
IXL_API int ixl_interrupt_installed(void);
IXL_API int ixl_interrupt_pending(void);
IXL_API void ixl_interrupt_clear(void);
/* The CPU's measured fp32 FMA ceiling, for the benchmarks to report beside each kernel:
 * `threads` OpenMP threads (< 1: one) run AVX2 FMA chains for about `seconds`; returns GFLOP/s,
 * or 0 on a CPU without AVX2 and FMA. Defined in kernels/logits/. */
IXL_API double ixl_bench_fma_peak_gflops(int threads, double seconds);

/* CUDA graph capture of everything issued on the context's stream between begin and end.
 * CPU contexts answer IXL_ERR_UNSUPPORTED. */
IXL_API ixl_status ixl_graph_begin(ixl_ctx *ctx);
IXL_API ixl_status ixl_graph_end(ixl_ctx *ctx);
IXL_API ixl_status ixl_graph_launch(ixl_ctx *ctx);

/* ---------------------------------------------------------------- tensors */
typedef struct ixl_tensor {
  void *data;          /* host or device pointer; NULL for an empty tensor */
  int64_t shape[4];
  int64_t stride[4];   /* in elements */
  int64_t nbytes;      /* bytes of the allocation this tensor owns (0 for a view) */
  int32_t ndim;        /* 0..4 */
  int32_t dtype;       /* ixl_dtype */
  int32_t device;      /* ixl_device_kind */
  int32_t owns;        /* 1 when ixl_tensor_free releases data */
  ixl_ctx *ctx;        /* the context it was allocated on (views: of their base) */
} ixl_tensor;

IXL_API size_t ixl_dtype_size(ixl_dtype dt);
IXL_API const char *ixl_dtype_name(ixl_dtype dt);
/* New contiguous tensor; device IXL_HOST or IXL_DEVICE (the latter needs a CUDA context).
 * Data is uninitialised. Sizes are overflow-checked before anything is allocated. */
IXL_API ixl_status ixl_tensor_new(ixl_ctx *ctx, ixl_dtype dtype, int ndim, const int64_t *shape,
                                  ixl_device_kind device, ixl_tensor **out);
IXL_API void ixl_tensor_free(ixl_tensor *t);
/* Fills *view (caller-owned storage, nothing allocated) with a view of base: `ndim` dims of
 * `shape`/`stride` (stride NULL = contiguous) starting `offset` elements into base. The view
 * must lie inside base's memory. */
IXL_API ixl_status ixl_tensor_view(ixl_ctx *ctx, const ixl_tensor *base, int ndim,
                                   const int64_t *shape, const int64_t *stride, int64_t offset,
                                   ixl_tensor *view);
IXL_API int64_t ixl_tensor_numel(const ixl_tensor *t);
IXL_API int ixl_tensor_is_contiguous(const ixl_tensor *t);
/* Copies between any two tensors of equal dtype and shape (host/device either way), on the
 * context's stream; both must be contiguous and must not share memory. Synchronous for host
 * destinations. */
IXL_API ixl_status ixl_tensor_copy(ixl_ctx *ctx, ixl_tensor *dst, const ixl_tensor *src);
/* Sets every byte of the tensor (poisoning outputs before a kernel). */
IXL_API ixl_status ixl_tensor_fill_bytes(ixl_ctx *ctx, ixl_tensor *t, uint8_t byte);
/* Fill from / read into a host buffer of doubles (converting to/from the dtype; E4M3, E2M1X2
 * and U8 take raw byte values). Works for device tensors through a staging copy. The buffer
 * must not share memory with the tensor. */
IXL_API ixl_status ixl_tensor_from_f64(ixl_ctx *ctx, ixl_tensor *t, const double *src, int64_t n);
IXL_API ixl_status ixl_tensor_to_f64(ixl_ctx *ctx, const ixl_tensor *t, double *dst, int64_t n);

/* ---------------------------------------------------------------- RNG (Philox4x32-10) */
/* One Philox4x32-10 block: the same function as cuRAND's PHILOX4_32_10. */
IXL_API void ixl_philox4x32_10(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4]);
/* Uniform floats in (0, 1], bit-identical to curandGenerateUniform of a PHILOX4_32_10
 * generator with this seed and offset (host or device generator). out: F32, contiguous. */
IXL_API ixl_status ixl_rng_uniform(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset);
/* Normal floats from the same uniform stream, pairs (u[2i], u[2i+1]) -> two values, through
 * a transform written once with IEEE-exact operations so CPU and GPU give the same floats. */
IXL_API ixl_status ixl_rng_normal(ixl_ctx *ctx, ixl_tensor *out, uint64_t seed, uint64_t offset,
                                  float mean, float stddev);

/* ---------------------------------------------------------------- number formats (SPEC 2) */
IXL_API uint16_t ixl_f32_to_bf16(float x);   /* round to nearest even; NaN stays NaN */
IXL_API float ixl_bf16_to_f32(uint16_t x);
IXL_API uint16_t ixl_f32_to_f16(float x);
IXL_API float ixl_f16_to_f32(uint16_t x);
/* round to nearest even, subnormals, saturate at +-448 */
IXL_API uint8_t ixl_f32_to_e4m3(float x);
IXL_API float ixl_e4m3_to_f32(uint8_t x);
IXL_API float ixl_e2m1_to_f32(uint8_t code); /* code: low 4 bits */

/* Bytes of one 128-vector's values: 64 (mxfp4) or 128 (mxfp8, fp8). Scales are 4 bytes. */
IXL_API int ixl_format_value_bytes(ixl_kv_format fmt);

/* Quantizes x [..., 128] (F32, BF16 or F16; leading dims flattened to M vectors) into
 * codes U8 [M, value_bytes] and scales [M] (I32 packed UE8M0 for mxfp4/mxfp8; F32 for fp8:
 * the K scale, or the Q per-(row, head) power-of-two scale). role matters for fp8 only. */
IXL_API ixl_status ixl_quantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_quantizer quantizer,
                                ixl_role role, const ixl_tensor *x, ixl_tensor *codes,
                                ixl_tensor *scales);
/* codes/scales as above -> F32 [M, 128]. For fp8 role Q the result excludes the Q scale
 * (it is folded into the weights, SPEC 2). */
IXL_API ixl_status ixl_dequantize(ixl_ctx *ctx, ixl_kv_format fmt, ixl_role role,
                                  const ixl_tensor *codes, const ixl_tensor *scales,
                                  ixl_tensor *out);
/* The weights the kernels take: dense F32 [R,H] (fp32 reduction), sparse BF16 [R,H]
 * (bf16 reduction). For fp8, w' = w * q_scale (q_scales F32 [R,H]); else w. Either output may
 * be NULL. */
IXL_API ixl_status ixl_prepare_weights(ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *weights,
                                       const ixl_tensor *q_scales, ixl_tensor *dense_f32,
                                       ixl_tensor *sparse_bf16);
/* Paged layout: writes `count` positions of contiguous codes/scales, starting at position
 * `src_start`, into pages U8 [num_pages, page_stride] at logical positions 0..count-1 through
 * page_ids I32 [ceil(count / page_size)] (values first, then scales, SPEC 2). pages must not
 * share memory with codes, scales or page_ids. Host page_ids must be distinct and in
 * [0, num_pages); device page_ids are not read on the host: the kernel skips ids outside that
 * range, and distinct ids are the caller's to ensure. */
IXL_API ixl_status ixl_kv_pages_write(ixl_ctx *ctx, ixl_kv_format fmt, const ixl_tensor *codes,
                                      const ixl_tensor *scales, int64_t src_start, int64_t count,
                                      ixl_tensor *pages, int page_size, const ixl_tensor *page_ids);

/* ---------------------------------------------------------------- kernels K1-K7 (SPEC 3) */
/* The quantized inputs of one layer. q_codes U8 [R,H,value_bytes], q_scales I32 [R,H]
 * (mxfp4/mxfp8) or NULL (fp8: the Q scale is folded into the weights). */
typedef struct ixl_qk {
  const ixl_tensor *q_codes;
  const ixl_tensor *q_scales;
  const ixl_tensor *k_codes;   /* ragged: U8 [N, value_bytes]; paged: NULL */
  const ixl_tensor *k_scales;  /* ragged: I32 [N] (MX) or F32 [N] (fp8); paged: NULL */
  const ixl_tensor *k_pages;   /* paged: U8 [num_pages, page_stride]; ragged: NULL */
  int32_t page_size;           /* paged only */
  int32_t kv_format;           /* ixl_kv_format */
} ixl_qk;

/* K1 dense ragged. weights F32 [R,H] for IXL_REDUCE_FP32 (out F32), BF16 [R,H] for
 * IXL_REDUCE_BF16 (out BF16). ks/ke I32 [R]. out [R,N] (full) or [R,max_len] (compressed,
 * column j = K row ks+j). clean: columns outside [ks,ke) become -inf. */
IXL_API ixl_status ixl_dense_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                    const ixl_tensor *ks, const ixl_tensor *ke, ixl_layout layout,
                                    int clean, ixl_reduction reduction, ixl_tensor *out);
/* K2 dense paged. context_lens I32 [R], block_table I32 [R, max_pages]. out [R, max_len];
 * columns >= context_len are -inf. */
IXL_API ixl_status ixl_dense_logits_paged(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                          const ixl_tensor *context_lens,
                                          const ixl_tensor *block_table, ixl_reduction reduction,
                                          ixl_tensor *out);
/* K1 or K2 with K3's block scores emitted from the logits kernel (issue 14's fused K3, SPEC 3
 * K3 steps 1-3 with block_score max). scores F32 [R, >= ceil(C / cbs)] (C: out's columns):
 * block b of row r gets the max of row r's fp32 logits over the request-local positions
 * [b*cbs, min((b+1)*cbs, len)) (NaN propagates), the newest block +inf (a NaN stays NaN); the
 * columns >= nblocks[r] are unspecified. nblocks I32 [R] gets ceil(len / cbs), len = ke - ks
 * (K1, compressed layout only) or context_len (K2), at most C. Both reductions' K1/K2 run as
 * without scores; the scores need the fp32 reduction. emitted (out): 1 when the logits
 * variant that ran wrote scores and nblocks, 0 when it cannot for this problem (then nothing
 * is written there: run ixl_candidate_select on the logits instead). K3 itself is then
 * ixl_topk(scores, NULL, nblocks, T, 1, out) (key descending, block id ascending, -1 pads). */
typedef struct ixl_block_scores {
  int32_t candidate_block_size; /* cbs >= 1 */
  ixl_tensor *scores;
  ixl_tensor *nblocks;
  int32_t emitted;
} ixl_block_scores;
IXL_API ixl_status ixl_dense_logits_scored(ixl_ctx *ctx, const ixl_qk *in,
                                           const ixl_tensor *weights, const ixl_tensor *ks,
                                           const ixl_tensor *ke, ixl_layout layout, int clean,
                                           ixl_reduction reduction, ixl_tensor *out,
                                           ixl_block_scores *bs);
IXL_API ixl_status ixl_dense_logits_paged_scored(ixl_ctx *ctx, const ixl_qk *in,
                                                 const ixl_tensor *weights,
                                                 const ixl_tensor *context_lens,
                                                 const ixl_tensor *block_table,
                                                 ixl_reduction reduction, ixl_tensor *out,
                                                 ixl_block_scores *bs);
/* K3. logits F32 [R, C] in compressed layout (column = request-local position), lens I32 [R]
 * (<= C). out I32 [R, T], sharing no memory with logits or lens. */
IXL_API ixl_status ixl_candidate_select(ixl_ctx *ctx, const ixl_tensor *logits,
                                        const ixl_tensor *lens, int candidate_block_size,
                                        ixl_block_score score, ixl_tensor *out);
/* K4. cand I32 [R, T]; row_ks I32 [R] or NULL (= 0, paged); row_ke I32 [R].
 * sparse_ids I32 [R, T*cbs/sbk], end I32 [R]. Aligned mode refuses a non-empty row whose ks
 * is not a multiple of sbk, naming the row. */
IXL_API ixl_status ixl_expand(ixl_ctx *ctx, const ixl_tensor *cand, const ixl_tensor *row_ks,
                              const ixl_tensor *row_ke, int candidate_block_size,
                              int sparse_block_kv, ixl_ks_mode ks_mode, ixl_tensor *sparse_ids,
                              ixl_tensor *end);
/* K5. weights BF16 [R,H]. Ragged: row_ks/row_ke I32 [R] (the K range of each row). Paged
 * (in->k_pages set): row_ks NULL, row_ke = context_lens, block_table I32 [R, max_pages].
 * out BF16 [R, num_sparse_blocks*sbk]; columns at or past the row's end are -inf. Never reads
 * K outside the K tensor or the row's pages. */
IXL_API ixl_status ixl_sparse_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                                     const ixl_tensor *row_ks, const ixl_tensor *row_ke,
                                     const ixl_tensor *block_table, const ixl_tensor *sparse_ids,
                                     int sparse_block_kv, ixl_ks_mode ks_mode, ixl_tensor *out);
/* K6. logits F32 or BF16 [R, C]; the row's columns are [row_start, row_end) (row_start NULL
 * = 0). out I32 [R, k]: column indices relative to row_start, ties to the smaller column,
 * NaN above every number, -1 pads last. sorted: by value descending (ties by column). */
IXL_API ixl_status ixl_topk(ixl_ctx *ctx, const ixl_tensor *logits, const ixl_tensor *row_start,
                            const ixl_tensor *row_end, int k, int sorted, ixl_tensor *out);
/* K7. cols I32 [R, k] sparse columns; sparse_ids I32 [R, NSB]; row_ks I32 [R] or NULL (= 0).
 * out I32 [R, k] request-local positions, -1 for c < 0. out may be cols itself (exactly, not a
 * partial overlap); it must not share memory with sparse_ids or row_ks. */
IXL_API ixl_status ixl_remap(ixl_ctx *ctx, const ixl_tensor *cols, const ixl_tensor *sparse_ids,
                             const ixl_tensor *row_ks, int sparse_block_kv, ixl_tensor *out);
/* K6 then K7 as one op: out I32 [R, k] gets ixl_topk(logits, row_start, row_end, k, sorted)
 * remapped by ixl_remap(sparse_ids, row_ks, sparse_block_kv), exactly (the GPU's select v2
 * does both in one kernel). out must not share memory with any input. On a remap error (a
 * column past sparse_ids' blocks, a position outside [0, INT32_MAX]) out holds the columns. */
IXL_API ixl_status ixl_topk_remap(ixl_ctx *ctx, const ixl_tensor *logits,
                                  const ixl_tensor *row_start, const ixl_tensor *row_end, int k,
                                  int sorted, const ixl_tensor *sparse_ids,
                                  const ixl_tensor *row_ks, int sparse_block_kv, ixl_tensor *out);
/* The comparison path: sets logits (F32 or BF16 [R, C], compressed layout) to -inf outside
 * the candidate blocks cand I32 [R, T] and outside [0, lens[r]), in place; lens and cand must not
 * share memory with logits. */
IXL_API ixl_status ixl_mask_candidates(ixl_ctx *ctx, ixl_tensor *logits, const ixl_tensor *lens,
                                       const ixl_tensor *cand, int candidate_block_size);

/* ---------------------------------------------------------------- kernel variants */
/* Block owned by the variant registry (kernels/variants.c). Each op family ("logits": K1, K2,
 * K5; "select": K3, K6; "index", "formats", "gen": none registered yet) has named variants:
 * on the CPU "ref" (the definition) and "fast" where one exists, on CUDA "v1", "v2", ... An op
 * runs the context's pin for its family, or by default the last listed variant for the
 * tensors' backend that this machine runs (CUDA: min_sm) and that supports the problem;
 * nothing is timed. A pin that cannot run or refuses the problem makes the op fail with
 * IXL_ERR_UNSUPPORTED, naming the family, the pin and the variants that would run. Pins are
 * per backend: a CUDA context's ops on host tensors keep their CPU pin (or default). */
/* Variants of `family` (-1: not a family), and the i-th one's name, backend ("cpu" or
 * "cuda"), minimum SM (compute capability * 10; 0 on the CPU) and one-line description.
 * Out of range: NULL (names, backends, descriptions) or -1. */
IXL_API int32_t ixl_variant_count(const char *family);
IXL_API const char *ixl_variant_name(const char *family, int32_t i);
IXL_API const char *ixl_variant_backend(const char *family, int32_t i);
IXL_API int32_t ixl_variant_min_sm(const char *family, int32_t i);
IXL_API const char *ixl_variant_about(const char *family, int32_t i);
/* The stages the i-th variant of `family` fuses into another (SPEC 6's `fused`), as a
 * comma-separated list: "remap" for a select variant whose top-k writes K7's positions,
 * "candidate_select" for a logits variant whose K1/K2 emit K3's block scores (the step fuses
 * K3 where the problem allows: block_score max), "" for none; NULL out of range. */
IXL_API const char *ixl_variant_fuses(const char *family, int32_t i);
/* Pins `family`'s ops on ctx to variant `name`; NULL or "" returns both backends to the
 * default. An unknown family or name is IXL_ERR_INVALID_ARG (the message lists the family's
 * variants); a CUDA variant on a CPU context is IXL_ERR_UNSUPPORTED. */
IXL_API ixl_status ixl_ctx_set_variant(ixl_ctx *ctx, const char *family, const char *name);
/* The pinned name ("" when none), and the variant the context's last op of `family` ran (""
 * before the first): the `variant.<family>` value of a result row. */
IXL_API const char *ixl_ctx_variant(const ixl_ctx *ctx, const char *family);
IXL_API const char *ixl_ctx_variant_ran(const ixl_ctx *ctx, const char *family);
/* ---------------------------------------------------------------- end of kernel variants */

/* ---------------------------------------------------------------- builder (SPEC 4) */
/* Every numeric field is int64 so an absurd value is seen and refused, never truncated. */
typedef struct ixl_config {
  int64_t heads;                 /* H: multiple of 4 in [4, 128]; default 32 */
  int64_t head_dim;              /* D: 128 */
  int64_t index_topk;            /* k: multiple of 8 in [8, 4096]; default 512 */
  int64_t candidate_block_size;  /* cbs; default 8 */
  int64_t candidate_topk_blocks; /* T; default 2048 */
  int64_t sparse_block_kv;       /* sbk; 0 = auto (pick_sparse_block_kv) */
  int64_t page_size;             /* default 128 */
  int64_t max_rows;              /* default 8192 */
  int64_t max_model_len;         /* default 1048576 */
  int64_t compress_ratio;        /* default 1 */
  int64_t workspace_tokens;      /* 0 = 40 * max_model_len / compress_ratio */
  int64_t max_logits_bytes;      /* default 512 MiB */
  int64_t context_parallel;      /* must be 1 */
  int32_t kv_format;             /* ixl_kv_format; default mxfp4 */
  int32_t quantizer;             /* ixl_quantizer; default rne */
  int32_t ks_mode;               /* ixl_ks_mode; default unaligned */
  int32_t block_score;           /* ixl_block_score; default max */
  int32_t split_width;           /* ixl_split_width; default bf16 */
} ixl_config;

typedef struct ixl_builder_info {
  ixl_config config;            /* resolved: sparse_block_kv and workspace_tokens filled in */
  int64_t num_sparse_blocks;
  int64_t num_sparse_cols;
  int64_t min_split_seq_len;
  int64_t sparse_ids_bytes;
  int64_t end_bytes;
  int64_t col_indices_bytes;
  int64_t zero_row_starts_bytes;
  int64_t row_ks_bytes;
  int64_t row_ke_bytes;
  /* all of the above plus row_indices (max_rows * 4): everything on the context's device */
  int64_t scratch_bytes;
} ixl_builder_info;

typedef struct ixl_builder ixl_builder; /* opaque */

IXL_API void ixl_config_defaults(ixl_config *cfg);
/* Runs every SPEC 4 check; on success fills *info (may be NULL). */
IXL_API ixl_status ixl_config_validate(ixl_ctx *ctx, const ixl_config *cfg, ixl_builder_info *info);
/* Every valid sparse_block_kv for this config (ascending); *n gets the count (may exceed
 * max_out, in which case only max_out are written). */
IXL_API ixl_status ixl_valid_sparse_block_kv(ixl_ctx *ctx, const ixl_config *cfg, int32_t *out,
                                             int32_t max_out, int32_t *n);
/* Validates, then allocates the scratch once on the context's device kind. */
IXL_API ixl_status ixl_builder_new(ixl_ctx *ctx, const ixl_config *cfg, ixl_builder **out);
IXL_API void ixl_builder_free(ixl_builder *b);
IXL_API void ixl_builder_get_info(const ixl_builder *b, ixl_builder_info *info);

/* A step's requests. Decode requests come first in row order, then prefill requests.
 * Lengths are in tokens; with compress_ratio r, a request of L tokens has L / r positions.
 * Block tables are caller-owned I32 tensors that must outlive the step metadata. */
typedef struct ixl_batch {
  int32_t n_decode;
  /* [n_decode] tokens, the new token included; 0 = an empty row */
  const int64_t *decode_context_lens;
  const ixl_tensor *decode_block_table; /* I32 [n_decode, max_pages], or NULL */
  int32_t n_prefill;
  const int64_t *prefill_query_lens;    /* [n_prefill] new tokens (rows) */
  const int64_t *prefill_context_lens;  /* [n_prefill] tokens before the query */
  const ixl_tensor *prefill_block_table;/* I32 [n_prefill, max_pages], or NULL */
} ixl_batch;

/* Rows of one sparse-logits call: the decode rows, or one prefill chunk. Every tensor here is
 * a view into the builder's scratch (or the batch's block table) sized to the rows. */
typedef struct ixl_rows {
  int64_t token_start, token_end;   /* rows [token_start, token_end) of the step */
  int32_t request_start, request_end; /* requests covered ([start, end) over all requests) */
  int64_t query_start, query_end;   /* query sub-chunk of request_start, else 0 / its query len */
  int64_t workspace_tokens;         /* prefill: positions gathered into the workspace */
  int64_t logits_bytes;             /* prefill: the budgeted fp32 [rows, seq_len] bytes */
  int32_t is_decode;
  ixl_tensor row_ks;        /* I32 [rows]; zeros for decode */
  ixl_tensor row_ke;        /* I32 [rows] */
  ixl_tensor sparse_ids;    /* I32 [rows, num_sparse_blocks] */
  ixl_tensor end;           /* I32 [rows] */
  ixl_tensor col_indices;   /* I32 [rows, index_topk] */
  ixl_tensor block_table;   /* decode: I32 [rows, max_pages] view of the batch's; else empty */
  ixl_tensor row_indices;   /* I32 [rows] row -> request index */
} ixl_rows;

typedef struct ixl_step {
  int64_t n_rows;
  int64_t n_decode_rows;
  int32_t has_decode;
  ixl_rows decode;
  int32_t n_chunks;
  ixl_rows *chunks;         /* builder-owned array of n_chunks entries, valid until next build */
} ixl_step;

/* Builds one step's metadata into *step. Allocates nothing (proved by a spec through the
 * context's allocation counters). Errors name the request; nothing is half-built. sparse: 1
 * budgets prefill rows with the min_split_seq_len clamp (SPEC 5). */
IXL_API ixl_status ixl_builder_build(ixl_builder *b, const ixl_batch *batch, int sparse,
                                     ixl_step *step);

/* ---------------------------------------------------------------- chunker (SPEC 5) */
typedef struct ixl_chunk {
  int32_t request_start, request_end; /* [start, end) */
  int64_t query_start, query_end;     /* rows of request_start when split, else 0..query len */
  int64_t rows;                        /* query rows in the chunk */
  int64_t seq_tokens;                  /* sum of the (clamped) seq_lens */
  int64_t logits_bytes;                /* rows * seq_tokens * 4 */
  int32_t is_sub_chunk;
} ixl_chunk;

/* The greedy rule of SPEC 5 on its own: seq_lens/query_lens in positions, per request.
 * With sparse = 1 the seq_lens are clamped up to min_split_seq_len first. *n_chunks gets the
 * count even when it exceeds max_chunks (then only max_chunks are written and
 * IXL_ERR_INVALID_ARG is returned). */
IXL_API ixl_status ixl_chunk_plan(ixl_ctx *ctx, const ixl_builder_info *info, int32_t n_requests,
                                  const int64_t *seq_lens, const int64_t *query_lens, int sparse,
                                  ixl_chunk *out, int32_t max_chunks, int32_t *n_chunks);

/* ---------------------------------------------------------------- metrics (SPEC 6) */
/* Gathers src [R, C] (F32, BF16 or I32) at columns idx I32 [R, k] into out [R, k] (same dtype
 * as src). An index < 0 or >= C gives -inf (floats) or -1 (I32). Dispatches on the device. */
IXL_API ixl_status ixl_gather_cols(ixl_ctx *ctx, const ixl_tensor *src, const ixl_tensor *idx,
                                   ixl_tensor *out);
/* Host-only per-row statistics over position lists (I32 [R, k] or [R], -1 = empty slot):
 * counts[r] = |{a[r] >= 0} intersect {b[r] >= 0}|, valid[r] = |{a[r] >= 0}| (valid may be NULL).
 * The per-row values of these functions (counts, valid, end, mismatches, out) are I32 [R]
 * (F32 [R] for mass_recall's out), and no output may share memory with an input; the same
 * holds for gather_cols' out. */
IXL_API ixl_status ixl_rows_overlap(ixl_ctx *ctx, const ixl_tensor *a, const ixl_tensor *b,
                                    ixl_tensor *counts, ixl_tensor *valid);
/* counts[r] = how many valid positions of pos[r] lie in a candidate block of cand I32 [R, T]. */
IXL_API ixl_status ixl_rows_in_candidates(ixl_ctx *ctx, const ixl_tensor *pos,
                                          const ixl_tensor *cand, int candidate_block_size,
                                          ixl_tensor *counts);
/* out[r] (F32) = the share of the softmax mass of the dense top-k (positions dense_pos with
 * logits dense_vals F32 [R, k]) whose positions sel[r] also holds; NaN when the row is empty. */
IXL_API ixl_status ixl_rows_mass_recall(ixl_ctx *ctx, const ixl_tensor *dense_pos,
                                        const ixl_tensor *dense_vals, const ixl_tensor *sel,
                                        ixl_tensor *out);
/* Compares two BF16 [R, C] tensors on columns [0, end[r]): mismatches[r] counts the entries
 * that differ bitwise (+0 == -0); over entries finite in both, adds sum((x-y)^2) to *sum_dd
 * and sum(x*x + y*y) to *sum_sq: SPEC 3's diff measure 1 - 2 sum(xy) / sum(x^2 + y^2) is
 * sum_dd / sum_sq, without the cancellation (exactly 0 for equal entries); a -inf in one but not
 * the other counts as a mismatch. */
IXL_API ixl_status ixl_rows_bf16_compare(ixl_ctx *ctx, const ixl_tensor *a, const ixl_tensor *b,
                                         const ixl_tensor *end, ixl_tensor *mismatches,
                                         double *sum_dd, double *sum_sq);

/* ---------------------------------------------------------------- safetensors */
typedef struct ixl_st_file ixl_st_file; /* opaque: a parsed file (reader) or a file being built */

typedef struct ixl_st_entry {
  const char *name;
  int32_t dtype;        /* ixl_dtype (F32, F16, BF16, I32, U8, E4M3) */
  int32_t ndim;
  int64_t shape[8];
  int64_t nbytes;
} ixl_st_entry;

/* Reads and validates a whole file; every malformed file is an IXL_ERR_FORMAT naming the
 * problem (header length, JSON, offsets, dtype, shape/size, truncation). */
IXL_API ixl_status ixl_st_open(ixl_ctx *ctx, const char *path, ixl_st_file **out);
/* Same, from memory (used by the fuzzer); the bytes are copied. */
IXL_API ixl_status ixl_st_parse(ixl_ctx *ctx, const uint8_t *bytes, size_t len, ixl_st_file **out);
IXL_API void ixl_st_close(ixl_st_file *f);
IXL_API int32_t ixl_st_count(const ixl_st_file *f);
IXL_API ixl_status ixl_st_entry_at(const ixl_st_file *f, int32_t i, ixl_st_entry *out);
/* -1 when absent. */
IXL_API int32_t ixl_st_find(const ixl_st_file *f, const char *name);
IXL_API const void *ixl_st_data(const ixl_st_file *f, int32_t i);
/* The __metadata__ value for key, or NULL. */
IXL_API const char *ixl_st_metadata(const ixl_st_file *f, const char *key);
IXL_API int32_t ixl_st_metadata_count(const ixl_st_file *f);
IXL_API const char *ixl_st_metadata_key(const ixl_st_file *f, int32_t i);

/* Writer: collect tensors (data copied), then write atomically (temp file + rename). */
IXL_API ixl_status ixl_st_writer_new(ixl_ctx *ctx, ixl_st_file **out);
IXL_API ixl_status ixl_st_writer_add(ixl_st_file *w, const char *name, ixl_dtype dtype, int ndim,
                                     const int64_t *shape, const void *data, int64_t nbytes);
IXL_API ixl_status ixl_st_writer_set_metadata(ixl_st_file *w, const char *key, const char *value);
IXL_API ixl_status ixl_st_writer_save(ixl_st_file *w, const char *path);

/* ---------------------------------------------------------------- synthetic workload */
/* Section owned by the workload generator (kernels/gen/workload.c, kernels/gen/workload.cu);
 * the model and every knob are described in docs/workload.md. Keys carry a slowly rotating
 * positional direction, a topic direction per document span, a sink direction on the first
 * positions and a needle direction on a few isolated positions; a query mixes the same
 * directions with per-head strengths, so its logits row has sinks, a recent window, favoured
 * documents and needles over a noisy floor. Seeded, and bit-identical on the CPU and the GPU. */
typedef struct ixl_workload_params {
  int64_t sinks;             /* sink positions at the start of each request (4) */
  float sink_strength;       /* how much every query likes the sinks (16) */
  float locality;            /* how much a query likes the keys near its own position (10) */
  int64_t locality_window;   /* positions between positional anchors: keys within about this
                              * distance share the query's direction (256) */
  int64_t topics;            /* document spans per request, of random lengths (8) */
  float topic_strength;      /* how much a query likes its preferred documents (2) */
  int64_t topics_per_query;  /* documents each query prefers, among those it sees (2) */
  int64_t needles;           /* isolated far positions per request, each wanted by one of its
                              * rows (1) */
  float needle_strength;     /* how much that row wants it (32) */
  float needle_source;       /* share of needle_strength in the source layer's query, 0..1 (1);
                              * 0: only the consumer layers want the needles */
  float noise;               /* the query's own content, drawn per layer (6) */
  float key_noise;           /* the keys' own content, shared by every layer (2) */
  float head_spread;         /* spread of the per-head strengths around 1 (0.5) */
  float weight_spread;       /* spread of the head weights around their mean (0.3) */
  float layer_correlation;   /* 0: consumers draw their head strengths, query noise and weights
                              * independently; 1: identical to the source layer's (0.4) */
  float activation_scale;    /* RMS of the q and k elements outside outlier channels (1) */
  int64_t outlier_channels;  /* channels where keys are outlier_scale times larger and queries
                              * as much smaller, so the logits are unchanged (2) */
  float outlier_scale;       /* (16) */
} ixl_workload_params;

/* One request of a generated batch. Its keys are k[k_start, k_start + seq_len) (positions
 * 0..seq_len-1) and its rows are q[first_row, first_row + query_len), the last query_len
 * positions (a decode request has query_len 1). Requests ascend in both k_start and first_row
 * without overlapping; rows and keys no request covers are zeros. */
typedef struct ixl_workload_request {
  int64_t k_start;
  int64_t seq_len;
  int64_t query_len;
  int64_t first_row;
} ixl_workload_request;

IXL_API void ixl_workload_defaults(ixl_workload_params *p);
/* Checks every knob; the message names the knob, its value and the rule. */
IXL_API ixl_status ixl_workload_check(ixl_ctx *ctx, const ixl_workload_params *p);
/* Generates a step's inputs: q F32 [R,H,D] and weights F32 [R,H] of the source layer, keys
 * k F32 [N,D], and q_consumer F32 [L,R,H,D] with weights_consumer F32 [L,R,H] (both NULL for
 * L = 0). All on one device kind: the CPU (OpenMP) for host tensors, CUDA for device ones,
 * with the same bits. H >= 1; D a multiple of 4. */
IXL_API ixl_status ixl_workload_generate(ixl_ctx *ctx, const ixl_workload_params *p,
                                         const ixl_workload_request *requests, int32_t n_requests,
                                         uint64_t seed, ixl_tensor *q, ixl_tensor *weights,
                                         ixl_tensor *k, ixl_tensor *q_consumer,
                                         ixl_tensor *weights_consumer);
/* The hidden structure of request `request` of such a batch (same params, requests and seed):
 * its topic span starts (request-local, ascending; *n_topics of them, at most max_topics
 * written), and its needles: positions and the request-local rows that want them (*n_needles,
 * at most max_needles written). Any output pointer may be NULL. */
IXL_API ixl_status ixl_workload_structure(ixl_ctx *ctx, const ixl_workload_params *p,
                                          const ixl_workload_request *requests, int32_t n_requests,
                                          uint64_t seed, int32_t request, int64_t *topic_starts,
                                          int32_t max_topics, int32_t *n_topics,
                                          int64_t *needle_pos, int64_t *needle_rows,
                                          int32_t max_needles, int32_t *n_needles);

#ifndef IXL_CDEF
#ifdef __cplusplus
}
#endif
#endif
#endif /* IDXLAB_H */
