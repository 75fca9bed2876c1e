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
 * for their dtype (a tensor at a misaligned offset gets its own aligned copy). */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000ull /* the reference implementation's limit */
#define ST_MAX_DIMS 8
#define ST_MAX_DEPTH 64 /* JSON nesting; a valid header needs 3 */

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

/* ---------------------------------------------------------------- text helpers */
/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when invalid (overlongs,
 * surrogates and code points past U+10FFFF are invalid). */
static size_t utf8_len(const uint8_t *s, size_t n) {
  uint8_t c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint32_t cp;
  if ((c & 0xe0) == 0xc0) {
    len = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    len = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    len = 4;
    cp = c & 0x07;
  } else
    return 0;
  if (n < len) return 0;
  for (size_t i = 1; i < len; i++) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return len;
}

/* Byte offset of the first invalid UTF-8 sequence, or n when all valid. */
static size_t utf8_check(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t l = utf8_len(s + i, n - i);
    if (!l) return i;
    i += l;
  }
  return n;
}

/* A name made printable for a message: quotes, at most ~80 bytes, odd bytes as \xNN. */
static const char *show(const char *s, char *buf, size_t cap) {
  size_t o = 0;
  buf[o++] = '\'';
  for (size_t i = 0; s[i] && o + 8 < cap; i++) {
    if (i >= 80) {
      memcpy(buf + o, "...", 3);
      o += 3;
      break;
    }
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f || c == '\'')
      o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    else
      buf[o++] = (char)c;
  }
  buf[o++] = '\'';
  buf[o] = '\0';
  return buf;
}

static void show_shape(const int64_t *shape, int ndim, char *buf, size_t cap) {
  size_t o = 0;
  o += (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* ---------------------------------------------------------------- JSON (the subset we need) */
/* Values live in an arena freed at once: parse errors need no unwinding. */
typedef struct arena_chunk {
  struct arena_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char mem[];
} arena_chunk;

typedef struct {
  arena_chunk *head;
} arena;

static void *arena_alloc(arena *a, size_t bytes) {
  bytes = (bytes + 15) & ~(size_t)15;
  if (!a->head || a->head->cap - a->head->used < bytes) {
    size_t cap = bytes > 65536 ? bytes : 65536;
    arena_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->next = a->head;
    c->used = 0;
    c->cap = cap;
    a->head = c;
  }
  void *p = a->head->mem + a->head->used;
  a->head->used += bytes;
  return p;
}

static void arena_free(arena *a) {
  while (a->head) {
    arena_chunk *n = a->head->next;
    free(a->head);
    a->head = n;
  }
}

enum { J_OBJ, J_ARR, J_STR, J_INT, J_NUM, J_TRUE, J_FALSE, J_NULL };
static const char *const jtype_names[] = {"an object", "an array", "a string", "an integer",
                                          "a number",  "true",     "false",    "null"};

typedef struct jval {
  int type;
  size_t pos; /* header byte where the value starts */
  int64_t i;  /* J_INT */
  char *s;    /* J_STR: decoded, NUL-terminated; J_NUM: the literal */
  size_t slen;
  char *key; /* member of an object: its key (decoded) */
  size_t keylen, keypos;
  struct jval *child; /* J_OBJ / J_ARR: first member */
  struct jval *next;  /* next sibling */
  int64_t count;
} jval;

typedef struct {
  const uint8_t *p;
  size_t n, i;
  arena *a;
  int oom;
  size_t err_pos;
  char err[160];
} jparser;

static jval *jfail(jparser *ps, size_t pos, const char *msg) {
  if (!ps->err[0]) {
    ps->err_pos = pos;
    snprintf(ps->err, sizeof ps->err, "%s", msg);
  }
  return NULL;
}

static void jskip_ws(jparser *ps) {
  while (ps->i < ps->n && (ps->p[ps->i] == ' ' || ps->p[ps->i] == '\t' || ps->p[ps->i] == '\n' ||
                           ps->p[ps->i] == '\r'))
    ps->i++;
}

static int hex4(const uint8_t *s, uint32_t *out) {
  uint32_t v = 0;
  for (int k = 0; k < 4; k++) {
    uint8_t c = s[k];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= (uint32_t)(c - '0');
    else if (c >= 'a' && c <= 'f')
      v |= (uint32_t)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      v |= (uint32_t)(c - 'A' + 10);
    else
      return 0;
  }
  *out = v;
  return 1;
}

static size_t put_utf8(uint32_t cp, char *o) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* At an opening quote: decodes the string into the arena. The decoded text is never longer
 * than the raw text, so one allocation of the raw length suffices. */
static int jstring(jparser *ps, char **out, size_t *out_len) {
  size_t start = ps->i++;
  size_t j = ps->i;
  while (j < ps->n && ps->p[j] != '"') j += ps->p[j] == '\\' ? 2 : 1;
  if (j >= ps->n) return jfail(ps, start, "unterminated string"), 0;
  char *buf = arena_alloc(ps->a, j - ps->i + 1);
  if (!buf) return ps->oom = 1, jfail(ps, start, "out of memory"), 0;
  size_t o = 0;
  while (ps->p[ps->i] != '"') {
    uint8_t c = ps->p[ps->i];
    if (c < 0x20) return jfail(ps, ps->i, "control character inside a string (escape it)"), 0;
    if (c != '\\') {
      size_t l = utf8_len(ps->p + ps->i, ps->n - ps->i);
      if (!l) return jfail(ps, ps->i, "invalid UTF-8 inside a string"), 0;
      memcpy(buf + o, ps->p + ps->i, l);
      o += l;
      ps->i += l;
      continue;
    }
    size_t esc = ps->i;
    uint8_t e = ps->p[ps->i + 1];
    ps->i += 2;
    switch (e) {
      case '"': buf[o++] = '"'; break;
      case '\\': buf[o++] = '\\'; break;
      case '/': buf[o++] = '/'; break;
      case 'b': buf[o++] = '\b'; break;
      case 'f': buf[o++] = '\f'; break;
      case 'n': buf[o++] = '\n'; break;
      case 'r': buf[o++] = '\r'; break;
      case 't': buf[o++] = '\t'; break;
      case 'u': {
        uint32_t cp;
        if (ps->i + 4 > ps->n || !hex4(ps->p + ps->i, &cp))
          return jfail(ps, esc, "bad \\u escape: expected 4 hex digits"), 0;
        ps->i += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff)
          return jfail(ps, esc, "bad \\u escape: a low surrogate without a high one"), 0;
        if (cp >= 0xd800 && cp <= 0xdbff) {
          uint32_t lo;
          if (ps->i + 6 > ps->n || ps->p[ps->i] != '\\' || ps->p[ps->i + 1] != 'u' ||
              !hex4(ps->p + ps->i + 2, &lo) || lo < 0xdc00 || lo > 0xdfff)
            return jfail(ps, esc, "bad \\u escape: a high surrogate without a low one"), 0;
          ps->i += 6;
          cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        }
        /* 6 raw bytes (or 12 for a pair) become at most 4: the buffer is large enough */
        o += put_utf8(cp, buf + o);
        break;
      }
      default: return jfail(ps, esc, "bad escape in a string"), 0;
    }
  }
  ps->i++; /* closing quote */
  buf[o] = '\0';
  *out = buf;
  *out_len = o;
  return 1;
}

static int is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}

static jval *jnew(jparser *ps, int type, size_t pos) {
  jval *v = arena_alloc(ps->a, sizeof *v);
  if (!v) return ps->oom = 1, jfail(ps, pos, "out of memory");
  memset(v, 0, sizeof *v);
  v->type = type;
  v->pos = pos;
  return v;
}

static jval *jvalue(jparser *ps, int depth);

static jval *jnumber(jparser *ps) {
  size_t start = ps->i, j = ps->i;
  int neg = 0, is_int = 1;
  if (ps->p[j] == '-') {
    neg = 1;
    j++;
  }
  if (j >= ps->n || !is_digit(ps->p[j])) return jfail(ps, start, "bad number");
  if (ps->p[j] == '0' && j + 1 < ps->n && is_digit(ps->p[j + 1]))
    return jfail(ps, start, "bad number: leading zero");
  while (j < ps->n && is_digit(ps->p[j])) j++;
  if (j < ps->n && ps->p[j] == '.') {
    is_int = 0;
    j++;
    if (j >= ps->n || !is_digit(ps->p[j]))
      return jfail(ps, start, "bad number: digits must follow '.'");
    while (j < ps->n && is_digit(ps->p[j])) j++;
  }
  if (j < ps->n && (ps->p[j] == 'e' || ps->p[j] == 'E')) {
    is_int = 0;
    j++;
    if (j < ps->n && (ps->p[j] == '+' || ps->p[j] == '-')) j++;
    if (j >= ps->n || !is_digit(ps->p[j]))
      return jfail(ps, start, "bad number: digits must follow the exponent");
    while (j < ps->n && is_digit(ps->p[j])) j++;
  }
  jval *v = jnew(ps, J_INT, start);
  if (!v) return NULL;
  /* integers beyond int64 stay numbers (their literal), refused where an integer is needed */
  if (is_int) {
    uint64_t acc = 0;
    for (size_t k = start + (size_t)neg; k < j && is_int; k++) {
      uint64_t d = (uint64_t)(ps->p[k] - '0');
      if (acc > (UINT64_MAX - d) / 10)
        is_int = 0;
      else
        acc = acc * 10 + d;
    }
    if (is_int && acc > (uint64_t)INT64_MAX + (uint64_t)neg) is_int = 0;
    if (is_int) v->i = neg ? (int64_t)(0 - acc) : (int64_t)acc;
  }
  if (!is_int) {
    v->type = J_NUM;
    size_t len = j - start > 40 ? 40 : j - start;
    v->s = arena_alloc(ps->a, len + 1);
    if (!v->s) return ps->oom = 1, jfail(ps, start, "out of memory");
    memcpy(v->s, ps->p + start, len);
    v->s[len] = '\0';
  }
  ps->i = j;
  return v;
}

static jval *jcontainer(jparser *ps, int depth, int is_obj) {
  size_t start = ps->i++;
  if (depth > ST_MAX_DEPTH) return jfail(ps, start, "nested too deeply");
  jval *v = jnew(ps, is_obj ? J_OBJ : J_ARR, start);
  if (!v) return NULL;
  jval **tail = &v->child;
  jskip_ws(ps);
  if (ps->i < ps->n && ps->p[ps->i] == (is_obj ? '}' : ']')) {
    ps->i++;
    return v;
  }
  for (;;) {
    char *key = NULL;
    size_t keylen = 0, keypos = 0;
    jskip_ws(ps);
    if (is_obj) {
      if (ps->i >= ps->n) return jfail(ps, ps->i, "unexpected end of header inside an object");
      if (ps->p[ps->i] != '"') return jfail(ps, ps->i, "expected a string key");
      keypos = ps->i;
      if (!jstring(ps, &key, &keylen)) return NULL;
      jskip_ws(ps);
      if (ps->i >= ps->n || ps->p[ps->i] != ':')
        return jfail(ps, ps->i, "expected ':' after a key");
      ps->i++;
    }
    jval *m = jvalue(ps, depth + 1);
    if (!m) return NULL;
    m->key = key;
    m->keylen = keylen;
    m->keypos = keypos;
    *tail = m;
    tail = &m->next;
    v->count++;
    jskip_ws(ps);
    if (ps->i >= ps->n)
      return jfail(ps, ps->i,
                   is_obj ? "unexpected end of header inside an object"
                          : "unexpected end of header inside an array");
    uint8_t c = ps->p[ps->i++];
    if (c == ',') continue;
    if (c == (is_obj ? '}' : ']')) return v;
    return jfail(ps, ps->i - 1, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int jliteral(jparser *ps, const char *lit) {
  size_t l = strlen(lit);
  if (ps->n - ps->i < l || memcmp(ps->p + ps->i, lit, l) != 0) return 0;
  ps->i += l;
  return 1;
}

static jval *jvalue(jparser *ps, int depth) {
  jskip_ws(ps);
  if (ps->i >= ps->n) return jfail(ps, ps->i, "unexpected end of header, expected a value");
  size_t start = ps->i;
  uint8_t c = ps->p[ps->i];
  if (c == '{') return jcontainer(ps, depth, 1);
  if (c == '[') return jcontainer(ps, depth, 0);
  if (c == '"') {
    jval *v = jnew(ps, J_STR, start);
    if (!v || !jstring(ps, &v->s, &v->slen)) return NULL;
    return v;
  }
  if (c == '-' || is_digit(c)) return jnumber(ps);
  if (jliteral(ps, "true")) return jnew(ps, J_TRUE, start);
  if (jliteral(ps, "false")) return jnew(ps, J_FALSE, start);
  if (jliteral(ps, "null")) return jnew(ps, J_NULL, start);
  return jfail(ps, start, "unexpected character, expected a value");
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
static ixl_status read_entry(const st_where *w, const jval *e, st_tensor *t) {
  char nb[128], sb[256];
  const char *nm = show(t->name, nb, sizeof nb);
  if (e->type != J_OBJ)
    return st_err(w, IXL_ERR_FORMAT,
                  "tensor %s (header byte %zu): the entry is %s, expected an object with dtype, "
                  "shape and data_offsets",
                  nm, e->pos, jtype_names[e->type]);
  const jval *dt = NULL, *shape = NULL, *offs = NULL;
  for (const jval *m = e->child; m; m = m->next) {
    const jval **slot = NULL;
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
                    nm, show(m->key, sb, sizeof sb), m->keypos);
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
  if (dt->type != J_STR)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: dtype is %s, expected a string such as \"F32\"",
                  nm, jtype_names[dt->type]);
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
                  nm, show(dt->s, sb, sizeof sb));
  if (shape->type != J_ARR)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: shape is %s, expected an array of integers", nm,
                  jtype_names[shape->type]);
  if (shape->count > ST_MAX_DIMS)
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: shape has %lld dims, at most %d are supported", nm,
                  (long long)shape->count, ST_MAX_DIMS);
  t->ndim = (int32_t)shape->count;
  int d = 0;
  for (const jval *m = shape->child; m; m = m->next, d++) {
    if (m->type != J_INT || m->i < 0)
      return st_err(w, IXL_ERR_FORMAT,
                    "tensor %s: shape[%d] (header byte %zu) is %s%s%s, expected an integer >= 0",
                    nm, d, m->pos, m->type == J_INT ? "negative" : jtype_names[m->type],
                    m->type == J_NUM ? " " : "", m->type == J_NUM ? m->s : "");
    t->shape[d] = m->i;
  }
  int64_t numel = 1, nbytes;
  for (d = 0; d < t->ndim; d++)
    if (!ixl_mul_ok(numel, t->shape[d], &numel)) break;
  show_shape(t->shape, t->ndim, sb, sizeof sb);
  if (d < t->ndim || !ixl_mul_ok(numel, (int64_t)ixl_dtype_size((ixl_dtype)t->dtype), &nbytes))
    return st_err(w, IXL_ERR_FORMAT, "tensor %s: shape %s is too large (its size overflows int64)",
                  nm, sb);
  if (offs->type != J_ARR || offs->count != 2)
    return st_err(w, IXL_ERR_FORMAT,
                  "tensor %s: data_offsets (header byte %zu) must be an array [begin, end]", nm,
                  offs->pos);
  const jval *b = offs->child, *en = offs->child->next;
  if (b->type != J_INT || en->type != J_INT || b->i < 0 || en->i < 0)
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
  size_t bad = utf8_check(hdr, hlen);
  if (bad < hlen)
    return st_err(w, IXL_ERR_FORMAT, "header is not valid UTF-8 at header byte %zu (file byte %zu)",
                  bad, bad + 8);
  arena a = {NULL};
  jparser ps = {hdr, hlen, 0, &a, 0, 0, {0}};
  ixl_status st = IXL_OK;
  jval *root = jvalue(&ps, 0);
  if (root) {
    jskip_ws(&ps);
    if (ps.i < ps.n) root = jfail(&ps, ps.i, "unexpected data after the header's JSON object");
  }
  if (!root) {
    st = st_err(w, ps.oom ? IXL_ERR_OOM : IXL_ERR_FORMAT,
                "bad JSON at header byte %zu (file byte %zu): %s", ps.err_pos, ps.err_pos + 8,
                ps.err);
    goto done;
  }
  if (root->type != J_OBJ) {
    st = st_err(w, IXL_ERR_FORMAT, "the header is %s, expected a JSON object",
                jtype_names[root->type]);
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
  for (const jval *m = root->child; m; m = m->next) {
    if ((st = c_string(w, m->key, m->keylen, m->keypos, "a tensor name"))) goto done;
    if (!strcmp(m->key, "__metadata__")) {
      if (seen_meta++) {
        st = st_err(w, IXL_ERR_FORMAT, "__metadata__ given twice (header byte %zu)", m->keypos);
        goto done;
      }
      if (m->type != J_OBJ) {
        st = st_err(w, IXL_ERR_FORMAT, "__metadata__ is %s, expected an object of strings",
                    jtype_names[m->type]);
        goto done;
      }
      for (const jval *k = m->child; k; k = k->next) {
        if ((st = c_string(w, k->key, k->keylen, k->keypos, "a __metadata__ key"))) goto done;
        if (k->type != J_STR) {
          st = st_err(w, IXL_ERR_FORMAT, "__metadata__ value of %s is %s: values must be strings",
                      show(k->key, nb, sizeof nb), jtype_names[k->type]);
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
                              show(f->mkey[d1], nb, sizeof nb));
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
                        show(f->t[d1].name, nb, sizeof nb), (long long)f->t[d1].hdr_pos,
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
                    show(f->t[prev].name, nb, sizeof nb), (long long)f->t[prev].begin,
                    (long long)f->t[prev].end, show(t->name, nb2, sizeof nb2), (long long)t->begin,
                    (long long)t->end);
      else if (t->begin > pos)
        st = st_err(w, IXL_ERR_FORMAT,
                    "no tensor covers data bytes [%lld, %lld) before %s: the data_offsets must "
                    "cover the data buffer contiguously",
                    (long long)pos, (long long)t->begin, show(t->name, nb, sizeof nb));
      else if (t->end > data_bytes)
        st = st_err(w, IXL_ERR_FORMAT,
                    "tensor %s: data_offsets [%lld, %lld] run past the end of the data buffer "
                    "(%lld bytes follow the header): the file is truncated or the offsets are "
                    "wrong",
                    show(t->name, nb, sizeof nb), (long long)t->begin, (long long)t->end,
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
                  (long long)(data_bytes - pos), show(f->t[prev].name, nb, sizeof nb),
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
  arena_free(&a);
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
  size_t n = strlen(s), bad = utf8_check((const uint8_t *)s, n);
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
  const char *nm = show(name, nb, sizeof nb);
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
  show_shape(shape, ndim, sb, sizeof sb);
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

/* A growable text buffer for the header. */
typedef struct {
  char *p;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->n + n + 1 > b->cap) {
    size_t nc = b->cap ? b->cap * 2 : 4096;
    while (nc < b->n + n + 1) nc *= 2;
    char *p = realloc(b->p, nc);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->p = p;
    b->cap = nc;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}
static void sb_str(sbuf *b, const char *s) {
  sb_put(b, s, strlen(s));
}

/* A JSON string: quotes, backslashes and control characters escaped; UTF-8 kept as is. */
static void sb_json(sbuf *b, const char *s) {
  sb_put(b, "\"", 1);
  for (const char *p = s; *p; p++) {
    unsigned char c = (unsigned char)*p;
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      sb_put(b, esc, 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      sb_put(b, esc, 6);
    } else {
      sb_put(b, p, 1);
    }
  }
  sb_put(b, "\"", 1);
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
  sbuf b = {NULL, 0, 0, 0};
  char num[64];
  sb_str(&b, "{");
  int first = 1;
  if (w->nmeta) {
    sb_str(&b, "\"__metadata__\":{");
    for (int32_t i = 0; i < w->nmeta; i++) {
      if (i) sb_str(&b, ",");
      sb_json(&b, w->mkey[i]);
      sb_str(&b, ":");
      sb_json(&b, w->mval[i]);
    }
    sb_str(&b, "}");
    first = 0;
  }
  for (int32_t j = 0; j < k; j++) {
    const st_tensor *t = &w->t[order[j]];
    if (!first) sb_str(&b, ",");
    first = 0;
    sb_json(&b, t->name);
    sb_str(&b, ":{\"dtype\":\"");
    sb_str(&b, st_dtype_name(t->dtype));
    sb_str(&b, "\",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) {
      snprintf(num, sizeof num, "%s%lld", d ? "," : "", (long long)t->shape[d]);
      sb_str(&b, num);
    }
    snprintf(num, sizeof num, "],\"data_offsets\":[%lld,%lld]}", (long long)t->begin,
             (long long)t->end);
    sb_str(&b, num);
  }
  sb_str(&b, "}");
  while (!b.oom && (8 + b.n) % 8) sb_str(&b, " "); /* the reference pads with spaces */
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
