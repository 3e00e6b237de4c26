/* Files that are either wholly written or not there: the one atomic writer behind every
 * output the core writes (checkpoints, sample PNGs, config.resolved.yaml, memory.json, the
 * CSV headers and the rewritten CSVs of a resumed run, compare's reports), and the
 * appender behind the rows added to a CSV (metrics.csv, eval.csv), which adds a whole row
 * or nothing. Every byte goes to the file through write(2) on the file's own descriptor
 * (the FILE a writer fills is an fopencookie stream over it), and every file is made with
 * open(2), so a test can interpose those calls (tests/faults/). */
#ifndef GANFW_FILE_H
#define GANFW_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ganfw/status.h"

/* Fills the temporary file f; a failure returns its status with the error recorded (the
 * writer's message is kept, naming what failed). Write errors of f itself need no check
 * here: the atomic writer sees them (and their errno) at the flush. */
typedef ganfw_status (*ganfw_file_writer)(FILE *f, void *ud);

/* Writes `path` atomically: write(f, ud) fills a new temporary file beside it
 * (`path`.tmp.XXXXXX, mode 0644), which is flushed, fsync'ed, closed and renamed over
 * `path`; then the folder is fsync'ed so that the rename survives a power cut (a file
 * system that cannot fsync a folder, EINVAL, is not an error; EIO is). On a failure before
 * the rename the temporary file is removed and `path` is left as it was; the status is
 * GANFW_ERR_IO with a message naming `path` and the cause (strerror) when a system call
 * failed, the first one if several did, else the writer's own. */
ganfw_status ganfw_file_write_atomic(const char *path, ganfw_file_writer write, void *ud);

/* The first line of the small file `path` (a /proc or /sys value) into buf, with its
 * newline; 0 when it cannot be read. */
int ganfw_file_read_line(const char *path, char *buf, size_t n);

/* Removes what a write killed half-way (kill -9, power cut) left in `dir`: regular files
 * named like the writer's temporaries, `<name>.tmp.XXXXXX` with six letters or digits.
 * Not recursive. Returns how many were removed (0 when dir cannot be read). */
int64_t ganfw_file_remove_stale_temporaries(const char *dir);

/* A file rows are added to, one whole row at a time. */
typedef struct ganfw_file_appender ganfw_file_appender;
/* Opens `path` for appending (created with mode 0644 when missing). *out is freed with
 * ganfw_file_append_close; NULL and GANFW_ERR_IO naming the path and the cause on
 * failure. */
ganfw_status ganfw_file_append_open(const char *path, ganfw_file_appender **out);
/* Appends bytes[0..n) (a row with its newline) with write(2). On a failure (disk full, an
 * I/O error) the file is cut back to where it ended before, so that it never ends in half
 * a row, and GANFW_ERR_IO names the path and the cause. */
ganfw_status ganfw_file_append(ganfw_file_appender *a, const char *bytes, size_t n);
/* The same for a printf-style row (at most 16 KiB). */
ganfw_status ganfw_file_appendf(ganfw_file_appender *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* The path the appender writes; owned by it. */
const char *ganfw_file_append_path(const ganfw_file_appender *a);
/* Closes the file; accepts NULL. */
void ganfw_file_append_close(ganfw_file_appender *a);

#endif
