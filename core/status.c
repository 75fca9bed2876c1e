/* status.c - status names and messages from the one X-macro list, and the per-context
 * last-error message. */
#include "ctx.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define IXL_NAME_(name, value, msg) [value] = #name,
#define IXL_MSG_(name, value, msg) [value] = msg,
static const char *const status_names[] = {IXL_STATUS_LIST(IXL_NAME_)};
static const char *const status_msgs[] = {IXL_STATUS_LIST(IXL_MSG_)};

const char *ixl_status_name(ixl_status s) {
  if ((int)s < 0 || (int)s >= IXL_STATUS_COUNT_) return "IXL_ERR_UNKNOWN";
  return status_names[s];
}

const char *ixl_status_message(ixl_status s) {
  if ((int)s < 0 || (int)s >= IXL_STATUS_COUNT_) return "unknown status";
  return status_msgs[s];
}

ixl_status ixl_set_error(ixl_ctx *ctx, ixl_status status, const char *fmt, ...) {
  if (!ctx) return status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
  va_end(ap);
  return status;
}

const char *ixl_last_error(const ixl_ctx *ctx) {
  if (!ctx) return "no context";
  return ctx->err;
}

void ixl_clear_error(ixl_ctx *ctx) {
  if (ctx) ctx->err[0] = '\0';
}

const char *ixl_version(void) { return "0.1.0"; }
