/* The allocator's trace (runtime/trace_event.h) as files: Chrome's Trace Event JSON, which
 * ui.perfetto.dev and chrome://tracing open (memory counters per category, op slices per
 * layer, phase and step slices), and the events of a run's memory.json read back for
 * `ganfw plot RUN`. */
#ifndef GANFW_TRACE_FILE_H
#define GANFW_TRACE_FILE_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/status.h"
#include "runtime/trace_event.h"

/* Writes {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}} to f. Process 1
 * is the device: thread 1 holds the steps ("step 3"), thread 2 the phases ("D fake
 * forward"), thread 3 the layers' ops ("discriminator.main.2", complete "X" events from
 * each OP_BEGIN/OP_END pair); the counters "allocated" (one series per category, bytes:
 * stacked, their sum the allocated total) and "reserved" change at every event that
 * changes them. Each step's counters restart from its LIVE snapshot, so a ring that
 * dropped its oldest events is exact again from the next step on. Times in microseconds
 * (t_ns / 1000, three decimals). `title` (may be NULL) goes to otherData.title.
 * GANFW_ERR_IO when f reports a write error. */
ganfw_status ganfw_trace_write_chrome(FILE *f, const ganfw_trace_event *ev, int64_t n,
                                      const char *title);

/* The same into the file `path`, written atomically (base/file.h): all or nothing. */
ganfw_status ganfw_trace_write_chrome_file(const char *path, const ganfw_trace_event *ev, int64_t n,
                                           const char *title);

/* Reads the trace events of a memory.json the core wrote (ganfw_alloc_trace_write_json:
 * one event a line) into a new array *ev of *n events whose owners point into *names (free()
 * both). GANFW_ERR_IO naming the path when it cannot be read; GANFW_ERR_CONFIG when it is
 * not such a file or holds no events (tracing was off: the message says to set
 * device.trace or pass --trace). */
ganfw_status ganfw_trace_read_memory_json(const char *path, ganfw_trace_event **ev, int64_t *n,
                                          char **names);

#endif
