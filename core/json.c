/* json.c - the text tools of core/ (json.h): UTF-8 checks, printable names for messages, the
 * JSON subset parser of safetensors headers and the string buffer its writer uses. */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IXL_JSON_MAX_DEPTH 64 /* JSON nesting; a valid safetensors header needs 3 */

/* ---------------------------------------------------------------- text */
/* Length of the valid UTF-8 sequence at s (n bytes left), or 0 when invalid (overlongs,
 * surrogates and code points past U+10FFFF are invalid). */
size_t ixl_utf8_len(const uint8_t *s, size_t n) {
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
size_t ixl_utf8_check(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t l = ixl_utf8_len(s + i, n - i);
    if (!l) return i;
    i += l;
  }
  return n;
}

/* A name made printable for a message: quotes, at most ~80 bytes, odd bytes as \xNN. */
const char *ixl_show_text(const char *s, char *buf, size_t cap) {
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

void ixl_show_shape(const int64_t *shape, int ndim, char *buf, size_t cap) {
  size_t o = 0;
  o += (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < ndim && o < cap; i++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%lld", i ? ", " : "", (long long)shape[i]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* ---------------------------------------------------------------- arena and parser */
void *ixl_arena_alloc(ixl_arena *a, size_t bytes) {
  bytes = (bytes + 15) & ~(size_t)15;
  if (!a->head || a->head->cap - a->head->used < bytes) {
    size_t cap = bytes > 65536 ? bytes : 65536;
    ixl_arena_chunk *c = malloc(sizeof *c + cap);
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

void ixl_arena_free(ixl_arena *a) {
  while (a->head) {
    ixl_arena_chunk *n = a->head->next;
    free(a->head);
    a->head = n;
  }
}

static const char *const jtype_names[] = {"an object", "an array", "a string", "an integer",
                                          "a number",  "true",     "false",    "null"};

const char *ixl_json_type_name(int type) {
  return type >= IXL_J_OBJ && type <= IXL_J_NULL ? jtype_names[type] : "a value";
}

typedef struct {
  const uint8_t *p;
  size_t n, i;
  ixl_arena *a;
  int oom;
  size_t err_pos;
  char err[160];
} jparser;

static ixl_jval *jfail(jparser *ps, size_t pos, const char *msg) {
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

/* At an opening quote: decodes the string into the ixl_arena. The decoded text is never longer
 * than the raw text, so one allocation of the raw length suffices. */
static int jstring(jparser *ps, char **out, size_t *out_len) {
  size_t start = ps->i++;
  size_t j = ps->i;
  while (j < ps->n && ps->p[j] != '"') j += ps->p[j] == '\\' ? 2 : 1;
  if (j >= ps->n) return jfail(ps, start, "unterminated string"), 0;
  char *buf = ixl_arena_alloc(ps->a, j - ps->i + 1);
  if (!buf) return ps->oom = 1, jfail(ps, start, "out of memory"), 0;
  size_t o = 0;
  while (ps->p[ps->i] != '"') {
    uint8_t c = ps->p[ps->i];
    if (c < 0x20) return jfail(ps, ps->i, "control character inside a string (escape it)"), 0;
    if (c != '\\') {
      size_t l = ixl_utf8_len(ps->p + ps->i, ps->n - ps->i);
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

static ixl_jval *jnew(jparser *ps, int type, size_t pos) {
  ixl_jval *v = ixl_arena_alloc(ps->a, sizeof *v);
  if (!v) return ps->oom = 1, jfail(ps, pos, "out of memory");
  memset(v, 0, sizeof *v);
  v->type = type;
  v->pos = pos;
  return v;
}

static ixl_jval *jvalue(jparser *ps, int depth);

static ixl_jval *jnumber(jparser *ps) {
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
  ixl_jval *v = jnew(ps, IXL_J_INT, start);
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
    v->type = IXL_J_NUM;
    size_t len = j - start > 40 ? 40 : j - start;
    v->s = ixl_arena_alloc(ps->a, len + 1);
    if (!v->s) return ps->oom = 1, jfail(ps, start, "out of memory");
    memcpy(v->s, ps->p + start, len);
    v->s[len] = '\0';
  }
  ps->i = j;
  return v;
}

static ixl_jval *jcontainer(jparser *ps, int depth, int is_obj) {
  size_t start = ps->i++;
  if (depth > IXL_JSON_MAX_DEPTH) return jfail(ps, start, "nested too deeply");
  ixl_jval *v = jnew(ps, is_obj ? IXL_J_OBJ : IXL_J_ARR, start);
  if (!v) return NULL;
  ixl_jval **tail = &v->child;
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
    ixl_jval *m = jvalue(ps, depth + 1);
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

static ixl_jval *jvalue(jparser *ps, int depth) {
  jskip_ws(ps);
  if (ps->i >= ps->n) return jfail(ps, ps->i, "unexpected end of header, expected a value");
  size_t start = ps->i;
  uint8_t c = ps->p[ps->i];
  if (c == '{') return jcontainer(ps, depth, 1);
  if (c == '[') return jcontainer(ps, depth, 0);
  if (c == '"') {
    ixl_jval *v = jnew(ps, IXL_J_STR, start);
    if (!v || !jstring(ps, &v->s, &v->slen)) return NULL;
    return v;
  }
  if (c == '-' || is_digit(c)) return jnumber(ps);
  if (jliteral(ps, "true")) return jnew(ps, IXL_J_TRUE, start);
  if (jliteral(ps, "false")) return jnew(ps, IXL_J_FALSE, start);
  if (jliteral(ps, "null")) return jnew(ps, IXL_J_NULL, start);
  return jfail(ps, start, "unexpected character, expected a value");
}

ixl_jval *ixl_json_parse(const uint8_t *bytes, size_t n, ixl_arena *a, ixl_json_error *err) {
  jparser ps = {bytes, n, 0, a, 0, 0, {0}};
  ixl_jval *root = jvalue(&ps, 0);
  if (root) {
    jskip_ws(&ps);
    if (ps.i < ps.n) root = jfail(&ps, ps.i, "unexpected data after the header's JSON object");
  }
  if (!root) {
    err->pos = ps.err_pos;
    err->oom = ps.oom;
    snprintf(err->msg, sizeof err->msg, "%s", ps.err);
  }
  return root;
}

/* ---------------------------------------------------------------- string buffer */
void ixl_sb_put(ixl_sbuf *b, const char *s, size_t n) {
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
void ixl_sb_str(ixl_sbuf *b, const char *s) {
  ixl_sb_put(b, s, strlen(s));
}

void ixl_sb_json(ixl_sbuf *b, const char *s) {
  ixl_sb_put(b, "\"", 1);
  for (const char *p = s; *p; p++) {
    unsigned char c = (unsigned char)*p;
    char esc[8];
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      ixl_sb_put(b, esc, 2);
    } else if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      ixl_sb_put(b, esc, 6);
    } else {
      ixl_sb_put(b, p, 1);
    }
  }
  ixl_sb_put(b, "\"", 1);
}
