/* Logging for the core and (through the host table) plugins: one line per message on
 * stderr, "ganfw: " prefixed, filtered by level. */
#ifndef GANFW_LOG_H
#define GANFW_LOG_H

#include <stdarg.h>
#include <stdint.h>

void ganfw_log_set_level(int32_t level); /* GANFW_LOG_*; default INFO */
int32_t ganfw_log_level(void);
void ganfw_log(int32_t level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ganfw_logv(int32_t level, const char *fmt, va_list ap);

#endif
