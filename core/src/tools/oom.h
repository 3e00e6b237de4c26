/* What an out-of-memory failure is explained with, beyond the advice and the recorder that
 * plan.h declares: the picture the flight recorder draws (which events, which marks), and
 * the advice for a model whose state alone (parameters, gradients, optimizer state) does
 * not fit, which find-batch also gives when no batch size fits. */
#ifndef GANFW_OOM_H
#define GANFW_OOM_H

#include <stddef.h>
#include <stdint.h>

#include "ganfw/status.h"
#include "tools/timeline.h"
#include "runtime/trace_event.h"
#include "plan/probe.h"

/* --- the flight recorder's picture (oom_record.c) ------------------------------------------ */

typedef struct ganfw_oom_picture {
  const ganfw_trace_event *ev; /* the events drawn: the failing step's, borrowed from the
                                  replay, or `owned` for a failure in the set-up */
  int64_t n;
  int32_t setup;                  /* 1: the request failed in the set-up, before any step */
  int64_t memory_limit;           /* the limit the replay ran under (the line drawn); 0: none */
  ganfw_timeline_summary summary; /* what the picture marks: the peak and its holders, the
                                     failed request (oom_index, oom_owner, oom_bytes, ...) */
  ganfw_trace_event *owned;       /* a set-up failure's events behind a STEP event made for
                                     them (step 0); freed by ganfw_oom_picture_free */
} ganfw_oom_picture;

/* The picture oom/step.png shows for `replay` (the config's traced plan under its
 * memory_limit): the step of its last OOM event (or the set-up, when that is where it
 * ran out; the last complete step when it did not run out), with the failed request and
 * the limit marked. `out` borrows the replay's events and names: it is valid while the
 * replay is. GANFW_ERR_CONFIG when the replay holds no events; the timeline's errors.
 * Free with ganfw_oom_picture_free (also after a failure). */
ganfw_status ganfw_oom_picture_make(const ganfw_probe_result *replay, ganfw_oom_picture *out);
void ganfw_oom_picture_free(ganfw_oom_picture *pic); /* accepts NULL */

/* A config whose plan ran out of memory in its set-up keeps no events (the session and its
 * allocator are gone): *out gets them from the set-up's requests, taken in order from a
 * traced plan without the limit and served again by an allocator with `memory_limit` on
 * the meta backend (device.empty_cache as the config says) up to the one that fails. The
 * events and their owners (trace, n_trace, trace_names), oom, oom_where "set-up",
 * oom_report and memory_limit are set; the same allocator rules and requests make the
 * events the limited run made, unless a planned layout's segment came first. An OOM is
 * not an error; a request that does not fail leaves oom 0. Free with
 * ganfw_probe_result_free (also after a failure). */
ganfw_status ganfw_oom_setup_replay(const ganfw_run_config *config, int64_t memory_limit,
                                    ganfw_probe_result *out);

/* The set-up replay (as ganfw_oom_setup_replay makes it) that the last ganfw_oom_advice
 * made for a config of the same file as `config`, when its plan ran out of memory in the
 * set-up; NULL otherwise. ganfw_oom_record draws a set-up failure from it: the plan it is
 * given holds no events there, and the advice comes first. Owned by the advice, valid until
 * its next call. */
const ganfw_probe_result *ganfw_oom_advice_setup_replay(const ganfw_run_config *config);

/* --- the model's state (oom_advice.c) ----------------------------------------------------------
 */

/* When the model's state alone, as the config's set-up holds it on one rank (parameters +
 * gradients + optimizer state + gradient buckets, from a plan without a limit), is more
 * than `budget` bytes (named `budget_name` in the text, e.g. "the plans' limit"): writes
 * into buf (NUL-terminated, n >= 1) what it is by category, by how much it is over, and
 * what reduces it (a smaller model; an optimizer with less state and the bytes each saves;
 * ZeRO over ranks, memory: [{plugin: zero}]), each planned on the meta backend, a variant
 * fitting when its planned reserved peak is within the budget; returns 1. Returns 0 with
 * buf "" when the state fits or the config cannot be planned. */
int ganfw_oom_state_advice(const ganfw_run_config *config, int64_t budget, const char *budget_name,
                           char *buf, size_t n);

#endif
