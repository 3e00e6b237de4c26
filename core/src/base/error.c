/* The per-thread error message behind ganfw_status (see error.h). */
#include "base/error.h"

#include <stdio.h>
#include <string.h>

#define GANFW_ERROR_MAX 4096

static _Thread_local char error_msg[GANFW_ERROR_MAX];
static _Thread_local ganfw_status error_code;

static const char *const status_names[] = {
    "ok",
    "invalid argument",
    "config error",
    "plugin error",
    "out of memory",
    "I/O error",
    "backend error",
    "numeric error",
    "unsupported",
    "interrupted",
    "internal error",
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) == GANFW_STATUS_COUNT,
               "status_names must name every ganfw_status");

ganfw_status ganfw_error_setv(ganfw_status code, const char *fmt, va_list ap) {
  vsnprintf(error_msg, sizeof error_msg, fmt, ap);
  error_code = code;
  return code;
}

ganfw_status ganfw_error_set(ganfw_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ganfw_error_setv(code, fmt, ap);
  va_end(ap);
  return code;
}

ganfw_status ganfw_error_wrap(ganfw_status code, const char *fmt, ...) {
  char prefix[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(prefix, sizeof prefix, fmt, ap);
  va_end(ap);
  char old[GANFW_ERROR_MAX];
  memcpy(old, error_msg, sizeof old);
  size_t n = strlen(prefix);
  memcpy(error_msg, prefix, n + 1);
  if (old[0] && n + 2 < sizeof error_msg) {
    memcpy(error_msg + n, ": ", 3);
    size_t room = sizeof error_msg - n - 3;
    size_t len = strlen(old);
    if (len > room) len = room;
    memcpy(error_msg + n + 2, old, len);
    error_msg[n + 2 + len] = '\0';
  }
  error_code = code;
  return code;
}

const char *ganfw_error_message(void) {
  return error_msg;
}

ganfw_status ganfw_error_code(void) {
  return error_code;
}

void ganfw_error_clear(void) {
  error_msg[0] = '\0';
  error_code = GANFW_OK;
}

void ganfw_error_save(ganfw_error_saved *saved, ganfw_status code) {
  saved->code = code;
  snprintf(saved->msg, sizeof saved->msg, "%s", code == GANFW_OK ? "" : error_msg);
}

ganfw_status ganfw_error_first(const ganfw_error_saved *saved, ganfw_status later) {
  if (saved->code == GANFW_OK) return later;
  if (later == GANFW_OK)
    snprintf(error_msg, sizeof error_msg, "%s", saved->msg);
  else { /* "<first>; later: <then>", cut to the buffer */
    char then[GANFW_ERROR_MAX];
    memcpy(then, error_msg, sizeof then);
    size_t n = strlen(saved->msg);
    if (n > sizeof error_msg - 1) n = sizeof error_msg - 1;
    memcpy(error_msg, saved->msg, n);
    const char *parts[] = {"; later: ", then};
    for (int i = 0; i < 2; i++) {
      size_t k = strlen(parts[i]);
      if (k > sizeof error_msg - 1 - n) k = sizeof error_msg - 1 - n;
      memcpy(error_msg + n, parts[i], k);
      n += k;
    }
    error_msg[n] = '\0';
  }
  error_code = saved->code;
  return saved->code;
}

const char *ganfw_status_name(ganfw_status code) {
  if (code < 0 || code >= GANFW_STATUS_COUNT) return "unknown status";
  return status_names[code];
}
