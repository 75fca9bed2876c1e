/* safetensors.c - the project's own reader and writer of the safetensors format:
 *   8-byte little-endian header length N, N bytes of JSON, then the data buffer.
 * The JSON is {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
 * "__metadata__": {"key": "value"}}, offsets relative to the start of the data buffer.
 *
 * The reader trusts nothing in a file: every malformed file is IXL_ERR_FORMAT with a message
 * that says what is wrong and where (header byte, tensor name, shape). Policy, as strict as
 * the reference implementation:
 * - the header is at most 100000000 bytes, valid UTF-8, one JSON object (whitespace around it
 *   is allowed: writers pad with spaces);
 * - a tensor entry has exactly the fields dtype, shape (at most 8 dims) and data_offsets;
 * - the tensors' byte ranges, sorted, cover the data buffer exactly: no overlap, no gap, no
 *   trailing bytes, nothing past the end (a truncated file fails here);
 * - dtypes F32, F16, BF16, I32, U8 and F8_E4M3 only; the other safetensors dtypes are named as
 *   unsupported.
 * The data are copied into 64-byte aligned host memory, so ixl_st_data pointers are aligned
 * for their dtype (a tensor at a misaligned offset gets its own aligned copy).
 * The JSON parser, its arena and the text helpers are in core/json.c. */
#include "ctx.h"
#include "tensor_check.h"
#include "json.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000ull /* the reference implementation's limit */
#define ST_MAX_DIMS 8
#define IXL_JSON_MAX_DEPTH 64 /* JSON nesting; a valid header needs 3 */

/* ---------------------------------------------------------------- the file object */
typedef struct st_tensor {
  char *name; /* owned */
  int32_t dtype;
  int32_t ndim;
  int64_t shape[ST_MAX_DIMS];
  int64_t begin, end; /* bytes [begin, end) of the data buffer */
  void *own;          /* owned copy (writer, or a misaligned tensor); NULL: in the buffer */
  int64_t own_bytes;
  int64_t hdr_pos; /* header byte of the entry, for messages */
} st_tensor;

struct ixl_st_file {
  ixl_ctx *ctx; /* retained */
  int is_writer;
  uint8_t *data; /* reader: the data buffer, counted host memory; owned */
  int64_t data_bytes;
  st_tensor *t;
  int32_t n, cap;
  char **mkey, **mval; /* owned strings */
  int32_t nmeta, capmeta;
};

static const struct {
  const char *name;
  int dtype; /* -1: a safetensors dtype idxlab does not take */
} st_dtypes[] = {
    {"F32", IXL_F32},      {"F16", IXL_F16}, {"BF16", IXL_BF16}, {"I32", IXL_I32}, {"U8", IXL_U8},
    {"F8_E4M3", IXL_E4M3}, {"F64", -1},      {"I64", -1},        {"U64", -1},      {"I16", -1},
    {"U16", -1},           {"U32", -1},      {"I8", -1},         {"BOOL", -1},     {"F8_E5M2", -1},
    {"F8_E8M0", -1},       {"F4", -1},       {"F6_E2M3", -1},    {"F6_E3M2", -1},  {"C64", -1},
};
#define ST_SUPPORTED "F32, F16, BF16, I32, U8, F8_E4M3"

static const char *st_dtype_name(int dtype) {
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (st_dtypes[i].dtype == dtype) return st_dtypes[i].name;
  return NULL;
}

static void st_free_contents(ixl_st_file *f) {
  for (int32_t i = 0; i < f->n; i++) {
    free(f->t[i].name);
    ixl_host_free(f->ctx, f->t[i].own, f->t[i].own_bytes);
  }
  free(f->t);
  for (int32_t i = 0; i < f->nmeta; i++) {
    free(f->mkey[i]);
    free(f->mval[i]);
  }
  free(f->mkey);
  free(f->mval);
  ixl_host_free(f->ctx, f->data, f->data_bytes);
}

void ixl_st_close(ixl_st_file *f) {
  if (!f) return;
  st_free_contents(f);
  ixl_ctx *ctx = f->ctx;
  free(f);
  ixl_ctx_release(ctx);
}

static ixl_st_file *st_new(ixl_ctx *ctx, int is_writer) {
  ixl_st_file *f = calloc(1, sizeof *f);
  if (!f) return NULL;
  f->ctx = ctx;
  f->is_writer = is_writer;
  ixl_ctx_retain(ctx);
  return f;
}

static int grow(void **arr, int32_t *cap, int32_t need, size_t elem) {
  if (need <= *cap) return 1;
  int64_t nc = *cap ? (int64_t)*cap * 2 : 8;
  while (nc < need) nc *= 2;
  if (nc > INT32_MAX) return 0;
  void *p = realloc(*arr, (size_t)nc * elem);
  if (!p) return 0;
  *arr = p;
  *cap = (int32_t)nc;
  return 1;
}

/* ---------------------------------------------------------------- header validation */
typedef struct {
  ixl_ctx *ctx;
  const char *what; /* the path, or "safetensors bytes" */
} st_where;

static ixl_status st_err(const st_where *w, ixl_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static ixl_status st_err(const st_where *w, ixl_status st, const char *fmt, ...) {
  char msg[IXL_ERRLEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return ixl_set_error(w->ctx, st, "%s: %s", w->what, msg);
}

/* A key or string value as a C string: refuses embedded NULs (from \u0000). */
static ixl_status c_string(const st_where *w, const char *s, size_t len, size_t pos,
                           const char *what) {
  if (strlen(s) != len)
    return st_err(w, IXL_ERR_FORMAT,
                  "%s at header byte %zu contains a NUL character (\\u0000): not supported", what,
                  pos);
  return IXL_OK;
}

static int cmp_i64(int64_t a, int64_t b) {
  return (a > b) - (a < b);
}

/* qsort context through a file-scope pointer is not reentrant; sort index pairs instead. */
typedef struct {
  const char *s;
  size_t len;
  int32_t idx;
} name_ref;

static int name_cmp(const void *a, const void *b) {
  const name_ref *x = a, *y = b;
  size_t l = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->s, y->s, l);
  if (c) return c;
  return cmp_i64((int64_t)x->len, (int64_t)y->len);
}

typedef struct {
  int64_t begin, end;
  int32_t idx;
} range_ref;

static int range_cmp(const void *a, const void *b) {
  const range_ref *x = a, *y = b;
  int c = cmp_i64(x->begin, y->begin);
  if (c) return c;
  c = cmp_i64(x->end, y->end);
  return c ? c : cmp_i64(x->idx, y->idx);
}

/* One tensor entry: exactly dtype, shape and data_offsets. */
static ixl_status read_entry(const st_where *w, const ixl_jval *e, st_tensor *t) {
  char nb[128], sb[256];
  const char *nm = ixl_show_text(t->name, nb, sizeof nb);
  if (e->type != IXL_J_OBJ)
    return st_err(w, IXL_ERR_FORMAT,
                  "tensor %s (header byte %zu): the entry is %s, expected an object with dtype, "
                  "shape and data_offsets",
                  nm, e->pos, ixl_json_type_name(e->type));
  const ixl_jval *dt = NULL, *shape = NULL, *offs = NULL;
  for (const ixl_jval *m = e->child; m; m = m->next) {
    const ixl_jval **slot = NULL;
    if (!strcmp(m->key, "dtype") && m->keylen == 5)
      slot = &dt;
    else if (!strcmp(m->key, "shape") && m->keylen == 5)
      slot = &shape;
    else if (!strcmp(m->key, "data_offsets") && m->keylen == 12)
      slot = &offs;
    else
      return st_err(w, IXL_ERR_FORMAT,
                    "tensor %s: unknown field %s at header byte %zu (expected dtype, shape, "
                    "data_offsets)",
                    nm, ixl_show_text(m->key, sb, sizeof sb), m->keypos);
    if (*slot)
      return st_err(w, IXL_ERR_FORMAT, "tensor %s: field %s given twice (header byte %zu)", nm,
                    m->key, m->keypos);
    *slot = m;
  }
  if (!dt || !shape || !offs)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s (header byte %zu): missing field %s", nm, e->pos,
                  !dt      ? "dtype"
                  : !shape ? "shape"
                           : "data_offsets");
  if (dt->type != IXL_J_STR)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: dtype is %s, expected a string such as \"F32\"",
                  nm, ixl_json_type_name(dt->type));
  int found = 0;
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++) {
    if (strcmp(dt->s, st_dtypes[i].name) || strlen(st_dtypes[i].name) != dt->slen) continue;
    if (st_dtypes[i].dtype < 0)
      return st_err(w, IXL_ERR_FORMAT,
                    "tensor %s: dtype %s is not supported (idxlab reads " ST_SUPPORTED ")", nm,
                    st_dtypes[i].name);
    t->dtype = st_dtypes[i].dtype;
    found = 1;
  }
  if (!found)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: unknown dtype %s (idxlab reads " ST_SUPPORTED ")",
                  nm, ixl_show_text(dt->s, sb, sizeof sb));
  if (shape->type != IXL_J_ARR)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: shape is %s, expected an array of integers", nm,
                  ixl_json_type_name(shape->type));
  if (shape->count > ST_MAX_DIMS)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: shape has %lld dims, at most %d are supported", nm,
                  (long long)shape->count, ST_MAX_DIMS);
  t->ndim = (int32_t)shape->count;
  int d = 0;
  for (const ixl_jval *m = shape->child; m; m = m->next, d++) {
    if (m->type != IXL_J_INT || m->i < 0)
      return st_err(w, IXL_ERR_FORMAT,
                    "tensor %s: shape[%d] (header byte %zu) is %s%s%s, expected an integer >= 0",
                    nm, d, m->pos, m->type == IXL_J_INT ? "negative" : ixl_json_type_name(m->type),
                    m->type == IXL_J_NUM ? " " : "", m->type == IXL_J_NUM ? m->s : "");
    t->shape[d] = m->i;
  }
  int64_t numel = 1, nbytes;
  for (d = 0; d < t->ndim; d++)
    if (!ixl_mul_ok(numel, t->shape[d], &numel)) break;
  ixl_show_shape(t->shape, t->ndim, sb, sizeof sb);
  if (d < t->ndim || !ixl_mul_ok(numel, (int64_t)ixl_dtype_size((ixl_dtype)t->dtype), &nbytes))
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: shape %s is too large (its size overflows int64)",
                  nm, sb);
  if (offs->type != IXL_J_ARR || offs->count != 2)
    return st_err(w, IXL_ERR_FORMAT,
                  "tensor %s: data_offsets (header byte %zu) must be an array [begin, end]", nm,
                  offs->pos);
  const ixl_jval *b = offs->child, *en = offs->child->next;
  if (b->type != IXL_J_INT || en->type != IXL_J_INT || b->i < 0 || en->i < 0)
    return st_err(w, IXL_ERR_FORMAT,
                  "tensor %s: data_offsets (header byte %zu) must be two integers >= 0", nm,
                  offs->pos);
  t->begin = b->i;
  t->end = en->i;
  if (t->begin > t->end)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: data_offsets [%lld, %lld]: begin is past end", nm,
                  (long long)t->begin, (long long)t->end);
  if (t->end - t->begin != nbytes)
    return st_err(w, IXL_ERR_FORMAT,
                  "tensor %s: shape %s of %s needs %lld bytes, but data_offsets [%lld, %lld] hold "
                  "%lld",
                  nm, sb, st_dtype_name(t->dtype), (long long)nbytes, (long long)t->begin,
                  (long long)t->end, (long long)(t->end - t->begin));
  return IXL_OK;
}

static ixl_status add_meta(ixl_st_file *f, const char *key, const char *val) {
  int32_t cap = f->capmeta;
  if (!grow((void **)&f->mkey, &cap, f->nmeta + 1, sizeof(char *))) return IXL_ERR_OOM;
  if (cap != f->capmeta) { /* mval keeps the same capacity as mkey */
    char **mv = realloc(f->mval, (size_t)cap * sizeof(char *));
    if (!mv) return IXL_ERR_OOM;
    f->mval = mv;
    f->capmeta = cap;
  }
  char *k = strdup(key), *v = strdup(val);
  if (!k || !v) {
    free(k);
    free(v);
    return IXL_ERR_OOM;
  }
  f->mkey[f->nmeta] = k;
  f->mval[f->nmeta] = v;
  f->nmeta++;
  return IXL_OK;
}

/* The first duplicate among n strings (sorted index pairs: O(n log n) even for hostile
 * headers); *a < *b are their indices. 0 when all differ, -1 when out of memory. */
static int find_duplicate(char *const *names, int32_t n, int32_t *a, int32_t *b) {
  if (n < 2) return 0;
  name_ref *refs = malloc((size_t)n * sizeof *refs);
  if (!refs) return -1;
  for (int32_t i = 0; i < n; i++) refs[i] = (name_ref){names[i], strlen(names[i]), i};
  qsort(refs, (size_t)n, sizeof *refs, name_cmp);
  int found = 0;
  for (int32_t i = 1; i < n && !found; i++)
    if (!name_cmp(&refs[i - 1], &refs[i])) {
      *a = refs[i - 1].idx < refs[i].idx ? refs[i - 1].idx : refs[i].idx;
      *b = refs[i - 1].idx < refs[i].idx ? refs[i].idx : refs[i - 1].idx;
      found = 1;
    }
  free(refs);
  return found;
}

/* Validates the header and fills f's tensors and metadata; data_bytes is what follows the
 * header in the file. */
static ixl_status parse_header(const st_where *w, const uint8_t *hdr, size_t hlen,
                               int64_t data_bytes, ixl_st_file *f) {
  size_t bad = ixl_utf8_check(hdr, hlen);
  if (bad < hlen)
    return st_err(w, IXL_ERR_FORMAT, "header is not valid UTF-8 at header byte %zu (file byte %zu)",
                  bad, bad + 8);
  ixl_arena a = {NULL};
  ixl_json_error jerr;
  ixl_status st = IXL_OK;
  ixl_jval *root = ixl_json_parse(hdr, hlen, &a, &jerr);
  if (!root) {
    st = st_err(w, jerr.oom ? IXL_ERR_OOM : IXL_ERR_FORMAT,
                "bad JSON at header byte %zu (file byte %zu): %s", jerr.pos, jerr.pos + 8,
                jerr.msg);
    goto done;
  }
  if (root->type != IXL_J_OBJ) {
    st = st_err(w, IXL_ERR_FORMAT, "the header is %s, expected a JSON object",
                ixl_json_type_name(root->type));
    goto done;
  }
  char nb[128], nb2[128];
  int seen_meta = 0;
  int64_t ntensors = root->count;
  if (ntensors > INT32_MAX - 1) {
    st = st_err(w, IXL_ERR_FORMAT, "the header lists %lld entries: too many", (long long)ntensors);
    goto done;
  }
  if (!grow((void **)&f->t, &f->cap, (int32_t)ntensors + 1, sizeof(st_tensor))) {
    st = st_err(w, IXL_ERR_OOM, "out of memory for %lld tensor entries", (long long)ntensors);
    goto done;
  }
  for (const ixl_jval *m = root->child; m; m = m->next) {
    if ((st = c_string(w, m->key, m->keylen, m->keypos, "a tensor name"))) goto done;
    if (!strcmp(m->key, "__metadata__")) {
      if (seen_meta++) {
        st = st_err(w, IXL_ERR_FORMAT, "__metadata__ given twice (header byte %zu)", m->keypos);
        goto done;
      }
      if (m->type != IXL_J_OBJ) {
        st = st_err(w, IXL_ERR_FORMAT, "__metadata__ is %s, expected an object of strings",
                    ixl_json_type_name(m->type));
        goto done;
      }
      for (const ixl_jval *k = m->child; k; k = k->next) {
        if ((st = c_string(w, k->key, k->keylen, k->keypos, "a __metadata__ key"))) goto done;
        if (k->type != IXL_J_STR) {
          st = st_err(w, IXL_ERR_FORMAT, "__metadata__ value of %s is %s: values must be strings",
                      ixl_show_text(k->key, nb, sizeof nb), ixl_json_type_name(k->type));
          goto done;
        }
        if ((st = c_string(w, k->s, k->slen, k->pos, "a __metadata__ value"))) goto done;
        if (add_meta(f, k->key, k->s)) {
          st = st_err(w, IXL_ERR_OOM, "out of memory for metadata");
          goto done;
        }
      }
      int32_t d1, d2;
      int dup = find_duplicate(f->mkey, f->nmeta, &d1, &d2);
      if (dup) {
        st = dup < 0 ? st_err(w, IXL_ERR_OOM, "out of memory checking metadata keys")
                     : st_err(w, IXL_ERR_FORMAT, "__metadata__ key %s given twice",
                              ixl_show_text(f->mkey[d1], nb, sizeof nb));
        goto done;
      }
      continue;
    }
    st_tensor *t = &f->t[f->n];
    memset(t, 0, sizeof *t);
    t->hdr_pos = (int64_t)m->keypos;
    t->name = strdup(m->key);
    if (!t->name) {
      st = st_err(w, IXL_ERR_OOM, "out of memory for a tensor name");
      goto done;
    }
    f->n++;
    if ((st = read_entry(w, m, t))) goto done;
  }
  /* duplicate names */
  if (f->n > 1) {
    char **names = malloc((size_t)f->n * sizeof *names);
    int32_t d1 = 0, d2 = 0, dup = -1;
    if (names) {
      for (int32_t i = 0; i < f->n; i++) names[i] = f->t[i].name;
      dup = find_duplicate(names, f->n, &d1, &d2);
      free(names);
    }
    if (dup) {
      st = dup < 0
               ? st_err(w, IXL_ERR_OOM, "out of memory checking names")
               : st_err(w, IXL_ERR_FORMAT, "duplicate tensor name %s (header bytes %lld and %lld)",
                        ixl_show_text(f->t[d1].name, nb, sizeof nb), (long long)f->t[d1].hdr_pos,
                        (long long)f->t[d2].hdr_pos);
      goto done;
    }
  }
  /* the byte ranges, sorted, must tile [0, data_bytes) exactly */
  if (f->n > 0) {
    range_ref *r = malloc((size_t)f->n * sizeof *r);
    if (!r) {
      st = st_err(w, IXL_ERR_OOM, "out of memory checking data_offsets");
      goto done;
    }
    for (int32_t i = 0; i < f->n; i++) r[i] = (range_ref){f->t[i].begin, f->t[i].end, i};
    qsort(r, (size_t)f->n, sizeof *r, range_cmp);
    int64_t pos = 0;
    int32_t prev = -1;
    for (int32_t i = 0; i < f->n && !st; i++) {
      const st_tensor *t = &f->t[r[i].idx];
      if (t->begin < pos)
        st = st_err(w, IXL_ERR_FORMAT,
                    "tensors %s (data_offsets [%lld, %lld]) and %s ([%lld, %lld]) overlap",
                    ixl_show_text(f->t[prev].name, nb, sizeof nb), (long long)f->t[prev].begin,
                    (long long)f->t[prev].end, ixl_show_text(t->name, nb2, sizeof nb2),
                    (long long)t->begin, (long long)t->end);
      else if (t->begin > pos)
        st = st_err(w, IXL_ERR_FORMAT,
                    "no tensor covers data bytes [%lld, %lld) before %s: the data_offsets must "
                    "cover the data buffer contiguously",
                    (long long)pos, (long long)t->begin, ixl_show_text(t->name, nb, sizeof nb));
      else if (t->end > data_bytes)
        st = st_err(w, IXL_ERR_FORMAT,
                    "tensor %s: data_offsets [%lld, %lld] run past the end of the data buffer "
                    "(%lld bytes follow the header): the file is truncated or the offsets are "
                    "wrong",
                    ixl_show_text(t->name, nb, sizeof nb), (long long)t->begin, (long long)t->end,
                    (long long)data_bytes);
      pos = t->end;
      prev = r[i].idx;
    }
    free(r);
    if (st) goto done;
    if (pos < data_bytes) {
      st = st_err(w, IXL_ERR_FORMAT,
                  "%lld bytes of trailing data after the last tensor (%s ends at data byte %lld of "
                  "%lld): the data_offsets must cover the data buffer exactly",
                  (long long)(data_bytes - pos), ixl_show_text(f->t[prev].name, nb, sizeof nb),
                  (long long)pos, (long long)data_bytes);
      goto done;
    }
  } else if (data_bytes > 0) {
    st = st_err(w, IXL_ERR_FORMAT,
                "%lld bytes of trailing data after a header that lists no tensors",
                (long long)data_bytes);
    goto done;
  }
done:
  ixl_arena_free(&a);
  return st;
}

/* Reads the 8-byte header length and checks it against the file size. */
static ixl_status check_header_len(const st_where *w, const uint8_t *b8, uint64_t total,
                                   uint64_t *hlen) {
  if (total < 8)
    return st_err(w, IXL_ERR_FORMAT,
                  "the file is %llu bytes: too short for the 8-byte header length (truncated?)",
                  (unsigned long long)total);
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | b8[i];
  if (n > ST_MAX_HEADER)
    return st_err(w, IXL_ERR_FORMAT,
                  "header length %llu is absurd (the limit is %llu bytes): not a safetensors file?",
                  (unsigned long long)n, ST_MAX_HEADER);
  if (n > total - 8)
    return st_err(w, IXL_ERR_FORMAT,
                  "header length %llu is larger than the rest of the file (%llu bytes): the file "
                  "is truncated or not safetensors",
                  (unsigned long long)n, (unsigned long long)(total - 8));
  *hlen = n;
  return IXL_OK;
}

/* After the header passed: tensors at offsets misaligned for their dtype get an aligned copy
 * (the buffer itself is 64-byte aligned). */
static ixl_status align_tensors(const st_where *w, ixl_st_file *f) {
  for (int32_t i = 0; i < f->n; i++) {
    st_tensor *t = &f->t[i];
    int64_t es = (int64_t)ixl_dtype_size((ixl_dtype)t->dtype), nb = t->end - t->begin;
    if (t->begin % es == 0 || nb == 0) continue;
    ixl_status st = ixl_host_alloc(f->ctx, nb, &t->own);
    if (st) return st_err(w, st, "out of memory copying tensor %s", t->name);
    t->own_bytes = nb;
    memcpy(t->own, f->data + t->begin, (size_t)nb);
  }
  return IXL_OK;
}

ixl_status ixl_st_parse(ixl_ctx *ctx, const uint8_t *bytes, size_t len, ixl_st_file **out) {
  if (!out) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_parse: out is NULL");
  *out = NULL;
  if (!bytes && len > 0) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_parse: bytes is NULL");
  st_where w = {ctx, "safetensors bytes"};
  uint64_t hlen;
  ixl_status st = check_header_len(&w, bytes, len, &hlen);
  if (st) return st;
  ixl_st_file *f = st_new(ctx, 0);
  if (!f) return ixl_set_error(ctx, IXL_ERR_OOM, "out of memory for a safetensors file");
  int64_t data_bytes = (int64_t)(len - 8 - hlen);
  st = parse_header(&w, bytes + 8, (size_t)hlen, data_bytes, f);
  if (!st) st = ixl_host_alloc(ctx, data_bytes, (void **)&f->data);
  if (!st) {
    f->data_bytes = data_bytes;
    if (data_bytes) memcpy(f->data, bytes + 8 + hlen, (size_t)data_bytes);
    st = align_tensors(&w, f);
  }
  if (st) {
    ixl_st_close(f);
    return st;
  }
  *out = f;
  return IXL_OK;
}

/* Reads exactly n bytes at the current position; 0 at a short read or error. */
static int read_all(int fd, void *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char *)buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    got += (size_t)r;
  }
  return 1;
}

ixl_status ixl_st_open(ixl_ctx *ctx, const char *path, ixl_st_file **out) {
  if (!out) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_open: out is NULL");
  *out = NULL;
  if (!path) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_open: path is NULL");
  st_where w = {ctx, path};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return st_err(&w, IXL_ERR_IO, "cannot open: %s", strerror(errno));
  struct stat sb;
  ixl_status st = IXL_OK;
  uint8_t *hdr = NULL, b8[8] = {0};
  ixl_st_file *f = NULL;
  uint64_t hlen = 0;
  if (fstat(fd, &sb) != 0) {
    st = st_err(&w, IXL_ERR_IO, "cannot stat: %s", strerror(errno));
    goto done;
  }
  if (!S_ISREG(sb.st_mode)) {
    st = st_err(&w, IXL_ERR_IO, "not a regular file");
    goto done;
  }
  uint64_t total = (uint64_t)sb.st_size;
  errno = 0;
  if (total >= 8 && !read_all(fd, b8, 8)) {
    st = st_err(&w, IXL_ERR_IO, "cannot read the header length: %s",
                errno ? strerror(errno) : "short read");
    goto done;
  }
  if ((st = check_header_len(&w, b8, total, &hlen))) goto done;
  hdr = malloc(hlen ? hlen : 1);
  if (!hdr) {
    st = st_err(&w, IXL_ERR_OOM, "out of memory for a %llu-byte header", (unsigned long long)hlen);
    goto done;
  }
  if (!read_all(fd, hdr, hlen)) {
    st = st_err(&w, IXL_ERR_IO, "cannot read the %llu-byte header: %s", (unsigned long long)hlen,
                errno ? strerror(errno) : "short read");
    goto done;
  }
  f = st_new(ctx, 0);
  if (!f) {
    st = ixl_set_error(ctx, IXL_ERR_OOM, "out of memory for a safetensors file");
    goto done;
  }
  int64_t data_bytes = (int64_t)(total - 8 - hlen);
  if ((st = parse_header(&w, hdr, hlen, data_bytes, f))) goto done;
  if ((st = ixl_host_alloc(ctx, data_bytes, (void **)&f->data))) goto done;
  f->data_bytes = data_bytes;
  if (!read_all(fd, f->data, (size_t)data_bytes)) {
    st = st_err(&w, IXL_ERR_IO, "cannot read the %lld-byte data buffer (did the file change?): %s",
                (long long)data_bytes, errno ? strerror(errno) : "short read");
    goto done;
  }
  st = align_tensors(&w, f);
done:
  close(fd);
  free(hdr);
  if (st) {
    ixl_st_close(f);
    return st;
  }
  *out = f;
  return IXL_OK;
}

/* ---------------------------------------------------------------- queries */
int32_t ixl_st_count(const ixl_st_file *f) {
  return f ? f->n : 0;
}

ixl_status ixl_st_entry_at(const ixl_st_file *f, int32_t i, ixl_st_entry *out) {
  if (!f || !out) return IXL_ERR_INVALID_ARG;
  if (i < 0 || i >= f->n)
    return ixl_set_error(f->ctx, IXL_ERR_INVALID_ARG,
                         "st_entry_at: index %d: the file has %d tensors", i, f->n);
  const st_tensor *t = &f->t[i];
  memset(out, 0, sizeof *out);
  out->name = t->name;
  out->dtype = t->dtype;
  out->ndim = t->ndim;
  for (int d = 0; d < t->ndim; d++) out->shape[d] = t->shape[d];
  out->nbytes = t->end - t->begin;
  return IXL_OK;
}

int32_t ixl_st_find(const ixl_st_file *f, const char *name) {
  if (!f || !name) return -1;
  for (int32_t i = 0; i < f->n; i++)
    if (!strcmp(f->t[i].name, name)) return i;
  return -1;
}

const void *ixl_st_data(const ixl_st_file *f, int32_t i) {
  if (!f || i < 0 || i >= f->n) return NULL;
  const st_tensor *t = &f->t[i];
  if (t->own) return t->own;
  return f->data ? f->data + t->begin : NULL;
}

const char *ixl_st_metadata(const ixl_st_file *f, const char *key) {
  if (!f || !key) return NULL;
  for (int32_t i = 0; i < f->nmeta; i++)
    if (!strcmp(f->mkey[i], key)) return f->mval[i];
  return NULL;
}

int32_t ixl_st_metadata_count(const ixl_st_file *f) {
  return f ? f->nmeta : 0;
}

const char *ixl_st_metadata_key(const ixl_st_file *f, int32_t i) {
  if (!f || i < 0 || i >= f->nmeta) return NULL;
  return f->mkey[i];
}

/* ---------------------------------------------------------------- writer */
ixl_status ixl_st_writer_new(ixl_ctx *ctx, ixl_st_file **out) {
  if (!out) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_writer_new: out is NULL");
  *out = st_new(ctx, 1);
  if (!*out) return ixl_set_error(ctx, IXL_ERR_OOM, "out of memory for a safetensors writer");
  return IXL_OK;
}

static ixl_status check_text(ixl_ctx *ctx, const char *s, const char *what) {
  size_t n = strlen(s), bad = ixl_utf8_check((const uint8_t *)s, n);
  if (bad < n)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "%s is not valid UTF-8 (byte %zu)", what, bad);
  return IXL_OK;
}

ixl_status ixl_st_writer_add(ixl_st_file *w, const char *name, ixl_dtype dtype, int ndim,
                             const int64_t *shape, const void *data, int64_t nbytes) {
  if (!w) return IXL_ERR_INVALID_ARG;
  ixl_ctx *ctx = w->ctx;
  char nb[128], sb[256];
  if (!w->is_writer)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "st_writer_add: the file was opened for reading");
  if (!name) return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_writer_add: name is NULL");
  ixl_status st = check_text(ctx, name, "st_writer_add: the tensor name");
  if (st) return st;
  if (!strcmp(name, "__metadata__"))
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "st_writer_add: name '__metadata__' is reserved for the metadata");
  const char *nm = ixl_show_text(name, nb, sizeof nb);
  if ((int)dtype < 0 || dtype >= IXL_DTYPE_COUNT || !st_dtype_name(dtype))
    return ixl_set_error(ctx, IXL_ERR_DTYPE,
                         "st_writer_add: tensor %s: dtype %s has no safetensors dtype (write "
                         "e2m1x2 bytes as u8)",
                         nm, ixl_dtype_name(dtype));
  if (ndim < 0 || ndim > ST_MAX_DIMS)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "st_writer_add: tensor %s: ndim = %d: must be in [0, %d]", nm, ndim,
                         ST_MAX_DIMS);
  if (ndim > 0 && !shape)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_writer_add: tensor %s: shape is NULL", nm);
  int64_t numel = 1, need;
  for (int d = 0; d < ndim; d++) {
    if (shape[d] < 0)
      return ixl_set_error(ctx, IXL_ERR_SHAPE,
                           "st_writer_add: tensor %s: shape[%d] = %lld: must be >= 0", nm, d,
                           (long long)shape[d]);
    if (!ixl_mul_ok(numel, shape[d], &numel))
      return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "st_writer_add: tensor %s: shape overflows int64",
                           nm);
  }
  if (!ixl_mul_ok(numel, (int64_t)ixl_dtype_size(dtype), &need))
    return ixl_set_error(ctx, IXL_ERR_OVERFLOW, "st_writer_add: tensor %s: size overflows int64",
                         nm);
  ixl_show_shape(shape, ndim, sb, sizeof sb);
  if (nbytes != need)
    return ixl_set_error(ctx, IXL_ERR_SHAPE,
                         "st_writer_add: tensor %s: nbytes = %lld, but shape %s of %s needs %lld",
                         nm, (long long)nbytes, sb, ixl_dtype_name(dtype), (long long)need);
  if (need > 0 && !data)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_writer_add: tensor %s: data is NULL", nm);
  if (ixl_st_find(w, name) >= 0)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_writer_add: tensor %s added twice", nm);
  if (w->n == INT32_MAX || !grow((void **)&w->t, &w->cap, w->n + 1, sizeof(st_tensor)))
    return ixl_set_error(ctx, IXL_ERR_OOM, "st_writer_add: out of memory for tensor %s", nm);
  st_tensor *t = &w->t[w->n];
  memset(t, 0, sizeof *t);
  t->name = strdup(name);
  if (!t->name) return ixl_set_error(ctx, IXL_ERR_OOM, "st_writer_add: out of memory");
  if ((st = ixl_host_alloc(ctx, need, &t->own))) {
    free(t->name);
    return st;
  }
  t->own_bytes = need;
  if (need) memcpy(t->own, data, (size_t)need);
  t->dtype = dtype;
  t->ndim = ndim;
  for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
  t->end = need; /* begin/end are assigned by the layout at save time */
  w->n++;
  return IXL_OK;
}

ixl_status ixl_st_writer_set_metadata(ixl_st_file *w, const char *key, const char *value) {
  if (!w) return IXL_ERR_INVALID_ARG;
  if (!w->is_writer)
    return ixl_set_error(w->ctx, IXL_ERR_INVALID_ARG,
                         "st_writer_set_metadata: the file was opened for reading");
  if (!key || !value)
    return ixl_set_error(w->ctx, IXL_ERR_INVALID_ARG, "st_writer_set_metadata: %s is NULL",
                         !key ? "key" : "value");
  ixl_status st = check_text(w->ctx, key, "st_writer_set_metadata: the key");
  if (!st) st = check_text(w->ctx, value, "st_writer_set_metadata: the value");
  if (st) return st;
  for (int32_t i = 0; i < w->nmeta; i++)
    if (!strcmp(w->mkey[i], key)) {
      char *v = strdup(value);
      if (!v) return ixl_set_error(w->ctx, IXL_ERR_OOM, "out of memory for metadata");
      free(w->mval[i]);
      w->mval[i] = v;
      return IXL_OK;
    }
  if (add_meta(w, key, value))
    return ixl_set_error(w->ctx, IXL_ERR_OOM, "out of memory for metadata");
  return IXL_OK;
}


static int write_all(int fd, const void *buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = write(fd, (const char *)buf + done, n - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return 0;
    done += (size_t)r;
  }
  return 1;
}

ixl_status ixl_st_writer_save(ixl_st_file *w, const char *path) {
  if (!w) return IXL_ERR_INVALID_ARG;
  ixl_ctx *ctx = w->ctx;
  if (!w->is_writer)
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG,
                         "st_writer_save: the file was opened for reading");
  if (!path || !path[0])
    return ixl_set_error(ctx, IXL_ERR_INVALID_ARG, "st_writer_save: path is empty");
  /* Layout as the reference writer: larger elements first (keeps every tensor aligned for its
   * dtype), insertion order within a size; the header lists tensors in that order. */
  int32_t *order = malloc((size_t)(w->n ? w->n : 1) * sizeof *order);
  if (!order) return ixl_set_error(ctx, IXL_ERR_OOM, "st_writer_save: out of memory");
  int32_t k = 0;
  for (size_t es = 4; es >= 1; es /= 2)
    for (int32_t i = 0; i < w->n; i++)
      if (ixl_dtype_size((ixl_dtype)w->t[i].dtype) == es) order[k++] = i;
  int64_t off = 0;
  for (int32_t j = 0; j < k; j++) {
    st_tensor *t = &w->t[order[j]];
    t->begin = off;
    t->end = off + t->own_bytes;
    off = t->end;
  }
  ixl_sbuf b = {NULL, 0, 0, 0};
  char num[64];
  ixl_sb_str(&b, "{");
  int first = 1;
  if (w->nmeta) {
    ixl_sb_str(&b, "\"__metadata__\":{");
    for (int32_t i = 0; i < w->nmeta; i++) {
      if (i) ixl_sb_str(&b, ",");
      ixl_sb_json(&b, w->mkey[i]);
      ixl_sb_str(&b, ":");
      ixl_sb_json(&b, w->mval[i]);
    }
    ixl_sb_str(&b, "}");
    first = 0;
  }
  for (int32_t j = 0; j < k; j++) {
    const st_tensor *t = &w->t[order[j]];
    if (!first) ixl_sb_str(&b, ",");
    first = 0;
    ixl_sb_json(&b, t->name);
    ixl_sb_str(&b, ":{\"dtype\":\"");
    ixl_sb_str(&b, st_dtype_name(t->dtype));
    ixl_sb_str(&b, "\",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) {
      snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t->shape[d]);
      ixl_sb_str(&b, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%lld,%lld]}", (long long)t->begin,
             (long long)t->end);
    ixl_sb_str(&b, num);
  }
  ixl_sb_str(&b, "}");
  while (!b.oom && (8 + b.n) % 8) ixl_sb_str(&b, " "); /* the reference pads with spaces */
  if (b.oom) {
    free(order);
    free(b.p);
    return ixl_set_error(ctx, IXL_ERR_OOM, "st_writer_save: out of memory for the header");
  }
  uint8_t len8[8];
  for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)b.n >> (8 * i));

  /* Temp file in the same directory, then rename: a reader sees the old file or the whole
   * new one, never half of it. */
  size_t plen = strlen(path);
  char *tmp = malloc(plen + 64);
  ixl_status st = IXL_OK;
  int fd = -1;
  if (!tmp) st = ixl_set_error(ctx, IXL_ERR_OOM, "st_writer_save: out of memory");
  static _Atomic unsigned counter; /* distinct temp names for concurrent saves */
  for (int attempt = 0; !st && fd < 0 && attempt < 100; attempt++) {
    snprintf(tmp, plen + 64, "%s.tmp.%ld.%u", path, (long)getpid(), counter++);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      st = ixl_set_error(ctx, IXL_ERR_IO, "%s: cannot create %s: %s", path, tmp, strerror(errno));
  }
  if (!st && fd < 0)
    st = ixl_set_error(ctx, IXL_ERR_IO, "%s: cannot create a temporary file", path);
  int ok = !st && write_all(fd, len8, 8) && write_all(fd, b.p, b.n);
  for (int32_t j = 0; ok && j < k; j++) {
    const st_tensor *t = &w->t[order[j]];
    ok = write_all(fd, t->own, (size_t)t->own_bytes);
  }
  if (!st && ok && fsync(fd) != 0) ok = 0;
  if (!st && !ok)
    st = ixl_set_error(ctx, IXL_ERR_IO, "%s: write failed: %s", path, strerror(errno));
  if (fd >= 0 && close(fd) != 0 && !st)
    st = ixl_set_error(ctx, IXL_ERR_IO, "%s: close failed: %s", path, strerror(errno));
  if (!st && rename(tmp, path) != 0)
    st = ixl_set_error(ctx, IXL_ERR_IO, "%s: cannot rename %s into place: %s", path, tmp,
                       strerror(errno));
  if (st && fd >= 0) unlink(tmp);
  free(tmp);
  free(order);
  free(b.p);
  return st;
}
