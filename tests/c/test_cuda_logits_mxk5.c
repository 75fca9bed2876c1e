/* test_cuda_logits_mxk5.c - ragged K5 (mxfp4, H 32) on logits v2's warp-specialized kernel
 * (IXL_LOGITS_V2_MX_K5WS, kernels/logits/logits_v2_mxk5_sm90.cu): bit for bit the CPU
 * reference, and K1 bf16 on the GPU at the same positions (SPEC 3), on what test_cuda_logits's
 * K5 cases leave out: CTAs that wrap the 8-stage ring many times (16K columns a row), the slow
 * paths (key and query exponents outside the fast windows, NaN scale bytes, tiny weights),
 * sbk 4 with thousands of blocks a row, blocks wider than a tile (128), garbage ids, empty rows
 * (sbk: the builder's powers of two in [4, 128]).
 *
 * IXL_LOGITS_V2_MX_K5WS as the environment sets it (unset: the library's default, x since
 * session 9's H200 checks; the exact modes in logits_v2_mxk5_sm90.cu's k5ws_mode; 0: the
 * kernels before, as a control); pins logits v2. Skips (passes) without a CUDA GPU of sm_90
 * or newer. IXL_TEST_SMALL=1 (the compute-sanitizer runs) keeps tiny shapes; IXL_TEST_SEED
 * sets the seed; IXL_TEST_ONLY=WORD,... the cases whose names contain one. The frame (main's
 * start and end, the tensors, the scale fill, bf16 equality) is tests/c/mx_test.h's. */
#include <math.h>
#include <stdint.h>

#include "mx_test.h"

/* test_cuda_logits.c's gen_ids: K4's ids for [ks, ke) (sorted distinct blocks + ks / sbk, then
 * the last repeated), or garbage (negative, past the end, out of order). */
static void gen_ids(int32_t *ids, int64_t nsb, int64_t ks, int64_t ke, int sbk, int garbage) {
  const int64_t nblk = ke > ks ? (ke - ks + sbk - 1) / sbk : 0, base = ks / sbk;
  if (garbage) {
    for (int64_t j = 0; j < nsb; j++) ids[j] = (int32_t)rand_range(base - 3, base + nblk + 3);
    if (rand_range(0, 1))
      for (int64_t j = 1; j < nsb / 2; j++) ids[j] = ids[j - 1] + (int32_t)rand_range(1, 3);
    return;
  }
  int64_t want = nblk < nsb ? nblk : nsb;
  if (want > 0 && rand_range(0, 2) == 0) want = rand_range(1, want);
  int64_t n = 0;
  for (int64_t b = 0; b < nblk && n < want; b++)
    if ((double)(want - n) > rand_unit() * (double)(nblk - b)) ids[n++] = (int32_t)(b + base);
  for (int64_t j = n; j < nsb; j++) ids[j] = n ? ids[n - 1] : (int32_t)base;
}

typedef struct {
  const char *name;
  int64_t R, N, nsb;
  int sbk, aligned, garbage;
  int klo, khi, knan; /* key exponent bytes and NaN share (%) */
  int qlo, qhi, qnan; /* query */
  int tiny_w;         /* odd rows: weights of magnitude 2^-100 .. 2^-81 (the slow weight path) */
} k5c;

static void run_case(const void *cv) {
  const k5c *c = (const k5c *)cv;
  const int H = 32, sbk = c->sbk;
  const int64_t R = c->R, N = c->N, nsb = c->nsb, C = nsb * sbk;
  ixl_tensor *qc = tn(IXL_U8, 3, R, H, 64, IXL_HOST), *qs = tn(IXL_I32, 2, R, H, 0, IXL_HOST);
  ixl_tensor *wb = tn(IXL_BF16, 2, R, H, 0, IXL_HOST);
  ixl_tensor *kc = tn(IXL_U8, 2, N, 64, 0, IXL_HOST), *ksc = tn(IXL_I32, 1, N, 0, 0, IXL_HOST);
  ixl_tensor *ks = tn(IXL_I32, 1, R, 0, 0, IXL_HOST), *ke = tn(IXL_I32, 1, R, 0, 0, IXL_HOST);
  ixl_tensor *ids = tn(IXL_I32, 2, R, nsb, 0, IXL_HOST);
  rand_bytes(qc->data, R * H * 64);
  rand_bytes(kc->data, N * 64);
  fill_scales(qs->data, R * H, c->qlo, c->qhi, c->qnan);
  fill_scales(ksc->data, N, c->klo, c->khi, c->knan);
  uint16_t *w = wb->data;
  for (int64_t i = 0; i < R * H; i++) {
    double x = rand_unit() * 2.0 - 1.0;
    if (c->tiny_w && (i / H) % 2) x = ldexp(1.0 + rand_unit(), (int)rand_range(-100, -81));
    w[i] = ixl_f32_to_bf16((float)x);
  }
  int32_t *ksp = ks->data, *kep = ke->data, *idp = ids->data;
  for (int64_t r = 0; r < R; r++) {
    int64_t a = rand_range(0, N / 4), b = rand_range(a, N);
    if (r % 7 == 3) b = a;                  /* an empty row */
    if (r % 5 == 1) a = 0, b = N;           /* the whole K */
    if (c->aligned) a = a / sbk * sbk;
    ksp[r] = (int32_t)a;
    kep[r] = (int32_t)b;
    gen_ids(idp + r * nsb, nsb, a, b, sbk, c->garbage && r % 2);
  }
  const ixl_ks_mode mode = c->aligned ? IXL_KS_ALIGNED : IXL_KS_UNALIGNED;
  ixl_qk hq = {qc, qs, kc, ksc, NULL, 0, IXL_MXFP4};
  ixl_tensor *cpu = tn(IXL_BF16, 2, R, C, 0, IXL_HOST);
  CHECK_OK(g, ixl_sparse_logits(g, &hq, wb, ks, ke, NULL, ids, sbk, mode, cpu));
  ixl_tensor *dqc = to_dev(qc), *dqs = to_dev(qs), *dwb = to_dev(wb), *dkc = to_dev(kc),
             *dksc = to_dev(ksc), *dks = to_dev(ks), *dke = to_dev(ke), *did = to_dev(ids);
  ixl_qk dq = {dqc, dqs, dkc, dksc, NULL, 0, IXL_MXFP4};
  ixl_tensor *dout = tn(IXL_BF16, 2, R, C, 0, IXL_DEVICE);
  ixl_tensor *gpu = tn(IXL_BF16, 2, R, C, 0, IXL_HOST);
  ixl_tensor *dd = tn(IXL_BF16, 2, R, N, 0, IXL_DEVICE), *dh = tn(IXL_BF16, 2, R, N, 0, IXL_HOST);
  CHECK_OK(g, ixl_tensor_fill_bytes(g, dout, 0xFF)); /* poison: an unwritten column is NaN */
  CHECK_OK(g, ixl_sparse_logits(g, &dq, dwb, dks, dke, NULL, did, sbk, mode, dout));
  CHECK_OK(g, ixl_tensor_copy(g, gpu, dout));
  CHECK_OK(g, ixl_dense_logits(g, &dq, dwb, dks, dke, IXL_LAYOUT_FULL, 1, IXL_REDUCE_BF16, dd));
  CHECK_OK(g, ixl_tensor_copy(g, dh, dd));
  const uint16_t *gp = gpu->data, *cp = cpu->data, *dp = dh->data;
  int64_t bad = 0, dbad = 0, defined = 0;
  for (int64_t r = 0; r < R; r++)
    for (int64_t col = 0; col < C; col++) {
      const int64_t i = r * C + col;
      if (!same16(gp[i], cp[i]) && bad++ < 4)
        fprintf(stderr, "  %s: row %lld col %lld: GPU 0x%04x CPU 0x%04x (seed %llu)\n", c->name,
                (long long)r, (long long)col, gp[i], cp[i], (unsigned long long)g_seed);
      if (cp[i] == 0xFF80) continue; /* -inf: no key */
      defined++;
      const int64_t pos = (int64_t)idp[r * nsb + col / sbk] * sbk +
                          (c->aligned ? 0 : ksp[r] % sbk) + col % sbk;
      if (pos >= 0 && pos < N && !same16(gp[i], dp[r * N + pos]) && dbad++ < 4)
        fprintf(stderr, "  %s: row %lld col %lld pos %lld: K5 0x%04x K1 0x%04x (seed %llu)\n",
                c->name, (long long)r, (long long)col, (long long)pos, gp[i], dp[r * N + pos],
                (unsigned long long)g_seed);
    }
  printf("# %s: R %lld N %lld sbk %d cols %lld: %lld defined, %lld differ from the CPU, %lld "
         "from K1\n",
         c->name, (long long)R, (long long)N, sbk, (long long)C, (long long)defined,
         (long long)bad, (long long)dbad);
  CHECK_MSG(bad == 0 && dbad == 0, "%s: %lld (CPU) / %lld (K1) of %lld differ (seed %llu)",
            c->name, (long long)bad, (long long)dbad, (long long)(R * C),
            (unsigned long long)g_seed);
  ixl_tensor *ts[] = {qc, qs, wb, kc, ksc, ks, ke, ids, cpu, dqc, dqs, dwb, dkc, dksc, dks, dke,
                      did, dout, gpu, dd, dh};
  for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) ixl_tensor_free(ts[k]);
}

int main(void) {
  /* the switch as the environment sets it (unset: the library's default) */
  const int st = mx_test_start("mxk5", "IXL_LOGITS_V2_MX_K5WS", NULL);
  if (st <= 0) return st < 0;
  static const k5c big[] = {
      /* name, R, N, nsb, sbk, aligned, garbage, keys lo hi nan, query lo hi nan, tiny w */
      {"ring_wraps_16k_cols", 20, 60000, 2048, 8, 0, 0, 119, 135, 0, 119, 135, 0, 0},
      {"ring_wraps_aligned_sbk16", 16, 50000, 700, 16, 1, 0, 121, 133, 0, 121, 133, 0, 0},
      {"slow_paths_keys_queries_nan", 12, 9000, 300, 8, 0, 0, 40, 215, 3, 60, 200, 2, 1},
      {"fold_edges", 12, 9000, 300, 8, 0, 0, 95, 160, 0, 98, 156, 0, 1},
      {"sbk4_many_blocks", 10, 20000, 3000, 4, 0, 0, 119, 135, 1, 119, 135, 0, 0},
      {"sbk64_aligned", 10, 20000, 150, 64, 1, 0, 119, 135, 0, 119, 135, 0, 0},
      {"sbk128_wider_than_a_tile", 8, 20000, 80, 128, 0, 0, 110, 140, 0, 119, 135, 0, 0},
      {"garbage_ids", 12, 9000, 900, 4, 0, 1, 119, 135, 0, 119, 135, 0, 0},
  };
  static const k5c small[] = {
      {"small_ring_wraps", 3, 3000, 300, 4, 0, 1, 119, 135, 0, 119, 135, 0, 0},
      {"small_slow_paths", 3, 900, 60, 8, 0, 0, 40, 215, 3, 60, 200, 2, 1},
      {"small_sbk128_aligned", 2, 900, 6, 128, 1, 0, 119, 135, 0, 119, 135, 0, 0},
  };
  const k5c *cs = g_small ? small : big;
  const int n = g_small ? (int)(sizeof small / sizeof small[0]) : (int)(sizeof big / sizeof big[0]);
  for (int i = 0; i < n; i++)
    if (test_wanted(cs[i].name)) mx_test_case(cs[i].name, i, run_case, &cs[i]);
  return mx_test_end();
}
