/* test_sm90_layout.c - the Hopper kit's layout rules (kernels/cuda/sm90_layout.h) on the CPU,
 * CUDA=0 included, so a layout bug dies before a GPU visit: the wgmma descriptor's bits, the
 * swizzle XOR, the K-major tile layouts against the PTX ISA's canonical layouts addressed as a
 * descriptor describes them, the accumulator and RS A-operand fragment maps (bijective, their
 * inverses, spot entries of the PTX ISA figures), the e2m1 -> e4m3 widening for all 16 codes,
 * and an emulated m64nNk32 RS wgmma from the fragment tables: "Q permuted x K widened" gives
 * 2^-6 x the e2m1 dot exactly, for random codes; and the MXFP4 kernels' deferred key factors
 * (kernels/logits/v2_mx.cuh). IXL_TEST_SEED repeats a run. */
#include <math.h>
#include <stdint.h>

#include "check.h"
#include "cuda/sm90_layout.h"
#include "logits/v2_mx.cuh"
#include "numerics/scalar.h"
#include "rand.h"

static uint64_t g_seed;

TEST(descriptor_bits) {
  /* 1024 B tile start, 128B swizzle, LBO 16, SBO 1024: the fields at 0, 16, 32 and 62 */
  CHECK(ixl_sm90_desc_bits(0x400, IXL_SM90_SWIZZLE_128B, 16, 1024) == 0x4000004000010040ull);
  CHECK(ixl_sm90_desc_bits(0, IXL_SM90_SWIZZLE_NONE, 128, 256) == 0x0000001000080000ull);
  CHECK(ixl_sm90_desc_bits(0x3FFF0, IXL_SM90_SWIZZLE_32B, 0, 0) == 0xC000000000003FFFull);
  rand_seed(RAND_SPLITMIX64, g_seed);
  for (int i = 0; i < 10000; i++) {
    const uint32_t a = (uint32_t)rand_u64() & 0x3FFF0u, l = (uint32_t)rand_u64() & 0x3FFF0u;
    const uint32_t s = (uint32_t)rand_u64() & 0x3FFF0u;
    const int sw = (int)(rand_u64() & 3);
    const uint64_t d = ixl_sm90_desc_bits(a, sw, l, s);
    CHECK((d & 0x3FFF) << 4 == a);
    CHECK(((d >> 16) & 0x3FFF) << 4 == l);
    CHECK(((d >> 32) & 0x3FFF) << 4 == s);
    CHECK((int)(d >> 62) == sw);
    CHECK((d & 0x3FFEC000C000C000ull) == 0); /* reserved bits and the base offset stay 0 */
  }
}

TEST(swizzle_is_an_involutive_bijection_per_period) {
  static const int modes[4] = {IXL_SM90_SWIZZLE_NONE, IXL_SM90_SWIZZLE_32B, IXL_SM90_SWIZZLE_64B,
                               IXL_SM90_SWIZZLE_128B};
  static const uint32_t period[4] = {16, 256, 512, 1024};
  for (int m = 0; m < 4; m++) {
    static unsigned char seen[4096];
    memset(seen, 0, sizeof seen);
    for (uint32_t off = 0; off < 4096; off++) {
      const uint32_t s = ixl_sm90_swizzle(off, modes[m]);
      CHECK(s / period[m] == off / period[m]); /* stays in its period */
      CHECK((s & 15) == (off & 15));           /* moves whole 16-byte chunks */
      CHECK(ixl_sm90_swizzle(s, modes[m]) == off);
      if (s < 4096) seen[s]++;
    }
    for (int i = 0; i < 4096; i++) CHECK(seen[i] == 1);
  }
  /* 128B (TMA's SWIZZLE_128B, CUTLASS's Swizzle<3,4,3>): chunk c of 128-byte row r goes to
   * chunk c ^ (r % 8); 64B: bits 4-5 ^ bits 7-8; 32B: bit 4 ^ bit 7 */
  for (int r = 0; r < 16; r++)
    for (int c = 0; c < 8; c++) {
      const uint32_t off = (uint32_t)(r * 128 + c * 16 + 5);
      CHECK(ixl_sm90_swizzle(off, IXL_SM90_SWIZZLE_128B) ==
            (uint32_t)(r * 128 + ((c ^ (r & 7)) << 4) + 5));
      CHECK(ixl_sm90_swizzle(off, IXL_SM90_SWIZZLE_64B) ==
            (uint32_t)(r * 128 + ((c ^ (r & 3)) << 4) + 5));
      CHECK(ixl_sm90_swizzle(off, IXL_SM90_SWIZZLE_32B) ==
            (uint32_t)(r * 128 + ((c ^ (r & 1)) << 4) + 5));
    }
}

/* The PTX ISA's canonical K-major layouts of 8-bit operands as a descriptor addresses them
 * ("Shared Memory Matrix Layout"): element (r, k) of the k32 group whose descriptor has start
 * address `start`, for a tile based at a multiple of the swizzle period:
 * - no swizzle: core matrices of 8 rows x 16 B, rows 16 B apart; the two 16-byte k halves LBO
 *   apart, consecutive 8-row groups SBO apart;
 * - 128B swizzle: rows 128 B apart within an 8-row atom, atoms SBO apart, the k offset added
 *   to the start, and the swizzle applied to the resulting address bits. */
static uint32_t desc_addr(uint32_t start, int sw, uint32_t lbo, uint32_t sbo, int r, int k) {
  if (sw == IXL_SM90_SWIZZLE_NONE)
    return start + (uint32_t)(r >> 3) * sbo + (uint32_t)(k >> 4) * lbo + (uint32_t)(r & 7) * 16 +
           (uint32_t)(k & 15);
  return ixl_sm90_swizzle(start + (uint32_t)(r >> 3) * sbo + (uint32_t)(r & 7) * 128 + (uint32_t)k,
                          sw);
}

TEST(tile_layouts_are_what_their_descriptors_address) {
  static const int Rs[3] = {32, 64, 128};
  for (int ri = 0; ri < 3; ri++) {
    const int R = Rs[ri];
    for (int sw = 0; sw < 2; sw++) {
      const int mode = sw ? IXL_SM90_SWIZZLE_128B : IXL_SM90_SWIZZLE_NONE;
      const uint32_t lbo = sw ? 16 : 128, sbo = sw ? 1024 : 256;
      unsigned char *seen = calloc((size_t)R * 128, 1);
      for (int r = 0; r < R; r++)
        for (int kb = 0; kb < 128; kb++) {
          const uint32_t off = ixl_sm90_tile_off(mode, R, r, kb);
          CHECK(off < (uint32_t)R * 128);
          if (off < (uint32_t)R * 128) seen[off]++;
          const int g = kb >> 5;
          CHECK(off == desc_addr(ixl_sm90_tile_group(mode, R, g), mode, lbo, sbo, r, kb & 31));
          /* 16-byte chunks stay contiguous: a uint4 store per chunk is a valid writer */
          CHECK(off - (uint32_t)(kb & 15) == ixl_sm90_tile_off(mode, R, r, kb & ~15));
        }
      for (int i = 0; i < R * 128; i++) CHECK(seen[i] == 1);
      free(seen);
    }
  }
  /* the swizzled layout is the row-major layout TMA's SWIZZLE_128B box writes */
  for (int r = 0; r < 64; r++)
    for (int kb = 0; kb < 128; kb++)
      CHECK(ixl_sm90_tile_off(IXL_SM90_SWIZZLE_128B, 64, r, kb) ==
            ixl_sm90_swizzle((uint32_t)(r * 128 + kb), IXL_SM90_SWIZZLE_128B));
}

TEST(accumulator_fragment_is_the_ptx_table) {
  static const int Ns[3] = {32, 64, 128};
  for (int ni = 0; ni < 3; ni++) {
    const int N = Ns[ni];
    unsigned char *seen = calloc((size_t)64 * N, 1);
    for (int t = 0; t < 128; t++)
      for (int i = 0; i < N / 2; i++) {
        int r, c, t2, i2;
        ixl_sm90_acc_rc(t, i, &r, &c);
        CHECK(r >= 0 && r < 64 && c >= 0 && c < N);
        if (r >= 0 && r < 64 && c >= 0 && c < N) seen[r * N + c]++;
        ixl_sm90_acc_owner(r, c, &t2, &i2);
        CHECK(t2 == t && i2 == i);
        CHECK(r / 16 == t / 32); /* a warp owns its 16 rows */
      }
    for (int i = 0; i < 64 * N; i++) CHECK(seen[i] == 1);
    free(seen);
  }
  /* entries of the PTX ISA's m64nNk32 D figure: {thread, register, row, col} */
  static const int spot[][4] = {{0, 0, 0, 0},   {0, 1, 0, 1},  {0, 2, 8, 0},   {0, 3, 8, 1},
                                {0, 4, 0, 8},   {0, 5, 0, 9},  {1, 0, 0, 2},   {3, 1, 0, 7},
                                {4, 0, 1, 0},   {31, 0, 7, 6}, {31, 3, 15, 7}, {32, 0, 16, 0},
                                {127, 15, 63, 31}, {127, 63, 63, 127}};
  for (size_t s = 0; s < sizeof spot / sizeof spot[0]; s++) {
    int r, c;
    ixl_sm90_acc_rc(spot[s][0], spot[s][1], &r, &c);
    CHECK_MSG(r == spot[s][2] && c == spot[s][3], "T%d d%d -> (%d, %d)", spot[s][0], spot[s][1],
              r, c);
  }
}

TEST(rs_a_fragment_is_the_ptx_table) {
  unsigned char seen[64 * 32];
  memset(seen, 0, sizeof seen);
  for (int t = 0; t < 128; t++)
    for (int j = 0; j < 4; j++)
      for (int b = 0; b < 4; b++) {
        int r, k, t2, j2, b2;
        ixl_sm90_a8_rk(t, j, &r, &k);
        k += b;
        CHECK(r >= 0 && r < 64 && k >= 0 && k < 32);
        if (r >= 0 && r < 64 && k >= 0 && k < 32) seen[r * 32 + k]++;
        ixl_sm90_a8_owner(r, k, &t2, &j2, &b2);
        CHECK(t2 == t && j2 == j && b2 == b);
      }
  for (int i = 0; i < 64 * 32; i++) CHECK(seen[i] == 1);
  /* the PTX ISA's m64nNk32 A figure for 8-bit types, elements a0..a15 of a thread = bytes of
   * registers 0..3: {thread, register, row, first k} */
  static const int spot[][4] = {{0, 0, 0, 0},  {0, 1, 8, 0},   {0, 2, 0, 16},  {0, 3, 8, 16},
                                {1, 0, 0, 4},  {3, 2, 0, 28},  {4, 0, 1, 0},   {31, 3, 15, 28},
                                {32, 0, 16, 0}, {127, 3, 63, 28}};
  for (size_t s = 0; s < sizeof spot / sizeof spot[0]; s++) {
    int r, k;
    ixl_sm90_a8_rk(spot[s][0], spot[s][1], &r, &k);
    CHECK_MSG(r == spot[s][2] && k == spot[s][3], "T%d reg %d -> (%d, %d)", spot[s][0],
              spot[s][1], r, k);
  }
}

TEST(widening_is_exact_for_every_code) {
  for (uint32_t w = 0; w < 16; w++) {
    /* the same code in all 8 nibbles: every byte of both words is its widening */
    const uint32_t x = w * 0x11111111u;
    uint32_t ev, od;
    ixl_sm90_e2m1x8_widen(x, &ev, &od);
    for (int b = 0; b < 4; b++) {
      const uint8_t e = (uint8_t)(ev >> (8 * b)), o = (uint8_t)(od >> (8 * b));
      CHECK(e == o);
      CHECK(e == (uint8_t)(((w & 8) << 4) | ((w & 7) << 2)));
      CHECK(ixl_cvt_e4m3_to_f32(e) == ldexpf(ixl_cvt_e2m1_to_f32((uint8_t)w), -6));
    }
  }
  rand_seed(RAND_SPLITMIX64, g_seed + 1);
  for (int i = 0; i < 10000; i++) { /* element e of the word lands in its byte, nothing else */
    const uint32_t x = (uint32_t)rand_u64();
    uint32_t ev, od;
    ixl_sm90_e2m1x8_widen(x, &ev, &od);
    for (int e = 0; e < 8; e++) {
      const uint8_t code = (uint8_t)((x >> (4 * e)) & 15);
      const uint8_t got = (uint8_t)(((e & 1) ? od : ev) >> (8 * (e >> 1)));
      CHECK(ixl_cvt_e4m3_to_f32(got) == ldexpf(ixl_cvt_e2m1_to_f32(code), -6));
    }
  }
}

/* An e4m3 code carrying a nonzero e2m1 value times 2^s (exact for s in [-8, 6]). */
static uint8_t e2m1_code(int s) {
  static const float mag[7] = {0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = ldexpf(mag[rand_u64() % 7], s);
  return ixl_cvt_f32_to_e4m3(rand_u64() & 1 ? -v : v);
}

/* One m64nNk32 RS wgmma emulated from the fragment tables, as K2/K5 mxfp4 will run it: K (A,
 * 64 positions x 32 e2m1 codes, 16 raw bytes per row) widened in registers by the thread that
 * holds them, Q (B, N rows of e4m3) stored in k order ixl_sm90_widen_perm. The tensor core
 * multiplies A byte (r, p) by B byte (c, p); the emulation finds A byte (r, p) in the register
 * of the thread ixl_sm90_a8_owner names and writes D through ixl_sm90_acc_rc. Every D must be
 * 2^-6 x the e2m1 dot of K row r and Q row c, exactly (double holds these sums exactly). */
TEST(emulated_rs_wgmma_q_permuted_times_k_widened_is_the_dot) {
  enum { N = 64 };
  static uint8_t raw[64][16], q[N][32], bq[N][32];
  static uint32_t areg[128][4];
  static double d[64][N];
  rand_seed(RAND_SPLITMIX64, g_seed + 2);
  unsigned char seen[32] = {0};
  for (int p = 0; p < 32; p++) seen[ixl_sm90_widen_perm(p)]++;
  for (int e = 0; e < 32; e++) CHECK(seen[e] == 1);
  for (int rep = 0; rep < 20; rep++) {
    for (int r = 0; r < 64; r++)
      for (int i = 0; i < 16; i++) raw[r][i] = (uint8_t)rand_u64();
    for (int c = 0; c < N; c++) {
      const int s = (int)(rand_u64() % 15) - 8;
      for (int e = 0; e < 32; e++) q[c][e] = e2m1_code(s);
      for (int p = 0; p < 32; p++) bq[c][p] = q[c][ixl_sm90_widen_perm(p)];
    }
    /* what each thread does: widen raw word l % 4 of rows r0 and r0 + 8 */
    for (int t = 0; t < 128; t++) {
      const int l = t & 31, qi = l & 3, r0 = 16 * (t >> 5) + (l >> 2);
      for (int h = 0; h < 2; h++) {
        const uint8_t *w8 = raw[r0 + 8 * h] + 4 * qi;
        const uint32_t w = (uint32_t)w8[0] | (uint32_t)w8[1] << 8 | (uint32_t)w8[2] << 16 |
                           (uint32_t)w8[3] << 24;
        ixl_sm90_e2m1x8_widen(w, &areg[t][h], &areg[t][h + 2]);
      }
    }
    /* the tensor core */
    for (int r = 0; r < 64; r++)
      for (int c = 0; c < N; c++) {
        double sum = 0;
        for (int p = 0; p < 32; p++) {
          int t, j, b;
          ixl_sm90_a8_owner(r, p, &t, &j, &b);
          const uint8_t a = (uint8_t)(areg[t][j] >> (8 * b));
          sum += (double)ixl_cvt_e4m3_to_f32(a) * (double)ixl_cvt_e4m3_to_f32(bq[c][p]);
        }
        d[r][c] = sum;
      }
    /* every thread's registers, through the accumulator map */
    for (int t = 0; t < 128; t++)
      for (int i = 0; i < N / 2; i++) {
        int r, c;
        ixl_sm90_acc_rc(t, i, &r, &c);
        double want = 0;
        for (int e = 0; e < 32; e++)
          want += (double)ixl_cvt_e2m1_to_f32((uint8_t)(raw[r][e / 2] >> (4 * (e & 1)))) *
                  (double)ixl_cvt_e4m3_to_f32(q[c][e]);
        CHECK_MSG(d[r][c] == ldexp(want, -6), "rep %d D[%d][%d] = %.17g, want %.17g", rep, r, c,
                  d[r][c], ldexp(want, -6));
        /* and the f32 accumulator holds it exactly: at most 13 significant bits */
        CHECK((double)(float)d[r][c] == d[r][c]);
      }
  }
}

/* ixl_v2mx_comb_factors: k0 = 2^(e0 - 127), r1 = 2^(e1 - e0), r2 = 2^(e2 - e0), r3 = 2^(e3 - e2)
 * exactly inside ixl_v2mx_comb_word's window (so k0 r1 = 2^(e1 - 127), k0 r2 r3 = 2^(e3 - 127));
 * the _or0 form is the same there and all 0 outside, returning the window test. */
static float f32_of(uint32_t b) {
  float f;
  memcpy(&f, &b, sizeof f);
  return f;
}
TEST(v2mx_comb_factors_are_the_powers_of_two) {
  rand_seed(RAND_SPLITMIX64, g_seed + 7);
  int inside = 0, outside = 0;
  for (int i = 0; i < 200000; i++) {
    uint32_t kw = (uint32_t)rand_u64();
    if (i % 2) /* half of them near 127, so both sides of the window's edge show */
      for (int g = 0; g < 4; g++)
        kw = (kw & ~(0xFFu << (8 * g))) |
             (uint32_t)(127 - IXL_V2MX_COMB_E - 2 + (int)rand_range(0, 2 * IXL_V2MX_COMB_E + 4))
                 << (8 * g);
    int e[4], in = 1;
    for (int g = 0; g < 4; g++) {
      e[g] = (int)((kw >> (8 * g)) & 0xFFu);
      in &= e[g] >= 127 - IXL_V2MX_COMB_E && e[g] <= 127 + IXL_V2MX_COMB_E;
    }
    uint32_t f[4], z[4];
    ixl_v2mx_comb_factors(kw, f);
    const int ok = ixl_v2mx_comb_factors_or0(kw, z);
    CHECK(ok == in && ok == ixl_v2mx_comb_word(kw));
    if (in) {
      inside++;
      CHECK_MSG(f32_of(f[0]) == ldexpf(1.0f, e[0] - 127) &&
                    f32_of(f[1]) == ldexpf(1.0f, e[1] - e[0]) &&
                    f32_of(f[2]) == ldexpf(1.0f, e[2] - e[0]) &&
                    f32_of(f[3]) == ldexpf(1.0f, e[3] - e[2]),
                "kw 0x%08x", kw);
      CHECK(memcmp(f, z, sizeof f) == 0);
    } else {
      outside++;
      CHECK(z[0] == 0 && z[1] == 0 && z[2] == 0 && z[3] == 0);
    }
  }
  CHECK(inside > 1000 && outside > 1000);
}

int main(void) {
  g_seed = test_seed();
  RUN(descriptor_bits);
  RUN(swizzle_is_an_involutive_bijection_per_period);
  RUN(tile_layouts_are_what_their_descriptors_address);
  RUN(accumulator_fragment_is_the_ptx_table);
  RUN(rs_a_fragment_is_the_ptx_table);
  RUN(widening_is_exact_for_every_code);
  RUN(emulated_rs_wgmma_q_permuted_times_k_widened_is_the_dot);
  RUN(v2mx_comb_factors_are_the_powers_of_two);
  DONE();
}
