/* device.memory_layout: planned. The layout the allocator serves a step from
 * (runtime/alloc.h, ganfw_alloc_set_layout), made from a traced plan of the config on the
 * caching allocator (its steps 1 and 2, plan/probe.c): the step's step-local blocks laid
 * out by plan/arena.c, the other requests left to the cache, the room the cache needs
 * below the arena, and the first step the layout holds for. */
#ifndef GANFW_LAYOUT_H
#define GANFW_LAYOUT_H

#include <stdint.h>

#include "ganfw/status.h"
#include "runtime/alloc.h"
#include "runtime/trace_event.h"

typedef struct ganfw_layout {
  ganfw_alloc_layout l; /* points into the arrays below */
  int64_t *size, *offset;
  int32_t *category;
  int64_t lower_bound;  /* the largest sum of step-local bytes live at one moment */
  int64_t n_planned;    /* requests with an offset */
  const char *strategy; /* the arena layout kept (static) */
} ganfw_layout;

/* From a plan's events (setup, step 1, step 2 at least). GANFW_ERR_INVALID_ARG when the
 * trace has no step 2; GANFW_ERR_OOM without host memory. */
ganfw_status ganfw_layout_from_trace(const ganfw_trace_event *ev, int64_t n, ganfw_layout *out);
void ganfw_layout_free(ganfw_layout *l); /* accepts NULL */

#endif
