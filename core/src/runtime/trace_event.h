/* One event of the allocator's trace (device.trace), as its readers see it: the
 * exporters (Chrome's Trace Event JSON, trace.csv), the timeline pictures and the OOM
 * flight recorder. The allocator records them (alloc.h, "trace"); a traced step opens
 * with a GANFW_TEV_STEP event followed by one GANFW_TEV_LIVE event per block live at
 * that moment, so every step can be drawn on its own. */
#ifndef GANFW_TRACE_EVENT_H
#define GANFW_TRACE_EVENT_H

#include <stdint.h>

#include "ganfw/status.h"

enum {
  GANFW_TEV_ALLOC = 0,     /* a block handed out: size = its rounded bytes */
  GANFW_TEV_FREE,          /* a block given back */
  GANFW_TEV_SEGMENT_ALLOC, /* reserved grew by size */
  GANFW_TEV_SEGMENT_FREE,  /* reserved shrank by size */
  GANFW_TEV_OOM,           /* a request of size bytes failed */
  GANFW_TEV_LIVE,          /* at a step's start: a block already live (size, category, owner) */
  GANFW_TEV_STEP,          /* a step begins (step = its number) */
  GANFW_TEV_OP_BEGIN,      /* a layer's forward/backward/recompute begins (owner = layer) */
  GANFW_TEV_OP_END,        /* ... and ends */
  GANFW_TEV_EMPTY_CACHE,   /* cached segments released: size = bytes released */
  GANFW_TEV_COUNT
};

/* What the step is doing: which net's turn, then which pass. */
enum {
  GANFW_STAGE_SETUP = 0,  /* before the first step, between steps, checkpoints, samples */
  GANFW_STAGE_D_REAL,     /* a GAN's D step on real images */
  GANFW_STAGE_D_FAKE,     /* ... on generated ones (G's forward included) */
  GANFW_STAGE_G,          /* a GAN's G step */
  GANFW_STAGE_CLASSIFIER, /* a classifier's training step */
  GANFW_STAGE_EVAL,       /* evaluation on the test split */
  GANFW_STAGE_D_PENALTY,  /* a GAN's D step: a penalty on D's input gradient (gp, r1, r2) */
  GANFW_STAGE_COUNT
};
enum {
  GANFW_PASS_NONE = 0,
  GANFW_PASS_FORWARD,
  GANFW_PASS_BACKWARD,
  GANFW_PASS_RECOMPUTE, /* gradient checkpointing's second forward inside backward */
  GANFW_PASS_OPTIMIZER,
  GANFW_PASS_COUNT
};

typedef struct ganfw_trace_event {
  int64_t t_ns;      /* since the allocator was made (monotonic clock) */
  int32_t kind;      /* GANFW_TEV_* */
  int32_t category;  /* GANFW_MEM_* for ALLOC, FREE, LIVE and OOM; -1 otherwise */
  int64_t size;      /* bytes (see the kinds) */
  uint64_t ptr;      /* the block's address (ALLOC, FREE, LIVE) or the segment's; 0 none */
  const char *owner; /* the layer or tensor, NULL when none; valid while the allocator
                        lives (or the trace file's reader that made the event) */
  int32_t step;      /* the step being run, 1-based; 0 before the first */
  int32_t stage;     /* GANFW_STAGE_* */
  int32_t pass;      /* GANFW_PASS_* */
  int32_t slack;     /* ALLOC: the block's bytes beyond the rounded request (a cached block
                        taken whole), so size - slack is what was asked for; 0 otherwise */
  int64_t allocated, reserved; /* the allocator's totals after the event */
} ganfw_trace_event;

/* "alloc", "free", "segment_alloc", "segment_free", "oom", "live", "step", "op_begin",
 * "op_end", "empty_cache"; "?" outside the range. Static strings. */
const char *ganfw_trace_kind_name(int32_t kind);
/* "setup", "D real", "D fake", "G", "classifier", "eval"; "?" outside. */
const char *ganfw_trace_stage_name(int32_t stage);
/* "", "forward", "backward", "recompute", "optimizer"; "?" outside. */
const char *ganfw_trace_pass_name(int32_t pass);

/* Copies the owner names of ev[0..n) into one new block *pool (free() it) and points the
 * events at the copies, so that they outlive the allocator they came from. *pool is NULL
 * when no event has an owner. Returns 0, or -1 when out of host memory (nothing changed). */
int ganfw_trace_own_names(ganfw_trace_event *ev, int64_t n, char **pool);

/* Picks one step out of a whole trace: [*first, *first + *count) are the events from the
 * GANFW_TEV_STEP event of step `step` up to the next STEP event (or the end). step 0
 * picks the last step whose events are complete (followed by another STEP event, or the
 * last step when the trace ends without one). GANFW_ERR_INVALID_ARG naming the steps the
 * trace holds when it has no such step (or no STEP event at all). */
ganfw_status ganfw_trace_find_step(const ganfw_trace_event *ev, int64_t n, int32_t step,
                                   int64_t *first, int64_t *count);

#endif
