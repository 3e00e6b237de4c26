/* The memory timeline of one training step, drawn from the allocator's trace events
 * (runtime/trace_event.h): live bytes stacked by category over the step's allocator
 * events, the phases (D real, D fake, G; forward, backward, recompute, optimizer) as
 * bands, reserved bytes as a line above, the peak marked with the layers that held it.
 * As SVG text (inline in memory.html, or step.svg) or as a PNG (the project's libpng
 * writer, labels in a built-in bitmap font). `ganfw plot` and `ganfw plan --plot` use it. */
#ifndef GANFW_TIMELINE_H
#define GANFW_TIMELINE_H

#include <stdint.h>
#include <stdio.h>

#include "ganfw/status.h"
#include "ganfw/tensor.h"
#include "runtime/trace_event.h"

#define GANFW_TIMELINE_TOP 5

typedef struct ganfw_timeline_holder {
  const char *owner; /* borrowed from the events; "(unnamed)" for NULL owners */
  int32_t category;  /* GANFW_MEM_* */
  int64_t bytes;     /* live bytes of (owner, category) at the peak */
} ganfw_timeline_holder;

/* What one step's events add up to. */
typedef struct ganfw_timeline_summary {
  int32_t step;                           /* the step drawn */
  int64_t n_events;                       /* events of the step (its LIVE snapshot included) */
  int64_t peak_allocated;                 /* the largest sum of live bytes over the step */
  int64_t peak_index;                     /* the event (index into the step's events) it follows */
  int64_t peak_reserved;                  /* the largest reserved over the step */
  int64_t at_peak[GANFW_MEM_COUNT];       /* live bytes per category at the allocated peak */
  int64_t peak_category[GANFW_MEM_COUNT]; /* each category's own peak over the step */
  int32_t peak_stage, peak_pass;          /* the phase of the peak event */
  ganfw_timeline_holder top[GANFW_TIMELINE_TOP]; /* the biggest holders at the peak */
  int32_t n_top;
  /* the failed request, when the range holds a GANFW_TEV_OOM event (the last one) */
  int64_t oom_index;                   /* the OOM event (index into the step's events); -1 none */
  int64_t oom_bytes;                   /* the bytes it asked for */
  int32_t oom_category;                /* GANFW_MEM_* */
  int32_t oom_stage, oom_pass;         /* its phase */
  const char *oom_owner;               /* borrowed from the event; "(unnamed)" for NULL */
  int64_t oom_allocated, oom_reserved; /* live and reserved bytes when it failed */
  ganfw_timeline_holder oom_top[GANFW_TIMELINE_TOP]; /* the biggest holders then */
  int32_t n_oom_top;
} ganfw_timeline_summary;

/* Replays one step's events (as ganfw_trace_find_step (runtime/trace_event.h) returns them: a STEP
 * event, the LIVE snapshot, then the step's own events) into *out. Live bytes per category start
 * from the LIVE events; ALLOC adds, FREE subtracts (both carry size and category); the
 * reserved line is each event's `reserved`. The holders at the peak come from the blocks
 * live right after the peak event, summed per (owner, category), largest first (ties: by
 * owner name); those at a failed request (the last OOM event: its size, category and
 * owner) likewise from the blocks live when it failed. GANFW_ERR_INVALID_ARG for an empty
 * range or one that does not start with a STEP event. */
ganfw_status ganfw_timeline_summarize(const ganfw_trace_event *ev, int64_t n,
                                      ganfw_timeline_summary *out);

typedef struct ganfw_timeline_options {
  const char *title;     /* e.g. "configs/dcgan.yaml, step 2 (plan)"; NULL: "step N" */
  int32_t width, height; /* pixels (SVG user units); 0: 1100 x 560; else 400..4096 wide and
                            240..4096 high (GANFW_ERR_INVALID_ARG outside) */
  int64_t memory_limit;  /* > 0: a horizontal line at these bytes, "memory_limit X MiB" */
} ganfw_timeline_options;

/* Writes the picture of one step's events as a self-contained SVG document (no external
 * references) to f: x = the step's allocator events in order, y = MiB with labelled
 * ticks; one filled <path class="cat-NAME"> per category that has bytes in the step,
 * stacked in GANFW_MEM_* order (param at the bottom); a legend naming each category with
 * its peak in MiB; the phases as labelled background bands; reserved as a polyline; the
 * peak as a vertical line with "peak X MiB" and the top holders; with an OOM event, the
 * failed request as a red line at that event (class "oom") with the request stacked on
 * what was live (class "oom-request"), labelled "failed: OWNER (CATEGORY) X MiB" (class
 * "oom-label"), and the holders live then instead of the peak's; with
 * opt->memory_limit, a horizontal line there (class "limit") labelled "memory_limit X MiB"
 * (class "limit-label"); and a <title> element that holds "peak X MiB allocated" (X as
 * %.2f of the exact bytes / 2^20). Errors as
 * ganfw_timeline_summarize; GANFW_ERR_IO when f reports a write error. */
ganfw_status ganfw_timeline_write_svg(FILE *f, const ganfw_trace_event *ev, int64_t n,
                                      const ganfw_timeline_options *opt);

/* The same picture rasterised to an RGB PNG at `path` (written atomically by
 * ganfw_png_write_u8), with its text drawn in a built-in bitmap font. */
ganfw_status ganfw_timeline_write_png(const char *path, const ganfw_trace_event *ev, int64_t n,
                                      const ganfw_timeline_options *opt);

/* Text as XML or HTML character data or attribute value, the one escaper for the SVG and
 * memory.html: & < > " ' escaped, control characters and invalid UTF-8 written as '?'.
 * NULL writes nothing. Errors show in ferror(f). */
void ganfw_xml_fputs(FILE *f, const char *str);

#endif
