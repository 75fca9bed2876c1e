/* json.h - the text tools of core/, private to it: UTF-8 checks, text made printable for
 * messages, the JSON subset parser that reads safetensors headers (values in an arena), and a
 * growable string buffer that writes JSON strings. Nothing here knows safetensors, except that
 * the parser's messages call the text "the header" (its one reader, core/safetensors.c, reports
 * them as they are). */
#ifndef IXL_JSON_H
#define IXL_JSON_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- text */
/* Length of the valid UTF-8 sequence at s (n >= 1 bytes left), or 0 when invalid (overlongs,
 * surrogates and code points past U+10FFFF are invalid). */
size_t ixl_utf8_len(const uint8_t *s, size_t n);
/* Byte offset of the first invalid UTF-8 sequence, or n when all valid. */
size_t ixl_utf8_check(const uint8_t *s, size_t n);
/* A name made printable for a message into buf (cap >= 16): quotes, at most ~80 bytes, odd
 * bytes as \xNN. Returns buf. */
const char *ixl_show_text(const char *s, char *buf, size_t cap);
/* "[d0, d1, ...]" into buf. */
void ixl_show_shape(const int64_t *shape, int ndim, char *buf, size_t cap);

/* ---------------------------------------------------------------- arena */
/* Values live in an arena freed at once: parse errors need no unwinding. Start it as
 * {NULL}; it owns every block it hands out until ixl_arena_free. */
typedef struct ixl_arena_chunk {
  struct ixl_arena_chunk *next;
  size_t used, cap;
  _Alignas(16) unsigned char mem[];
} ixl_arena_chunk;

typedef struct {
  ixl_arena_chunk *head;
} ixl_arena;

/* 16-byte aligned, or NULL when out of memory. */
void *ixl_arena_alloc(ixl_arena *a, size_t bytes);
void ixl_arena_free(ixl_arena *a);

/* ---------------------------------------------------------------- JSON values */
enum {
  IXL_J_OBJ, IXL_J_ARR, IXL_J_STR, IXL_J_INT, IXL_J_NUM, IXL_J_TRUE, IXL_J_FALSE, IXL_J_NULL
};
/* "an object", "an array", "a string", ... for messages. */
const char *ixl_json_type_name(int type);

typedef struct ixl_jval {
  int type;
  size_t pos; /* header byte where the value starts */
  int64_t i;  /* IXL_J_INT */
  char *s;    /* IXL_J_STR: decoded, NUL-terminated; IXL_J_NUM: the literal (at most 40 bytes) */
  size_t slen;
  char *key; /* member of an object: its key (decoded) */
  size_t keylen, keypos;
  struct ixl_jval *child; /* IXL_J_OBJ / IXL_J_ARR: first member */
  struct ixl_jval *next;  /* next sibling */
  int64_t count;
} ixl_jval;

/* Why a parse failed: the byte where, the message, and whether it was memory. */
typedef struct {
  size_t pos;
  int oom;
  char msg[160];
} ixl_json_error;

/* Parses bytes [0, n) as one JSON value with only whitespace around it. Integers within int64
 * are IXL_J_INT, every other number IXL_J_NUM (its literal kept); strings are decoded (they may
 * hold NULs, see slen). Every value is carved from `a` (the caller frees it, also on failure).
 * Returns the root, or NULL with *err filled. Nesting deeper than 64 is refused. */
ixl_jval *ixl_json_parse(const uint8_t *bytes, size_t n, ixl_arena *a, ixl_json_error *err);

/* ---------------------------------------------------------------- string buffer */
/* A growable text buffer, NUL-terminated; start it as {NULL, 0, 0, 0}, free(p) when done. After
 * an allocation fails, oom is set and every later put is a no-op. */
typedef struct {
  char *p;
  size_t n, cap;
  int oom;
} ixl_sbuf;

void ixl_sb_put(ixl_sbuf *b, const char *s, size_t n);
void ixl_sb_str(ixl_sbuf *b, const char *s);
/* A JSON string: quotes, backslashes and control characters escaped; UTF-8 kept as is. */
void ixl_sb_json(ixl_sbuf *b, const char *s);

#endif
