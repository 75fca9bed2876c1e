/* fuzz_safetensors.c - libFuzzer harness for the safetensors reader (ixl_st_parse): any bytes
 * must give a file whose entries are consistent, or a clean IXL_ERR_FORMAT; never a crash, a
 * read out of bounds or leaked counted memory. */
#include "fuzz_input.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ixl_ctx *ctx = fz_ctx();
  const int64_t live0 = fz_live_bytes(ctx);
  ixl_st_file *f = NULL;
  ixl_status st = ixl_st_parse(ctx, data, size, &f);
  if (st != IXL_OK) {
    fz_check_error(ctx, st, "ixl_st_parse");
    FZ_REQUIRE(st == IXL_ERR_FORMAT || st == IXL_ERR_OOM, "status %s: %s", ixl_status_name(st),
               ixl_last_error(ctx));
    FZ_REQUIRE(f == NULL, "a failed parse returned a file");
  } else {
    int64_t total = 0;
    uint32_t sum = 0;
    for (int32_t i = 0; i < ixl_st_count(f); i++) {
      ixl_st_entry e;
      FZ_REQUIRE(ixl_st_entry_at(f, i, &e) == IXL_OK, "entry %d", i);
      FZ_REQUIRE(e.ndim >= 0 && e.ndim <= 8, "ndim %d", e.ndim);
      int64_t numel = 1;
      for (int d = 0; d < e.ndim; d++) numel *= e.shape[d];
      FZ_REQUIRE(numel * (int64_t)ixl_dtype_size((ixl_dtype)e.dtype) == e.nbytes,
                 "entry %s: size mismatch", e.name);
      FZ_REQUIRE(ixl_st_find(f, e.name) == i, "entry %s is not found under its own name", e.name);
      const uint8_t *p = ixl_st_data(f, i);
      FZ_REQUIRE(e.nbytes == 0 || p != NULL, "entry %s has no data", e.name);
      FZ_REQUIRE(e.nbytes == 0 || (uintptr_t)p % ixl_dtype_size((ixl_dtype)e.dtype) == 0,
                 "entry %s is misaligned", e.name);
      for (int64_t b = 0; b < e.nbytes; b++) sum += p[b]; /* ASan checks every byte is ours */
      total += e.nbytes;
    }
    /* the tensors tile the data that followed the header */
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; k--) hlen = (hlen << 8) | data[k];
    FZ_REQUIRE((uint64_t)total == size - 8 - hlen, "tensors hold %lld bytes of %llu",
               (long long)total, (unsigned long long)(size - 8 - hlen));
    for (int32_t i = 0; i < ixl_st_metadata_count(f); i++) {
      const char *k = ixl_st_metadata_key(f, i);
      FZ_REQUIRE(k && ixl_st_metadata(f, k) != NULL, "metadata %d", i);
    }
    ixl_st_close(f);
    (void)sum;
  }
  FZ_REQUIRE(fz_live_bytes(ctx) == live0, "counted host memory leaked: %lld bytes",
             (long long)(fz_live_bytes(ctx) - live0));
  return 0;
}
