/* Files that are either wholly written or not there: the one atomic writer behind every
 * output the core writes (checkpoints, sample PNGs, config.resolved.yaml, memory.json, the
 * rewritten CSVs of a resumed run). */
#ifndef GANFW_FILE_H
#define GANFW_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/status.h"

/* Fills the temporary file f; a failure returns its status with the error recorded (the
 * writer's message is kept, naming what failed). Write errors of f itself need no check
 * here: the caller sees them in ferror and at the flush. */
typedef ganfw_status (*ganfw_file_writer)(FILE *f, void *ud);

/* Writes `path` atomically: write(f, ud) fills a new temporary file beside it
 * (`path`.tmp.XXXXXX, mode 0644), which is flushed, fsync'ed and renamed over `path`; then
 * the directory is fsync'ed so that the rename survives a power cut (a directory that
 * cannot be fsync'ed is not an error). On any failure the temporary file is removed,
 * `path` is left as it was, and the status is the writer's or GANFW_ERR_IO with a message
 * naming `path` and the cause. */
ganfw_status ganfw_file_write_atomic(const char *path, ganfw_file_writer write, void *ud);

/* Removes what a write killed half-way (kill -9, power cut) left in `dir`: regular files
 * named like the writer's temporaries, `<name>.tmp.XXXXXX` with six letters or digits.
 * Not recursive. Returns how many were removed (0 when dir cannot be read). */
int64_t ganfw_file_remove_stale_temporaries(const char *dir);

#endif
