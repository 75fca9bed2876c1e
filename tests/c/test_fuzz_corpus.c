/* test_fuzz_corpus.c - every libFuzzer harness (tests/fuzz/) replayed on its committed corpus,
 * tests/fuzz/corpus/<harness>/, in every `make test`: the seeds, and each input that once
 * crashed (regress-*), so a fixed crash stays fixed. The harnesses abort on a broken
 * invariant; under `make test SANITIZE=1` ASan and UBSan watch them too. The crashes found by
 * fuzzing also get a plain test here that names the function that was at fault. */
#include <dirent.h>

#include "check.h"

/* Each harness defines LLVMFuzzerTestOneInput: give each its own name. */
#define LLVMFuzzerTestOneInput fuzz_safetensors_one
#include "../fuzz/fuzz_safetensors.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_config_one
#include "../fuzz/fuzz_config.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_expand_one
#include "../fuzz/fuzz_expand.c"
#undef LLVMFuzzerTestOneInput

static const char *root_dir(void) {
  const char *r = getenv("IDXLAB_ROOT");
  return r && r[0] ? r : ".";
}

/* Runs every file of tests/fuzz/corpus/<name>/ through fn; returns how many ran. */
static int replay(const char *name, int (*fn)(const uint8_t *, size_t)) {
  char dir[512], path[1024];
  snprintf(dir, sizeof dir, "%s/tests/fuzz/corpus/%s", root_dir(), name);
  DIR *d = opendir(dir);
  CHECK_MSG(d != NULL, "cannot open %s", dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    uint8_t *buf = malloc(1 << 16);
    size_t len = fread(buf, 1, 1 << 16, f);
    fclose(f);
    /* an exact-size copy, so ASan sees any read past the input */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    free(buf);
    fn(exact, len);
    free(exact);
    n++;
  }
  closedir(d);
  return n;
}

TEST(safetensors_corpus) {
  CHECK(replay("fuzz_safetensors", fuzz_safetensors_one) >= 5);
}
TEST(config_corpus) {
  CHECK(replay("fuzz_config", fuzz_config_one) >= 3);
}
TEST(expand_corpus) {
  CHECK(replay("fuzz_expand", fuzz_expand_one) >= 3);
}

/* Found by fuzz_config: core/builder.c check_pages() computed `t->data + row * max_pages` on
 * an empty block table (data NULL, max_pages 0) when a request needs 0 pages (fewer tokens than
 * compress_ratio): pointer arithmetic on NULL, undefined behaviour (UBSan: "applying zero
 * offset to null pointer"). Fails only under SANITIZE=1. */
TEST(builder_empty_block_table_for_a_zero_page_request) {
  ixl_ctx *ctx = NULL;
  CHECK_OK(ctx, ixl_ctx_new(IXL_BACKEND_CPU, 0, 1, &ctx));
  ixl_config cfg;
  ixl_config_defaults(&cfg);
  cfg.max_rows = 16;
  cfg.max_model_len = 4096;
  cfg.compress_ratio = 4;
  ixl_builder *b = NULL;
  CHECK_OK(ctx, ixl_builder_new(ctx, &cfg, &b));
  int64_t shape[2] = {1, 0}, q = 1, L = 0;
  ixl_tensor *table = NULL;
  CHECK_OK(ctx, ixl_tensor_new(ctx, IXL_I32, 2, shape, IXL_HOST, &table));
  ixl_batch batch;
  memset(&batch, 0, sizeof batch);
  batch.n_prefill = 1;
  batch.prefill_query_lens = &q;
  batch.prefill_context_lens = &L;
  batch.prefill_block_table = table;
  ixl_step step;
  CHECK_OK(ctx, ixl_builder_build(b, &batch, 1, &step));
  CHECK(step.n_rows == 1);
  batch.n_prefill = 0;
  batch.prefill_block_table = NULL;
  int64_t dl = 3; /* a decode request of 3 tokens: 0 positions at compress_ratio 4 */
  batch.n_decode = 1;
  batch.decode_context_lens = &dl;
  batch.decode_block_table = table;
  CHECK_OK(ctx, ixl_builder_build(b, &batch, 0, &step));
  ixl_tensor_free(table);
  ixl_builder_free(b);
  ixl_ctx_free(ctx);
}

int main(void) {
  RUN(safetensors_corpus);
  RUN(config_corpus);
  RUN(expand_corpus);
  RUN(builder_empty_block_table_for_a_zero_page_request);
  DONE();
}
