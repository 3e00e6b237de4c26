/* The core's error channel: a failing function records one message (naming the file, key,
 * layer or plugin and what to do) and returns its status; the caller that ends the
 * program prints it once. Per thread. */
#ifndef GANFW_ERROR_H
#define GANFW_ERROR_H

#include <stdarg.h>

#include "ganfw/status.h"

/* Records the message (printf-style) for this thread, replacing any earlier one, and
 * returns `code`. */
ganfw_status ganfw_error_set(ganfw_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
ganfw_status ganfw_error_setv(ganfw_status code, const char *fmt, va_list ap);
/* Prepends "<prefix>: " to the recorded message (context added on the way up) and
 * returns `code`. */
ganfw_status ganfw_error_wrap(ganfw_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The last message of this thread; "" when none. Valid until the next set/wrap/clear. */
const char *ganfw_error_message(void);
ganfw_status ganfw_error_code(void);
void ganfw_error_clear(void);
/* "ok", "config error", ... for a status; "unknown status" outside the range. */
const char *ganfw_status_name(ganfw_status code);

#endif
