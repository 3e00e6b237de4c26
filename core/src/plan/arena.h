/* An offline layout of one training step's step-local blocks in one arena, from the step's
 * allocator trace (runtime/trace_event.h): every block the step allocates and frees again
 * (activations, saved tensors, workspaces, temporaries) gets an offset such that no two
 * blocks live at the same time overlap. Blocks live at the step's start or still live at its
 * end (parameters, gradients, optimizer state, anything kept across steps) are persistent
 * and stay out. A few greedy layouts are tried (skyline, first fit and best fit, each by size
 * x lifetime, size, breadth and lifetime; then a squeaky wheel when none meets the bound:
 * arena.c says why) and the smallest arena is kept. `ganfw plan` reports the arena against
 * its lower bound, the largest sum of step-local bytes live at one moment. This is the plan
 * only: the step is still served by the caching allocator. */
#ifndef GANFW_ARENA_H
#define GANFW_ARENA_H

#include <stdint.h>

#include "ganfw/status.h"
#include "runtime/trace_event.h"

typedef struct ganfw_arena_block {
  const char *owner; /* borrowed from the events */
  int32_t category;
  int64_t size;        /* bytes, as the allocator rounded them */
  int64_t first, last; /* its lifetime: the indices of its ALLOC and FREE events */
  int64_t offset;      /* in the arena */
} ganfw_arena_block;

typedef struct ganfw_arena_plan {
  ganfw_arena_block *blocks; /* owned, in the order of their ALLOC events */
  int64_t n;
  int64_t arena_bytes;  /* the layout's size: the largest offset + size */
  int64_t lower_bound;  /* the largest sum of step-local bytes live at one moment */
  int64_t persistent;   /* bytes live at the step's start (its LIVE snapshot) */
  int64_t kept;         /* bytes the step allocated and did not free (stay persistent) */
  const char *strategy; /* the layout kept, e.g. "greedy by size x lifetime, skyline" (static) */
} ganfw_arena_plan;

/* Lays out one step's events (as ganfw_trace_find_step returns them). A FREE without
 * its ALLOC in the range (a block of an earlier step) is persistent, not an error.
 * GANFW_ERR_INVALID_ARG for a range that is not a step; GANFW_ERR_OOM without host memory;
 * GANFW_ERR_INTERNAL when the layout kept fails ganfw_arena_plan_valid (a bug). */
ganfw_status ganfw_arena_plan_step(const ganfw_trace_event *ev, int64_t n, ganfw_arena_plan *out);
void ganfw_arena_plan_free(ganfw_arena_plan *p); /* accepts NULL */

/* 1 when no two blocks whose lifetimes meet overlap in the arena and every block lies inside
 * it (the check the tests and the planner itself run); 0 otherwise. */
int ganfw_arena_plan_valid(const ganfw_arena_plan *p);

#endif
