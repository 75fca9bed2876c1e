/* logits/sparse.c - K5, the sparse logits (ragged and paged): its entry and checks, and its
 * CPU body (the `ref` and `fast` logits variants).
 *
 * Column j*sbk + o of row r is position o of the row's j-th listed sparse block:
 * - ragged, unaligned ks_mode: K row ids[j]*sbk + ks%sbk + o; aligned: ids[j]*sbk + o (aligned
 *   mode refuses a non-empty row whose ks is not a multiple of sbk, so both agree there);
 * - paged: position ids[j]*sbk + o (ks = 0), read through the row's block table.
 * The row's `end` is not an argument, so the kernel derives it from the ids exactly as K4 made
 * them: the first n_valid ids are strictly increasing and the pads repeat the last one, so
 * n_valid = the length of the strictly increasing prefix. A column is computed when j < n_valid
 * and its key lies inside the row (ragged: ks <= K row < ke; paged: 0 <= position <
 * context_len); every other column is -inf and reads nothing. For K4's ids this gives exactly
 * the columns < end, and no id, however wrong, makes the kernel read outside K or the pages.
 * One case cannot be told apart without `end`: a non-empty row with n_valid = 0 (K4 pads it
 * with ks / sbk) looks like one valid block ks / sbk, whose columns are then computed rather
 * than -inf. SPEC leaves columns past `end` unspecified, and K3 always keeps a non-empty row's
 * newest block, so the pipeline never makes such a row.
 * Numerics: the engine of logits/engine.c with the bf16 reduction, so a column equals K1/K2
 * with the bf16 reduction at the same position, bit for bit. */
#include "logits/engine.h"
#include "logits/logits.h"

#include <omp.h>

/* Length of the strictly increasing prefix of ids[0..n). */
static int64_t valid_prefix(const int32_t *ids, int64_t n) {
  if (n == 0) return 0;
  int64_t k = 1;
  while (k < n && ids[k] > ids[k - 1]) k++;
  return k;
}

ixl_status ixl_sparse_logits(ixl_ctx *ctx, const ixl_qk *in, const ixl_tensor *weights,
                             const ixl_tensor *row_ks, const ixl_tensor *row_ke,
                             const ixl_tensor *block_table, const ixl_tensor *sparse_ids,
                             int sparse_block_kv, ixl_ks_mode ks_mode, ixl_tensor *out) {
  ixl_status st;
  int64_t R, H, N = 0, num_pages = 0, stride = 0;
  if ((st = ixl_check_query(ctx, "sparse_logits", in, weights, IXL_REDUCE_BF16, &R, &H))) return st;
  const int paged = in->k_pages != NULL;
  if (paged) {
    if ((st = ixl_check_pages(ctx, "sparse_logits", in, &num_pages, &stride))) return st;
    if (row_ks)
      return ixl_set_error(
          ctx, IXL_ERR_INVALID_ARG,
          "sparse_logits: row_ks must be NULL for paged rows (k_pages set; ks = 0)");
    if ((st = ixl_check_tensor(ctx, block_table, "block_table", IXL_I32, 2)) ||
        (st = ixl_check_dim(ctx, block_table, "block_table", 0, R)))
      return st;
  } else {
    /* k_pages is NULL here, so this checks k_codes and k_scales as K1 does */
    if ((st = ixl_check_ragged_k(ctx, "sparse_logits", in, &N))) return st;
    if (block_table)
      return ixl_set_error(
          ctx, IXL_ERR_INVALID_ARG,
          "sparse_logits: block_table must be NULL for ragged rows (k_pages is NULL)");
    if ((st = ixl_check_tensor(ctx, row_ks, "row_ks", IXL_I32, 1)) ||
        (st = ixl_check_dim(ctx, row_ks, "row_ks", 0, R)))
      return st;
  }
  if ((st = ixl_check_tensor(ctx, row_ke, "row_ke", IXL_I32, 1)) ||
      (st = ixl_check_dim(ctx, row_ke, "row_ke", 0, R)) ||
      (st = ixl_check_tensor(ctx, sparse_ids, "sparse_ids", IXL_I32, 2)) ||
      (st = ixl_check_dim(ctx, sparse_ids, "sparse_ids", 0, R)))
    return st;
  if (sparse_block_kv < 4 || sparse_block_kv > 128 || (sparse_block_kv & (sparse_block_kv - 1)))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "sparse_block_kv = %d: must be a power of two in [4, 128]",
                         sparse_block_kv);
  if (ks_mode != IXL_KS_UNALIGNED && ks_mode != IXL_KS_ALIGNED)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "ks_mode = %d: must be unaligned (0) or aligned (1)", (int)ks_mode);
  const int64_t nsb = sparse_ids->shape[1], sbk = sparse_block_kv;
  int64_t ncols;
  if (!ixl_mul_ok(nsb, sbk, &ncols))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW,
                         "sparse_ids shape[1] = %lld times sparse_block_kv = %d overflows",
                         (long long)nsb, sparse_block_kv);
  if ((st = ixl_check_tensor(ctx, out, "out", IXL_BF16, 2)) ||
      (st = ixl_check_dim(ctx, out, "out", 0, R)))
    return st;
  if (out->shape[1] != ncols)
    return ixl_set_error(
        ctx, IXL_ERR_SHAPE,
        "out: shape[1] = %lld, expected num_sparse_blocks * sparse_block_kv = %lld * %d = %lld",
        (long long)out->shape[1], (long long)nsb, sparse_block_kv, (long long)ncols);
  const ixl_tensor *all[] = {in->q_codes, in->q_scales, in->k_codes, in->k_scales,
                             in->k_pages, weights,      row_ks,      row_ke,
                             block_table, sparse_ids,   out};
  const char *names[] = {"q_codes", "q_scales", "k_codes", "k_scales", "k_pages", "weights",
                         "row_ks", "row_ke", "block_table", "sparse_ids", "out"};
  int dev;
  if ((st = ixl_check_op(ctx, &dev, 11, all, names, 10)))
    return st;
  ixl_logits_call c = {.mode = IXL_LOGITS_SPARSE, .in = in, .weights = weights,
                       .reduction = IXL_REDUCE_BF16, .ks = row_ks, .ke = row_ke,
                       .block_table = block_table, .sparse_ids = sparse_ids,
                       .sparse_block_kv = sparse_block_kv, .ks_mode = ks_mode, .out = out,
                       .R = R, .H = H, .N = N, .num_pages = num_pages, .page_stride = stride};
  return ixl_logits_run(ctx, dev, &c);
}

ixl_status ixl_sparse_logits_cpu(ixl_ctx *ctx, const ixl_logits_call *c, int path) {
  ixl_status st;
  const ixl_qk *in = c->in;
  const ixl_tensor *weights = c->weights, *row_ks = c->ks, *row_ke = c->ke;
  const ixl_tensor *block_table = c->block_table, *sparse_ids = c->sparse_ids;
  const int sparse_block_kv = c->sparse_block_kv;
  const ixl_ks_mode ks_mode = c->ks_mode;
  ixl_tensor *out = c->out;
  const int64_t R = c->R, N = c->N, num_pages = c->num_pages, stride = c->page_stride;
  const int paged = in->k_pages != NULL;
  const int64_t nsb = sparse_ids->shape[1], sbk = sparse_block_kv, ncols = out->shape[1];

  /* host values */
  const int32_t *kep = row_ke->data, *ksp = paged ? NULL : row_ks->data, *ids = sparse_ids->data;
  const int32_t *bt = paged ? block_table->data : NULL;
  const int64_t max_pages = paged ? block_table->shape[1] : 0;
  const int P = in->page_size;
  if (paged) {
    if ((st = ixl_check_block_table(ctx, "row_ke", kep, bt, R, max_pages, P, num_pages))) return st;
  } else {
    if ((st = ixl_check_ranges(ctx, ksp, kep, R, N, "row_ks", "row_ke"))) return st;
    if (ks_mode == IXL_KS_ALIGNED)
      for (int64_t r = 0; r < R; r++)
        if (kep[r] > ksp[r] && ksp[r] % sbk)
          return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                               "row_ks[%lld] = %d: must be a multiple of sparse_block_kv (%d) in "
                               "the aligned ks_mode",
                               (long long)r, ksp[r], sparse_block_kv);
  }
  if (R == 0 || ncols == 0) return IXL_OK;
  const int threads = ixl_ctx_threads(ctx);
  ixl_engine *e;
  if ((st = ixl_engine_new(ctx, in->kv_format, IXL_REDUCE_BF16, in->q_codes, in->q_scales, weights,
                           threads, path, &e)))
    return st;
  const int64_t vb = ixl_format_value_bytes((ixl_kv_format)in->kv_format);
  const uint8_t *kc = paged ? NULL : in->k_codes->data, *ksc = paged ? NULL : in->k_scales->data;
  const uint8_t *pages = paged ? in->k_pages->data : NULL;
  uint16_t *outp = out->data;
  const int64_t cr = ixl_engine_chunk_rows(e), nblk = ixl_ceil_div(ncols, IXL_KBLOCK);
  for (int64_t r0 = 0; r0 < R; r0 += cr) {
    const int64_t nr = R - r0 < cr ? R - r0 : cr, ntask = nr * nblk;
    ixl_engine_load_rows(e, r0, nr);
#pragma omp parallel num_threads(threads)
    {
      const int tid = omp_get_thread_num();
      ixl_kref keys[IXL_KBLOCK];
      float res[IXL_KBLOCK];
      int64_t nvalid_row = -1, nvalid = 0;
#pragma omp for schedule(dynamic, 1)
      for (int64_t t = 0; t < ntask; t++) {
        const int64_t r = r0 + t / nblk, c0 = (t % nblk) * IXL_KBLOCK;
        const int64_t c1 = c0 + IXL_KBLOCK < ncols ? c0 + IXL_KBLOCK : ncols;
        const int32_t *rid = ids + r * nsb;
        if (nvalid_row != r) {
          nvalid = valid_prefix(rid, nsb);
          nvalid_row = r;
        }
        const int64_t lo = paged ? 0 : ksp[r], hi = kep[r];
        const int64_t off = paged || ks_mode == IXL_KS_ALIGNED ? 0 : ksp[r] % sbk;
        int any = 0;
        for (int64_t c = c0; c < c1; c++) {
          const int64_t j = c / sbk, pos = j < nvalid ? (int64_t)rid[j] * sbk + off + c % sbk : -1;
          ixl_kref *k = &keys[c - c0];
          if (j >= nvalid || pos < lo || pos >= hi) {
            k->codes = NULL;
            k->scale = NULL;
          } else if (paged) {
            const uint8_t *base = pages + (int64_t)bt[r * max_pages + pos / P] * stride;
            k->codes = base + (pos % P) * vb;
            k->scale = base + (int64_t)P * vb + (pos % P) * 4;
            any = 1;
          } else {
            k->codes = kc + pos * vb;
            k->scale = ksc + pos * 4;
            any = 1;
          }
        }
        uint16_t *o = outp + r * ncols + c0;
        if (!any) {
          for (int64_t c = c0; c < c1; c++) o[c - c0] = 0xFF80;
          continue;
        }
        ixl_engine_pack(e, tid, keys, (int)(c1 - c0));
        ixl_engine_row(e, tid, r, 0, (int)(c1 - c0), res);
        for (int64_t c = c0; c < c1; c++) o[c - c0] = ixl_f32_to_bf16(res[c - c0]);
      }
    }
  }
  return IXL_OK;
}
