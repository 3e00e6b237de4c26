/* Log lines on stderr (see log.h). */
#include "base/log.h"

#include <stdio.h>

#include "ganfw/host.h"

static int32_t log_level = GANFW_LOG_INFO;

void ganfw_log_set_level(int32_t level) {
  log_level = level;
}

int32_t ganfw_log_level(void) {
  return log_level;
}

void ganfw_logv(int32_t level, const char *fmt, va_list ap) {
  static const char *const prefix[] = {"debug: ", "", "warning: ", "error: "};
  if (level < log_level) return;
  if (level < GANFW_LOG_DEBUG || level > GANFW_LOG_ERROR) level = GANFW_LOG_ERROR;
  fprintf(stderr, "ganfw: %s", prefix[level]);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
}

void ganfw_log(int32_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  ganfw_logv(level, fmt, ap);
  va_end(ap);
}
