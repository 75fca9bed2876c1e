/* test_safetensors.c - the safetensors reader and writer: round trips of every dtype, a file
 * written by Python (tests/fixtures/, made by scripts/make_st_fixture.py), atomic saves, and
 * one test per malformed-file error, each checking the message. */
#include <dirent.h>
#include <time.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "rand.h"

static char tmpdir[64];
static void make_tmpdir(void) {
  if (tmpdir[0]) return;
  snprintf(tmpdir, sizeof tmpdir, "/tmp/idxlab-st-XXXXXX");
  if (!mkdtemp(tmpdir)) {
    perror("mkdtemp");
    exit(1);
  }
}
static void remove_tmpdir(void) {
  if (!tmpdir[0]) return;
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  char p[512];
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
    unlink(p);
  }
  if (d) closedir(d);
  rmdir(tmpdir);
}
static int count_files(void) {
  DIR *d = opendir(tmpdir);
  struct dirent *e;
  int n = 0;
  while (d && (e = readdir(d))) n += e->d_name[0] != '.';
  if (d) closedir(d);
  return n;
}

/* A file from header text and data bytes: 8-byte length, header, data. Caller frees. */
static uint8_t *mk(const char *hdr, const void *data, size_t dlen, size_t *len) {
  size_t h = strlen(hdr);
  uint8_t *b = malloc(8 + h + dlen + 1);
  for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(b + 8, hdr, h);
  if (dlen) memcpy(b + 8 + h, data, dlen);
  *len = 8 + h + dlen;
  return b;
}

/* Parses header + data; returns the status and leaves the message in ctx. */
static ixl_status parse(ixl_ctx *ctx, const char *hdr, size_t dlen) {
  uint8_t zeros[256] = {0};
  size_t len;
  uint8_t *b = mk(hdr, zeros, dlen, &len);
  ixl_st_file *f = NULL;
  ixl_status st = ixl_st_parse(ctx, b, len, &f);
  CHECK(st == IXL_OK ? f != NULL : f == NULL);
  ixl_st_close(f);
  free(b);
  return st;
}

#define BAD(hdr, dlen, needle) CHECK_ERR(ctx, parse(ctx, hdr, dlen), IXL_ERR_FORMAT, needle)

TEST(round_trip_every_dtype_and_metadata) {
  make_tmpdir();
  ixl_ctx *ctx = test_ctx(0);
  ixl_alloc_stats s0;
  ixl_ctx_alloc_stats(ctx, &s0);
  const uint64_t seed = rand_u64();
  rand_seed(RAND_SPLITMIX64, seed);
  struct {
    const char *name;
    ixl_dtype dt;
    int ndim;
    int64_t shape[8];
  } spec[] = {
      {"q", IXL_F32, 3, {3, 4, 5}},
      {"k.bf16", IXL_BF16, 2, {7, 3}},
      {"odd_f16", IXL_F16, 1, {5}},
      {"codes", IXL_U8, 2, {3, 3}},
      {"e4m3", IXL_E4M3, 1, {9}},
      {"ks", IXL_I32, 1, {6}},
      {"scalar", IXL_F32, 0, {0}},
      {"empty", IXL_I32, 2, {0, 7}},
      {"eight_dims", IXL_U8, 8, {1, 2, 1, 2, 1, 2, 1, 3}},
      {"step0/q \"quoted\"\ttab \xc3\xa9", IXL_BF16, 1, {3}},
  };
  const int n = (int)(sizeof spec / sizeof spec[0]);
  uint8_t *payload[16];
  int64_t nbytes[16];
  ixl_st_file *w = NULL;
  CHECK_OK(ctx, ixl_st_writer_new(ctx, &w));
  for (int i = 0; i < n; i++) {
    int64_t numel = 1;
    for (int d = 0; d < spec[i].ndim; d++) numel *= spec[i].shape[d];
    nbytes[i] = numel * (int64_t)ixl_dtype_size(spec[i].dt);
    payload[i] = malloc((size_t)nbytes[i] + 1);
    rand_bytes(payload[i], nbytes[i]);
    CHECK_OK(ctx, ixl_st_writer_add(w, spec[i].name, spec[i].dt, spec[i].ndim, spec[i].shape,
                                    payload[i], nbytes[i]));
  }
  /* the writer copied the data: scribbling on the caller's buffer changes nothing */
  uint8_t first = payload[0][0];
  payload[0][0] ^= 0xff;
  CHECK_OK(ctx, ixl_st_writer_set_metadata(w, "config", "{\"heads\": 32, \"note\": \"\\n\"}"));
  CHECK_OK(ctx, ixl_st_writer_set_metadata(w, "format", "pt"));
  CHECK_OK(ctx, ixl_st_writer_set_metadata(w, "format", "idxlab")); /* replaces */
  CHECK_OK(ctx, ixl_st_writer_set_metadata(w, "ctl\x01", "line\nbreak \xe2\x9c\x93"));
  payload[0][0] = first;
  char path[256];
  snprintf(path, sizeof path, "%s/round.safetensors", tmpdir);
  CHECK_OK(ctx, ixl_st_writer_save(w, path));
  ixl_st_close(w);

  /* the header is padded with spaces so the data start at a multiple of 8 */
  FILE *fp = fopen(path, "rb");
  uint8_t len8[8] = {0};
  CHECK(fp && fread(len8, 1, 8, fp) == 8);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
  CHECK_MSG((8 + hlen) % 8 == 0, "header length %llu", (unsigned long long)hlen);
  char *hdr = calloc(1, hlen + 1);
  CHECK(fread(hdr, 1, hlen, fp) == hlen);
  CHECK(hdr[hlen - 1] == '}' || hdr[hlen - 1] == ' ');
  if (fp) fclose(fp);
  free(hdr);

  ixl_st_file *f = NULL;
  CHECK_OK(ctx, ixl_st_open(ctx, path, &f));
  CHECK(ixl_st_count(f) == n);
  for (int i = 0; i < n; i++) {
    int32_t k = ixl_st_find(f, spec[i].name);
    CHECK_MSG(k >= 0, "seed %llu: tensor %s not found", (unsigned long long)seed, spec[i].name);
    if (k < 0) continue;
    ixl_st_entry e;
    CHECK_OK(ctx, ixl_st_entry_at(f, k, &e));
    CHECK(strcmp(e.name, spec[i].name) == 0);
    CHECK_MSG(e.dtype == (int32_t)spec[i].dt, "%s: dtype %d", spec[i].name, e.dtype);
    CHECK(e.ndim == spec[i].ndim && e.nbytes == nbytes[i]);
    for (int d = 0; d < e.ndim; d++) CHECK(e.shape[d] == spec[i].shape[d]);
    const void *data = ixl_st_data(f, k);
    if (nbytes[i]) {
      CHECK_MSG(data && memcmp(data, payload[i], (size_t)nbytes[i]) == 0,
                "seed %llu: tensor %s data differ", (unsigned long long)seed, spec[i].name);
      CHECK(((uintptr_t)data % ixl_dtype_size(spec[i].dt)) == 0);
    }
  }
  CHECK(ixl_st_find(f, "nope") == -1 && ixl_st_data(f, n) == NULL && ixl_st_data(f, -1) == NULL);
  ixl_st_entry e;
  CHECK_ERR(ctx, ixl_st_entry_at(f, n, &e), IXL_ERR_INVALID_ARG,
            "index 10: the file has 10 tensors");
  CHECK(ixl_st_metadata_count(f) == 3);
  CHECK(ixl_st_metadata(f, "format") && strcmp(ixl_st_metadata(f, "format"), "idxlab") == 0);
  CHECK(ixl_st_metadata(f, "config") &&
        strcmp(ixl_st_metadata(f, "config"), "{\"heads\": 32, \"note\": \"\\n\"}") == 0);
  CHECK(ixl_st_metadata(f, "ctl\x01") &&
        strcmp(ixl_st_metadata(f, "ctl\x01"), "line\nbreak \xe2\x9c\x93") == 0);
  CHECK(ixl_st_metadata(f, "absent") == NULL && ixl_st_metadata_key(f, 3) == NULL);
  CHECK(strcmp(ixl_st_metadata_key(f, 0), "config") == 0);
  ixl_st_close(f);
  for (int i = 0; i < n; i++) free(payload[i]);
  ixl_alloc_stats s1;
  ixl_ctx_alloc_stats(ctx, &s1);
  CHECK_MSG(s1.host_bytes_live == s0.host_bytes_live, "host bytes live %lld, was %lld",
            (long long)s1.host_bytes_live, (long long)s0.host_bytes_live);
  ixl_ctx_free(ctx);
}

static const char *root_dir(void) {
  const char *r = getenv("IDXLAB_ROOT");
  return r && r[0] ? r : ".";
}

/* The fixture's values are restated here from scripts/make_st_fixture.py. */
TEST(reads_a_file_written_by_python) {
  ixl_ctx *ctx = test_ctx(0);
  char path[512];
  snprintf(path, sizeof path, "%s/tests/fixtures/python_written.safetensors", root_dir());
  ixl_st_file *f = NULL;
  CHECK_OK(ctx, ixl_st_open(ctx, path, &f));
  if (!f) {
    ixl_ctx_free(ctx);
    return;
  }
  CHECK(ixl_st_count(f) == 8);
  const char *head_name =
      "h\xc3\xa9"
      "ad/\xf0\x9f\x98\x80"; /* \xa9 then "ad": split literal */
  const char *order[8] = {"bytes.u8", "weights", head_name, "ks",
                          "f16",      "codes",   "empty",   "scalar"};
  for (int i = 0; i < 8; i++) {
    ixl_st_entry e;
    CHECK_OK(ctx, ixl_st_entry_at(f, i, &e));
    CHECK_MSG(strcmp(e.name, order[i]) == 0, "entry %d is %s", i, e.name);
  }
  const uint8_t *u8 = ixl_st_data(f, 0);
  CHECK(u8 && u8[0] == 0 && u8[1] == 1 && u8[2] == 127 && u8[3] == 200 && u8[4] == 255);
  ixl_st_entry e;
  CHECK_OK(ctx, ixl_st_entry_at(f, 1, &e));
  CHECK(e.dtype == IXL_F32 && e.ndim == 2 && e.shape[0] == 2 && e.shape[1] == 3 && e.nbytes == 24);
  const float *w = ixl_st_data(f, 1); /* at file data offset 5: an aligned copy */
  CHECK(w && ((uintptr_t)w % 4) == 0);
  const float wref[6] = {1.5f, -2.25f, 3.0f, 0.0f, 1e-3f, -65504.0f};
  for (int i = 0; w && i < 6; i++) CHECK_MSG(w[i] == wref[i], "weights[%d] = %g", i, w[i]);
  const uint16_t *bf = ixl_st_data(f, 2);
  const float bref[4] = {1.0f, -2.5f, 0.5f, 384.0f};
  for (int i = 0; bf && i < 4; i++) CHECK(ixl_bf16_to_f32(bf[i]) == bref[i]);
  const int32_t *ks = ixl_st_data(f, ixl_st_find(f, "ks"));
  CHECK(ks && ks[0] == -7 && ks[1] == 0 && ks[2] == 2147483647);
  const uint16_t *h = ixl_st_data(f, ixl_st_find(f, "f16"));
  CHECK(h && ixl_f16_to_f32(h[0]) == 0.5f && ixl_f16_to_f32(h[1]) == -1.0f &&
        ixl_f16_to_f32(h[2]) == 65504.0f && ixl_f16_to_f32(h[3]) == 0x1p-14f);
  int32_t c = ixl_st_find(f, "codes");
  CHECK_OK(ctx, ixl_st_entry_at(f, c, &e));
  CHECK(e.dtype == IXL_E4M3);
  const uint8_t *codes = ixl_st_data(f, c);
  CHECK(codes && ixl_e4m3_to_f32(codes[0]) == 1.0f && ixl_e4m3_to_f32(codes[1]) == -1.0f &&
        ixl_e4m3_to_f32(codes[2]) == 448.0f);
  CHECK_OK(ctx, ixl_st_entry_at(f, ixl_st_find(f, "empty"), &e));
  CHECK(e.ndim == 2 && e.shape[0] == 0 && e.shape[1] == 4 && e.nbytes == 0);
  CHECK_OK(ctx, ixl_st_entry_at(f, ixl_st_find(f, "scalar"), &e));
  const int32_t *sc = ixl_st_data(f, ixl_st_find(f, "scalar"));
  CHECK(e.ndim == 0 && e.nbytes == 4 && sc && *sc == 42);
  CHECK(ixl_st_metadata(f, "format") && strcmp(ixl_st_metadata(f, "format"), "pt") == 0);
  const char *note = ixl_st_metadata(f, "note");
  CHECK_MSG(note && strcmp(note, "caf\xc3\xa9 \xe2\x9c\x93 \"quoted\"\n") == 0, "note = %s", note);
  ixl_st_close(f);

  /* the same bytes from memory give the same file */
  FILE *fp = fopen(path, "rb");
  uint8_t buf[2048];
  size_t len = fp ? fread(buf, 1, sizeof buf, fp) : 0;
  if (fp) fclose(fp);
  CHECK(len == 8 + 638 + 64);
  CHECK_OK(ctx, ixl_st_parse(ctx, buf, len, &f));
  CHECK(ixl_st_count(f) == 8 && ixl_st_metadata_count(f) == 2);
  ixl_st_close(f);
  ixl_ctx_free(ctx);
}

TEST(save_is_atomic_and_replaces) {
  make_tmpdir();
  ixl_ctx *ctx = test_ctx(0);
  char path[256];
  snprintf(path, sizeof path, "%s/atomic.safetensors", tmpdir);
  int before = count_files();
  for (int round = 0; round < 2; round++) {
    ixl_st_file *w = NULL;
    CHECK_OK(ctx, ixl_st_writer_new(ctx, &w));
    int32_t v[3] = {round, round + 1, round + 2};
    int64_t shp = 3;
    CHECK_OK(ctx, ixl_st_writer_add(w, "v", IXL_I32, 1, &shp, v, sizeof v));
    CHECK_OK(ctx, ixl_st_writer_save(w, path));
    ixl_st_close(w);
    ixl_st_file *f = NULL;
    CHECK_OK(ctx, ixl_st_open(ctx, path, &f));
    const int32_t *r = ixl_st_data(f, 0);
    CHECK_MSG(r && r[0] == round && r[2] == round + 2, "round %d", round);
    ixl_st_close(f);
  }
  CHECK_MSG(count_files() == before + 1, "%d files, expected %d (a temporary file left behind?)",
            count_files(), before + 1);
  /* an empty writer makes a valid empty file */
  ixl_st_file *w = NULL, *f = NULL;
  CHECK_OK(ctx, ixl_st_writer_new(ctx, &w));
  CHECK_OK(ctx, ixl_st_writer_save(w, path));
  ixl_st_close(w);
  CHECK_OK(ctx, ixl_st_open(ctx, path, &f));
  CHECK(ixl_st_count(f) == 0 && ixl_st_metadata_count(f) == 0);
  ixl_st_close(f);
  /* failures are I/O errors naming the path */
  CHECK_OK(ctx, ixl_st_writer_new(ctx, &w));
  CHECK_ERR(ctx, ixl_st_writer_save(w, "/nonexistent-dir/x.safetensors"), IXL_ERR_IO,
            "/nonexistent-dir/x.safetensors: cannot create");
  CHECK_ERR(ctx, ixl_st_writer_save(w, ""), IXL_ERR_INVALID_ARG, "path is empty");
  ixl_st_close(w);
  CHECK_ERR(ctx, ixl_st_open(ctx, "/nonexistent-dir/x.safetensors", &f), IXL_ERR_IO,
            "/nonexistent-dir/x.safetensors: cannot open: No such file or directory");
  CHECK(f == NULL);
  CHECK_ERR(ctx, ixl_st_open(ctx, tmpdir, &f), IXL_ERR_IO, "not a regular file");
  ixl_ctx_free(ctx);
}

TEST(writer_argument_errors) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_st_file *w = NULL;
  CHECK_OK(ctx, ixl_st_writer_new(ctx, &w));
  float data[6] = {1, 2, 3, 4, 5, 6};
  int64_t shp[9] = {2, 3, 1, 1, 1, 1, 1, 1, 1}, neg[2] = {2, -3};
  CHECK_ERR(ctx, ixl_st_writer_add(w, "x", IXL_E2M1X2, 2, shp, data, 6), IXL_ERR_DTYPE,
            "tensor 'x': dtype e2m1x2 has no safetensors dtype");
  CHECK_ERR(ctx, ixl_st_writer_add(w, "x", IXL_F32, 2, shp, data, 20), IXL_ERR_SHAPE,
            "tensor 'x': nbytes = 20, but shape [2, 3] of f32 needs 24");
  CHECK_ERR(ctx, ixl_st_writer_add(w, "x", IXL_F32, 2, neg, data, 24), IXL_ERR_SHAPE,
            "tensor 'x': shape[1] = -3: must be >= 0");
  CHECK_ERR(ctx, ixl_st_writer_add(w, "x", IXL_F32, 9, shp, data, 24), IXL_ERR_SHAPE,
            "ndim = 9: must be in [0, 8]");
  CHECK_ERR(ctx, ixl_st_writer_add(w, "x", IXL_F32, 2, shp, NULL, 24), IXL_ERR_INVALID_ARG,
            "tensor 'x': data is NULL");
  CHECK_ERR(ctx, ixl_st_writer_add(w, "__metadata__", IXL_F32, 2, shp, data, 24),
            IXL_ERR_INVALID_ARG, "'__metadata__' is reserved");
  CHECK_ERR(ctx, ixl_st_writer_add(w, "bad\xff", IXL_F32, 2, shp, data, 24), IXL_ERR_INVALID_ARG,
            "the tensor name is not valid UTF-8 (byte 3)");
  CHECK_OK(ctx, ixl_st_writer_add(w, "x", IXL_F32, 2, shp, data, 24));
  CHECK_ERR(ctx, ixl_st_writer_add(w, "x", IXL_F32, 2, shp, data, 24), IXL_ERR_INVALID_ARG,
            "tensor 'x' added twice");
  CHECK_ERR(ctx, ixl_st_writer_set_metadata(w, "k", NULL), IXL_ERR_INVALID_ARG, "value is NULL");
  CHECK_ERR(ctx, ixl_st_writer_set_metadata(w, "k", "\xc3"), IXL_ERR_INVALID_ARG,
            "the value is not valid UTF-8");
  int64_t huge[2] = {INT64_MAX / 2, 4};
  CHECK_ERR(ctx, ixl_st_writer_add(w, "y", IXL_F32, 2, huge, data, 24), IXL_ERR_OVERFLOW,
            "tensor 'y': shape overflows int64");
  ixl_st_close(w);
  /* a reader is not a writer */
  size_t len;
  uint8_t *b = mk("{}", NULL, 0, &len);
  ixl_st_file *f = NULL;
  CHECK_OK(ctx, ixl_st_parse(ctx, b, len, &f));
  CHECK_ERR(ctx, ixl_st_writer_add(f, "x", IXL_F32, 2, shp, data, 24), IXL_ERR_INVALID_ARG,
            "opened for reading");
  CHECK_ERR(ctx, ixl_st_writer_save(f, "/tmp/x"), IXL_ERR_INVALID_ARG, "opened for reading");
  CHECK_ERR(ctx, ixl_st_writer_set_metadata(f, "k", "v"), IXL_ERR_INVALID_ARG,
            "opened for reading");
  ixl_st_close(f);
  free(b);
  /* NULL handles are refused or ignored, never crash */
  ixl_st_close(NULL);
  CHECK(ixl_st_count(NULL) == 0 && ixl_st_find(NULL, "x") == -1 && ixl_st_data(NULL, 0) == NULL);
  CHECK(ixl_st_metadata(NULL, "x") == NULL && ixl_st_metadata_key(NULL, 0) == NULL);
  CHECK(ixl_st_writer_add(NULL, "x", IXL_F32, 0, NULL, data, 4) == IXL_ERR_INVALID_ARG);
  CHECK(ixl_st_parse(ctx, NULL, 0, NULL) == IXL_ERR_INVALID_ARG);
  ixl_ctx_free(ctx);
}

/* The file keeps its context alive: freeing the context first is safe. */
TEST(file_outlives_its_context) {
  ixl_ctx *ctx = test_ctx(0);
  size_t len;
  float v[2] = {1.25f, -8.0f};
  uint8_t *b = mk("{\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", v, 8, &len);
  ixl_st_file *f = NULL;
  CHECK_OK(ctx, ixl_st_parse(ctx, b, len, &f));
  ixl_ctx_free(ctx);
  const float *d = ixl_st_data(f, 0);
  CHECK(d && d[0] == 1.25f && d[1] == -8.0f);
  ixl_st_close(f); /* frees the context too */
  free(b);
}

TEST(bad_header_length) {
  ixl_ctx *ctx = test_ctx(0);
  ixl_st_file *f = NULL;
  uint8_t b[16] = {5, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
  CHECK_ERR(ctx, ixl_st_parse(ctx, b, 5, &f), IXL_ERR_FORMAT,
            "the file is 5 bytes: too short for the 8-byte header length");
  CHECK_ERR(ctx, ixl_st_parse(ctx, b, 10, &f), IXL_ERR_FORMAT,
            "header length 5 is larger than the rest of the file (2 bytes)");
  uint8_t big[16] = {0, 0, 0, 0, 0, 1, 0, 0, '{', '}'}; /* 2^40 */
  CHECK_ERR(ctx, ixl_st_parse(ctx, big, 10, &f), IXL_ERR_FORMAT,
            "header length 1099511627776 is absurd");
  uint8_t zero[8] = {0};
  CHECK_ERR(ctx, ixl_st_parse(ctx, zero, 8, &f), IXL_ERR_FORMAT,
            "bad JSON at header byte 0 (file byte 8): unexpected end of header");
  CHECK(f == NULL);
  /* the same rules through a file on disk */
  make_tmpdir();
  char path[256];
  snprintf(path, sizeof path, "%s/short.safetensors", tmpdir);
  FILE *fp = fopen(path, "wb");
  if (fp) {
    fwrite(b, 1, 10, fp);
    fclose(fp);
  }
  CHECK_ERR(ctx, ixl_st_open(ctx, path, &f), IXL_ERR_FORMAT,
            "short.safetensors: header length 5 is larger");
  ixl_ctx_free(ctx);
}

TEST(bad_json_names_the_byte) {
  ixl_ctx *ctx = test_ctx(0);
  BAD("{\"a\" {}}", 0, "bad JSON at header byte 5 (file byte 13): expected ':' after a key");
  BAD("{} x", 0, "bad JSON at header byte 3 (file byte 11): unexpected data after the header");
  BAD("{\"a\": {\"dtype\": \"F32}}", 0, "header byte 16 (file byte 24): unterminated string");
  BAD("{\"a\\q\": 1}", 0, "header byte 3 (file byte 11): bad escape in a string");
  BAD("{\"\\u12G4\": 1}", 0, "header byte 2 (file byte 10): bad \\u escape: expected 4 hex digits");
  BAD("{\"\\ud800x\": 1}", 0, "a high surrogate without a low one");
  BAD("{\"\\udc00\": 1}", 0, "a low surrogate without a high one");
  BAD("{\"a\tb\": 1}", 0, "header byte 3 (file byte 11): control character inside a string");
  BAD("{\"a\xff\": 1}", 0, "header is not valid UTF-8 at header byte 3 (file byte 11)");
  BAD("{\"a\xed\xa0\x80\": 1}", 0, "header is not valid UTF-8"); /* an encoded surrogate */
  BAD("{\"a\": 01}", 0, "header byte 6 (file byte 14): bad number: leading zero");
  BAD("{\"a\": 1.}", 0, "digits must follow '.'");
  BAD("{\"a\": tru}", 0, "header byte 6 (file byte 14): unexpected character, expected a value");
  BAD("{\"a\": [1, 2}", 0, "header byte 11 (file byte 19): expected ',' or ']'");
  BAD("{\"a\": 1,}", 0, "header byte 8 (file byte 16): expected a string key");
  BAD("{\"a\": {", 0, "unexpected end of header inside an object");
  char deep[512];
  strcpy(deep, "{\"__metadata__\": ");
  for (int i = 0; i < 100; i++) strcat(deep, "[");
  BAD(deep, 0, "nested too deeply");
  BAD("[1]", 0, "the header is an array, expected a JSON object");
  BAD("{\"a\": 1e}", 0,
      "header byte 6 (file byte 14): bad number: digits must follow the exponent");
  BAD("{\"a\": {} ]", 0, "header byte 9 (file byte 17): expected ',' or '}'");
  BAD("{\"a\": [1, ", 0, "unexpected end of header, expected a value");
  BAD("{\"a\": [1", 0, "unexpected end of header inside an array");
  BAD("{\"a\": \"x\\", 0, "header byte 6 (file byte 14): unterminated string");
  BAD("  {}  x", 0, "unexpected data after the header's JSON object");
  CHECK_OK(ctx, parse(ctx, "  {}   ", 0)); /* whitespace around the object is fine */
  ixl_ctx_free(ctx);
}

TEST(bad_entries) {
  ixl_ctx *ctx = test_ctx(0);
  BAD("{\"a\": 5}", 0, "tensor 'a' (header byte 6): the entry is an integer, expected an object");
  BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4], \"extra\": 1}}", 4,
      "tensor 'a': unknown field 'extra' at header byte 61");
  BAD("{\"a\": {\"dtype\": \"F32\", \"shape\": [1]}}", 4,
      "tensor 'a' (header byte 6): missing field data_offsets");
  BAD("{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}",
      4, "tensor 'a': field dtype given twice");
  BAD("{\"a\": {\"dtype\": 3, \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      "tensor 'a': dtype is an integer, expected a string");
  BAD("{\"a\\u0000b\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      "a tensor name at header byte 1 contains a NUL character");
  BAD("{\"__metadata__\": 5}", 0, "__metadata__ is an integer, expected an object of strings");
  BAD("{\"__metadata__\": {\"k\": 5}}", 0,
      "__metadata__ value of 'k' is an integer: values must be strings");
  BAD("{\"__metadata__\": {\"k\": \"a\", \"k\": \"b\"}}", 0, "__metadata__ key 'k' given twice");
  BAD("{\"__metadata__\": {}, \"__metadata__\": {}}", 0, "__metadata__ given twice");
  BAD("{\"__metadata__\": {\"k\\u0000\": \"a\"}}", 0,
      "a __metadata__ key at header byte 18 contains a NUL");
  BAD("{\"__metadata__\": {\"k\": \"a\\u0000\"}}", 0,
      "a __metadata__ value at header byte 23 contains a NUL");
  ixl_ctx_free(ctx);
}

TEST(bad_dtypes) {
  ixl_ctx *ctx = test_ctx(0);
  BAD("{\"w\": {\"dtype\": \"F64\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8,
      "tensor 'w': dtype F64 is not supported (idxlab reads F32, F16, BF16, I32, U8, F8_E4M3)");
  BAD("{\"w\": {\"dtype\": \"I64\", \"shape\": [1], \"data_offsets\": [0, 8]}}", 8,
      "tensor 'w': dtype I64 is not supported");
  BAD("{\"w\": {\"dtype\": \"F33\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      "tensor 'w': unknown dtype 'F33'");
  BAD("{\"w\": {\"dtype\": \"F32\\u0000\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4,
      "tensor 'w': unknown dtype 'F32'");
  ixl_ctx_free(ctx);
}

TEST(bad_shapes_and_sizes) {
  ixl_ctx *ctx = test_ctx(0);
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [2, 3], \"data_offsets\": [0, 20]}}", 20,
      "tensor 'x': shape [2, 3] of F32 needs 24 bytes, but data_offsets [0, 20] hold 20");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [2, -3], \"data_offsets\": [0, 24]}}", 24,
      "tensor 'x': shape[1] (header byte 36) is negative, expected an integer >= 0");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [2.5], \"data_offsets\": [0, 24]}}", 24,
      "tensor 'x': shape[0] (header byte 33) is a number 2.5, expected an integer >= 0");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [99999999999999999999], \"data_offsets\": [0, 24]}}",
      24, "is a number 99999999999999999999");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": 6, \"data_offsets\": [0, 24]}}", 24,
      "tensor 'x': shape is an integer, expected an array");
  BAD("{\"x\": {\"dtype\": \"U8\", \"shape\": [1,1,1,1,1,1,1,1,1], \"data_offsets\": [0, 1]}}", 1,
      "tensor 'x': shape has 9 dims, at most 8 are supported");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [4611686018427387904, 4], \"data_offsets\": [0, "
      "16]}}",
      16, "tensor 'x': shape [4611686018427387904, 4] is too large (its size overflows int64)");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [1073741824, 4611686018427387904], "
      "\"data_offsets\": [0, 16]}}",
      16, "is too large");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [2305843009213693952], \"data_offsets\": [0, 16]}}",
      16, "tensor 'x': shape [2305843009213693952] is too large");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0]}}", 4,
      "tensor 'x': data_offsets (header byte 53) must be an array [begin, end]");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [-4, 0]}}", 4,
      "data_offsets (header byte 53) must be two integers >= 0");
  BAD("{\"x\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [8, 4]}}", 8,
      "tensor 'x': data_offsets [8, 4]: begin is past end");
  ixl_ctx_free(ctx);
}

TEST(bad_offsets_overlap_gap_truncation) {
  ixl_ctx *ctx = test_ctx(0);
  const char *two =
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [6], \"data_offsets\": [0, 24]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [6], \"data_offsets\": [16, 40]}}";
  BAD(two, 40, "tensors 'a' (data_offsets [0, 24]) and 'b' ([16, 40]) overlap");
  const char *gap =
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]},"
      " \"b\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [16, 24]}}";
  BAD(gap, 24, "no tensor covers data bytes [8, 16) before 'b'");
  const char *late = "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}";
  BAD(late, 12, "no tensor covers data bytes [0, 4) before 'a'");
  const char *one = "{\"a\": {\"dtype\": \"F32\", \"shape\": [4], \"data_offsets\": [0, 16]}}";
  BAD(one, 12,
      "tensor 'a': data_offsets [0, 16] run past the end of the data buffer (12 bytes "
      "follow the header): the file is truncated");
  BAD(one, 20, "4 bytes of trailing data after the last tensor ('a' ends at data byte 16 of 20)");
  CHECK_OK(ctx, parse(ctx, one, 16));
  const char *far =
      "{\"a\": {\"dtype\": \"U8\", \"shape\": [1099511627776], \"data_offsets\": [0, "
      "1099511627776]}}";
  BAD(far, 16, "run past the end of the data buffer (16 bytes follow the header)");
  BAD("{}", 3, "3 bytes of trailing data after a header that lists no tensors");
  const char *dup =
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]},"
      " \"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [4, 8]}}";
  BAD(dup, 8, "duplicate tensor name 'a' (header bytes 1 and 62)");
  /* zero-size tensors sit at the running offset, like any other */
  const char *zero =
      "{\"z\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [4, 4]},"
      " \"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
  BAD(zero, 8, "tensors 'a' (data_offsets [0, 8]) and 'z' ([4, 4]) overlap");

  /* a real file cut short on disk: the message says truncated */
  make_tmpdir();
  char path[256];
  snprintf(path, sizeof path, "%s/cut.safetensors", tmpdir);
  ixl_st_file *w = NULL, *f = NULL;
  CHECK_OK(ctx, ixl_st_writer_new(ctx, &w));
  float v[64];
  for (int i = 0; i < 64; i++) v[i] = (float)i - 31.5f;
  int64_t shp = 64;
  CHECK_OK(ctx, ixl_st_writer_add(w, "v", IXL_F32, 1, &shp, v, sizeof v));
  CHECK_OK(ctx, ixl_st_writer_save(w, path));
  ixl_st_close(w);
  struct stat sb;
  CHECK(stat(path, &sb) == 0);
  CHECK(truncate(path, sb.st_size - 10) == 0);
  CHECK_ERR(ctx, ixl_st_open(ctx, path, &f), IXL_ERR_FORMAT,
            "cut.safetensors: tensor 'v': data_offsets [0, 256] run past the end of the data "
            "buffer (246 bytes follow the header): the file is truncated");
  CHECK(f == NULL);
  ixl_ctx_free(ctx);
}

/* Random mutations of a valid file: every result is OK or a clean error, never a crash, and
 * the context's counters come back (the fuzzer does this at scale; this is the quick check). */
TEST(mutated_files_fail_cleanly) {
  ixl_ctx *ctx = test_ctx(0);
  const char *hdr =
      "{\"__metadata__\": {\"k\": \"v\"}, \"a\": {\"dtype\": \"F32\", \"shape\": [2, 2], "
      "\"data_offsets\": [0, 16]}, \"b\": {\"dtype\": \"U8\", \"shape\": [3], "
      "\"data_offsets\": [16, 19]}}";
  uint8_t data[19];
  for (int i = 0; i < 19; i++) data[i] = (uint8_t)i;
  size_t len;
  uint8_t *good = mk(hdr, data, 19, &len);
  uint8_t *b = malloc(len);
  const uint64_t seed = rand_u64();
  rand_seed(RAND_SPLITMIX64, seed);
  ixl_alloc_stats s0, s1;
  ixl_ctx_alloc_stats(ctx, &s0);
  int ok = 0, bad = 0;
  for (int it = 0; it < 3000; it++) {
    memcpy(b, good, len);
    int nmut = 1 + (int)(rand_u64() % 4);
    for (int m = 0; m < nmut; m++) b[rand_u64() % len] = (uint8_t)rand_u64();
    size_t l = len - (rand_u64() % 8 == 0 ? rand_u64() % len : 0);
    ixl_st_file *f = NULL;
    ixl_status st = ixl_st_parse(ctx, b, l, &f);
    if (st == IXL_OK) {
      ok++;
      for (int32_t i = 0; i < ixl_st_count(f); i++) {
        ixl_st_entry e;
        CHECK_OK(ctx, ixl_st_entry_at(f, i, &e));
        CHECK(e.nbytes == 0 || ixl_st_data(f, i) != NULL);
      }
    } else {
      bad++;
      CHECK_MSG(st == IXL_ERR_FORMAT && strlen(ixl_last_error(ctx)) > 20,
                "seed %llu iteration %d: %s %s", (unsigned long long)seed, it, ixl_status_name(st),
                ixl_last_error(ctx));
    }
    ixl_st_close(f);
  }
  ixl_ctx_alloc_stats(ctx, &s1);
  CHECK(s1.host_bytes_live == s0.host_bytes_live);
  CHECK_MSG(ok > 0 && bad > 0, "ok %d bad %d", ok, bad);
  free(good);
  free(b);
  ixl_ctx_free(ctx);
}

int main(void) {
  /* fresh random inputs each run; IDXLAB_SEED repeats one (the failing seed is printed) */
  const char *env = getenv("IDXLAB_SEED");
  rand_seed(RAND_SPLITMIX64, env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) * 2654435761u);
  RUN(round_trip_every_dtype_and_metadata);
  RUN(reads_a_file_written_by_python);
  RUN(save_is_atomic_and_replaces);
  RUN(writer_argument_errors);
  RUN(file_outlives_its_context);
  RUN(bad_header_length);
  RUN(bad_json_names_the_byte);
  RUN(bad_entries);
  RUN(bad_dtypes);
  RUN(bad_shapes_and_sizes);
  RUN(bad_offsets_overlap_gap_truncation);
  RUN(mutated_files_fail_cleanly);
  remove_tmpdir();
  DONE();
}
