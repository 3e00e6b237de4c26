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
/* The first failure stays the one reported. Clean-up after a failure (writing memory.json,
 * closing files) may fail too and record its own message; around it:
 *   ganfw_error_saved first;
 *   ganfw_error_save(&first, st);            (st: the status so far)
 *   st = ganfw_error_first(&first, cleanup());
 * When the saved status is a failure, its message is restored with the later failure's
 * appended as context ("...; later: ...") and the saved status returned; otherwise the
 * later status and its message stand. */
typedef struct ganfw_error_saved {
  ganfw_status code;
  char msg[4096];
} ganfw_error_saved;
void ganfw_error_save(ganfw_error_saved *saved, ganfw_status code);
ganfw_status ganfw_error_first(const ganfw_error_saved *saved, ganfw_status later);
/* "ok", "config error", ... for a status; "unknown status" outside the range. */
const char *ganfw_status_name(ganfw_status code);

#endif
