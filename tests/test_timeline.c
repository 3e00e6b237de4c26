/* timeline: picking a step out of a trace, the replay's peak, per-category peaks and holders
 * on hand-made steps (LIVE snapshots, allocs and frees, a FREE of a LIVE block), the SVG's
 * structure (one path per category with bytes, the title's exact peak, escaped owners, the
 * reserved line, a bounded size for long steps), the PNG read back, and bad input. All
 * events are synthetic; files go to a mkdtemp directory under /tmp removed at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "io/png_io.h"
#include "tools/timeline.h"
#include "testutil.h"

#define MiB ((int64_t)1 << 20)

/* --- building steps ------------------------------------------------------------------------ */

typedef struct builder {
  ganfw_trace_event ev[128];
  int64_t n;
  int64_t allocated, reserved;
  int32_t step, stage, pass;
} builder;

static int64_t add(builder *b, int32_t kind, int32_t category, int64_t size, uint64_t ptr,
                   const char *owner) {
  CU_ASSERT_FATAL(b->n < (int64_t)(sizeof b->ev / sizeof b->ev[0]));
  if (kind == GANFW_TEV_ALLOC) b->allocated += size;
  if (kind == GANFW_TEV_FREE) b->allocated -= size;
  if (kind == GANFW_TEV_SEGMENT_ALLOC) b->reserved += size;
  if (kind == GANFW_TEV_SEGMENT_FREE) b->reserved -= size;
  int block = kind == GANFW_TEV_ALLOC || kind == GANFW_TEV_FREE || kind == GANFW_TEV_LIVE;
  b->ev[b->n] = (ganfw_trace_event){.t_ns = b->n * 1000,
                                    .kind = kind,
                                    .category = block ? category : -1,
                                    .size = size,
                                    .ptr = ptr,
                                    .owner = owner,
                                    .step = b->step,
                                    .stage = b->stage,
                                    .pass = b->pass,
                                    .allocated = b->allocated,
                                    .reserved = b->reserved};
  return b->n++;
}

static void begin_step(builder *b, int32_t step, int32_t stage, int32_t pass) {
  b->step = step;
  b->stage = stage;
  b->pass = pass;
  add(b, GANFW_TEV_STEP, -1, 0, 0, NULL);
}

/* The owner "D.conv1" once more, at another address: holders are summed by name. */
static char conv1_copy[] = "D.conv1";
static char weight_copy[] = "D.conv1.weight";

/* Step 1 of a D real pass: a LIVE snapshot (params, optimizer state, a data batch), forward
 * activations and a workspace, backward's gradient (the peak, 22 MiB + 512 B), then frees
 * and an optimizer workspace. `act_owner` names the 5 MiB activation. Returns the index of
 * the peak event. */
static int64_t build_step_a(builder *b, const char *act_owner) {
  memset(b, 0, sizeof *b);
  b->reserved = 40 * MiB;
  begin_step(b, 1, GANFW_STAGE_D_REAL, GANFW_PASS_FORWARD);
  add(b, GANFW_TEV_LIVE, GANFW_MEM_PARAM, 4 * MiB + 512, 0x1000, "D.conv1.weight");
  add(b, GANFW_TEV_LIVE, GANFW_MEM_PARAM, 2 * MiB, 0x2000, "G.fc.weight");
  add(b, GANFW_TEV_LIVE, GANFW_MEM_OPTIM_STATE, 3 * MiB, 0x3000, weight_copy);
  add(b, GANFW_TEV_LIVE, GANFW_MEM_DATA, 1 * MiB, 0x4000, NULL);
  add(b, GANFW_TEV_OP_BEGIN, -1, 0, 0, "D.conv1");
  add(b, GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, 5 * MiB, 0x5000, act_owner);
  add(b, GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, 1 * MiB, 0x5100, conv1_copy);
  add(b, GANFW_TEV_OP_END, -1, 0, 0, "D.conv1");
  add(b, GANFW_TEV_ALLOC, GANFW_MEM_WORKSPACE, 1 * MiB, 0x6000, "D.conv2");
  add(b, GANFW_TEV_FREE, GANFW_MEM_WORKSPACE, 1 * MiB, 0x6000, "D.conv2");
  add(b, GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, 2 * MiB, 0x7000, "D.conv2");
  b->pass = GANFW_PASS_BACKWARD;
  add(b, GANFW_TEV_SEGMENT_ALLOC, -1, 20 * MiB, 0xa0000, NULL);
  int64_t peak = add(b, GANFW_TEV_ALLOC, GANFW_MEM_GRAD, 4 * MiB, 0x8000, "D.conv1.weight");
  add(b, GANFW_TEV_FREE, GANFW_MEM_ACTIVATION, 2 * MiB, 0x7000, "D.conv2");
  add(b, GANFW_TEV_FREE, GANFW_MEM_ACTIVATION, 5 * MiB, 0x5000, act_owner);
  add(b, GANFW_TEV_FREE, GANFW_MEM_ACTIVATION, 1 * MiB, 0x5100, conv1_copy);
  b->pass = GANFW_PASS_OPTIMIZER;
  add(b, GANFW_TEV_ALLOC, GANFW_MEM_WORKSPACE, 3 * MiB, 0x9000, "adam");
  add(b, GANFW_TEV_FREE, GANFW_MEM_WORKSPACE, 3 * MiB, 0x9000, "adam");
  add(b, GANFW_TEV_SEGMENT_FREE, -1, 20 * MiB, 0xa0000, NULL);
  return peak;
}

/* --- files --------------------------------------------------------------------------------- */

static const char *tmp_path(const char *name) {
  static char buf[4][512];
  static int next;
  const char *tmp_root = gt_tmp_root("timeline");
  char *p = buf[next++ % 4];
  snprintf(p, 512, "%s/%s", tmp_root, name);
  return p;
}

/* The SVG of a step as a string (malloc'd, caller frees); NULL when writing failed. */
static char *svg_of(const ganfw_trace_event *ev, int64_t n, const ganfw_timeline_options *opt) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  ganfw_status st = ganfw_timeline_write_svg(f, ev, n, opt);
  if (st) fprintf(stderr, "write_svg: %s\n", ganfw_error_message());
  fclose(f);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  if (st) {
    free(text);
    return NULL;
  }
  return text;
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* The fill colour (0xRRGGBB) of the first element whose attributes hold `attr`; -1 none. */
static long fill_after(const char *svg, const char *attr) {
  const char *p = strstr(svg, attr);
  if (!p) return -1;
  const char *end = strchr(p, '>');
  const char *f = strstr(p, "fill=\"#");
  if (!f || (end && f > end)) return -1;
  return strtol(f + 7, NULL, 16);
}

/* --- find_step ----------------------------------------------------------------------------- */

static void test_find_step(void) {
  builder b = {0};
  add(&b, GANFW_TEV_ALLOC, GANFW_MEM_PARAM, MiB, 0x10, "w"); /* setup, before any step */
  begin_step(&b, 1, GANFW_STAGE_G, GANFW_PASS_FORWARD);      /* 1 */
  add(&b, GANFW_TEV_LIVE, GANFW_MEM_PARAM, MiB, 0x10, "w");
  add(&b, GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, MiB, 0x20, "a");
  add(&b, GANFW_TEV_FREE, GANFW_MEM_ACTIVATION, MiB, 0x20, "a");
  begin_step(&b, 2, GANFW_STAGE_G, GANFW_PASS_FORWARD); /* 5 */
  add(&b, GANFW_TEV_LIVE, GANFW_MEM_PARAM, MiB, 0x10, "w");
  add(&b, GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, MiB, 0x20, "a");
  begin_step(&b, 3, GANFW_STAGE_G, GANFW_PASS_FORWARD); /* 8: still running */
  add(&b, GANFW_TEV_LIVE, GANFW_MEM_PARAM, MiB, 0x10, "w");

  int64_t first = -1, count = -1;
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, 1, &first, &count), GANFW_OK);
  CU_ASSERT(first == 1 && count == 4);
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, 2, &first, &count), GANFW_OK);
  CU_ASSERT(first == 5 && count == 3);
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, 3, &first, &count), GANFW_OK);
  CU_ASSERT(first == 8 && count == 2);
  /* 0: the last complete step (3 is not followed by another step event) */
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, 0, &first, &count), GANFW_OK);
  CU_ASSERT(first == 5 && count == 3);
  /* a trace of one step: that step */
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, 5, 0, &first, &count), GANFW_OK);
  CU_ASSERT(first == 1 && count == 4);

  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, 7, &first, &count), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "no step 7"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "steps 1-3"));
  CU_ASSERT(first == 0 && count == 0);

  /* the steps are listed as ranges */
  b.ev[8].step = 5;
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, 4, &first, &count), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "steps 1-2, 5"));
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, 5, &first, &count), GANFW_OK);
  CU_ASSERT(first == 8 && count == 2);

  /* no step event at all */
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, 1, 0, &first, &count), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "no step"));
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, 0, 0, &first, &count), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, 1, NULL, &count), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_trace_find_step(b.ev, b.n, -1, &first, &count), GANFW_ERR_INVALID_ARG);

  /* a step event with step 0 ends a step (what follows is between steps, e.g. a sample) */
  builder m = {0};
  begin_step(&m, 1, GANFW_STAGE_G, GANFW_PASS_FORWARD); /* 0 */
  add(&m, GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, MiB, 0x20, "a");
  begin_step(&m, 0, GANFW_STAGE_SETUP, GANFW_PASS_NONE); /* 2: step 1 ends */
  add(&m, GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, MiB, 0x40, "sample");
  begin_step(&m, 2, GANFW_STAGE_G, GANFW_PASS_FORWARD); /* 4: runs out of memory */
  add(&m, GANFW_TEV_OOM, GANFW_MEM_ACTIVATION, MiB, 0, "b");
  CU_ASSERT_EQUAL(ganfw_trace_find_step(m.ev, m.n, 1, &first, &count), GANFW_OK);
  CU_ASSERT(first == 0 && count == 2);
  CU_ASSERT_EQUAL(ganfw_trace_find_step(m.ev, m.n, 0, &first, &count), GANFW_OK);
  CU_ASSERT(first == 0 && count == 2); /* step 2 is open */
  CU_ASSERT_EQUAL(ganfw_trace_find_step(m.ev, m.n, 2, &first, &count), GANFW_OK);
  CU_ASSERT(first == 4 && count == 2);
  CU_ASSERT_EQUAL(ganfw_trace_find_step(m.ev, m.n, 3, &first, &count), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "steps 1-2"));
}

/* --- summarize ----------------------------------------------------------------------------- */

static void test_summarize(void) {
  builder b;
  int64_t peak = build_step_a(&b, "D.conv1");
  ganfw_timeline_summary s;
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(b.ev, b.n, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s.step, 1);
  CU_ASSERT_EQUAL(s.n_events, b.n);
  CU_ASSERT_EQUAL(s.peak_allocated, 22 * MiB + 512);
  CU_ASSERT_EQUAL(s.peak_index, peak);
  CU_ASSERT_EQUAL(s.peak_reserved, 60 * MiB);
  CU_ASSERT_EQUAL(s.peak_stage, GANFW_STAGE_D_REAL);
  CU_ASSERT_EQUAL(s.peak_pass, GANFW_PASS_BACKWARD);
  const int64_t at_peak[GANFW_MEM_COUNT] = {6 * MiB + 512, 4 * MiB, 3 * MiB, 8 * MiB, 0, MiB, 0};
  const int64_t own_peak[GANFW_MEM_COUNT] = {6 * MiB + 512, 4 * MiB, 3 * MiB, 8 * MiB,
                                             3 * MiB,       MiB,     0};
  for (int c = 0; c < GANFW_MEM_COUNT; c++) {
    CU_ASSERT_EQUAL(s.at_peak[c], at_peak[c]);
    CU_ASSERT_EQUAL(s.peak_category[c], own_peak[c]);
  }
  /* summed per (owner, category) by name; the 2 MiB tie goes to D.conv2 before G.fc.weight */
  const struct {
    const char *owner;
    int32_t category;
    int64_t bytes;
  } want[] = {{"D.conv1", GANFW_MEM_ACTIVATION, 6 * MiB},
              {"D.conv1.weight", GANFW_MEM_PARAM, 4 * MiB + 512},
              {"D.conv1.weight", GANFW_MEM_GRAD, 4 * MiB},
              {"D.conv1.weight", GANFW_MEM_OPTIM_STATE, 3 * MiB},
              {"D.conv2", GANFW_MEM_ACTIVATION, 2 * MiB}};
  CU_ASSERT_EQUAL_FATAL(s.n_top, GANFW_TIMELINE_TOP);
  for (int t = 0; t < GANFW_TIMELINE_TOP; t++) {
    CU_ASSERT_STRING_EQUAL(s.top[t].owner, want[t].owner);
    CU_ASSERT_EQUAL(s.top[t].category, want[t].category);
    CU_ASSERT_EQUAL(s.top[t].bytes, want[t].bytes);
  }
}

static void test_summarize_free_live(void) {
  /* the snapshot's activation is freed before a bigger one: it is not a holder */
  builder b = {0};
  begin_step(&b, 2, GANFW_STAGE_G, GANFW_PASS_FORWARD);
  add(&b, GANFW_TEV_LIVE, GANFW_MEM_PARAM, 4 * MiB, 0x1000, "G.w");
  add(&b, GANFW_TEV_LIVE, GANFW_MEM_ACTIVATION, 3 * MiB, 0x2000, "D.out");
  add(&b, GANFW_TEV_FREE, GANFW_MEM_ACTIVATION, 3 * MiB, 0x2000, "D.out");
  int64_t peak = add(&b, GANFW_TEV_ALLOC, GANFW_MEM_ACTIVATION, 6 * MiB, 0x3000, "G.up");
  add(&b, GANFW_TEV_FREE, GANFW_MEM_ACTIVATION, 6 * MiB, 0x3000, "G.up");
  ganfw_timeline_summary s;
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(b.ev, b.n, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s.peak_allocated, 10 * MiB);
  CU_ASSERT_EQUAL(s.peak_index, peak);
  CU_ASSERT_EQUAL(s.at_peak[GANFW_MEM_ACTIVATION], 6 * MiB);
  CU_ASSERT_EQUAL(s.peak_category[GANFW_MEM_ACTIVATION], 6 * MiB);
  CU_ASSERT_EQUAL(s.peak_category[GANFW_MEM_PARAM], 4 * MiB);
  CU_ASSERT_EQUAL_FATAL(s.n_top, 2);
  CU_ASSERT_STRING_EQUAL(s.top[0].owner, "G.up");
  CU_ASSERT_EQUAL(s.top[0].bytes, 6 * MiB);
  CU_ASSERT_STRING_EQUAL(s.top[1].owner, "G.w");
  CU_ASSERT_EQUAL(s.top[1].bytes, 4 * MiB);

  /* only a snapshot (and a free): the peak follows the last LIVE event; NULL owners are
   * "(unnamed)", empty blocks hold nothing */
  builder c = {0};
  begin_step(&c, 3, GANFW_STAGE_SETUP, GANFW_PASS_NONE);
  add(&c, GANFW_TEV_LIVE, GANFW_MEM_PARAM, MiB, 0x1, "a");
  add(&c, GANFW_TEV_LIVE, GANFW_MEM_GRAD, 0, 0x2, "b");
  int64_t last_live = add(&c, GANFW_TEV_LIVE, GANFW_MEM_OTHER, 2 * MiB, 0x3, NULL);
  add(&c, GANFW_TEV_FREE, GANFW_MEM_OTHER, 2 * MiB, 0x3, NULL);
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(c.ev, c.n, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s.peak_allocated, 3 * MiB);
  CU_ASSERT_EQUAL(s.peak_index, last_live);
  CU_ASSERT_EQUAL(s.peak_category[GANFW_MEM_GRAD], 0);
  CU_ASSERT_EQUAL(s.peak_category[GANFW_MEM_OTHER], 2 * MiB);
  CU_ASSERT_EQUAL_FATAL(s.n_top, 2);
  CU_ASSERT_STRING_EQUAL(s.top[0].owner, "(unnamed)");
  CU_ASSERT_EQUAL(s.top[0].category, GANFW_MEM_OTHER);
  CU_ASSERT_STRING_EQUAL(s.top[1].owner, "a");

  /* a step event alone */
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(c.ev, 1, &s), GANFW_OK);
  CU_ASSERT(s.peak_allocated == 0 && s.peak_index == 0 && s.n_top == 0);
}

/* --- SVG ----------------------------------------------------------------------------------- */

static void test_svg(void) {
  const char *hostile = "a<b&\"c'";
  builder b;
  build_step_a(&b, hostile);
  char *svg = svg_of(b.ev, b.n, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
  CU_ASSERT(strncmp(svg, "<svg", 4) == 0 || strncmp(svg, "<?xml", 5) == 0);
  size_t len = strlen(svg);
  CU_ASSERT(len > 7 && strcmp(svg + len - 7, "</svg>\n") == 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "width=\"1100\" height=\"560\""));
  const char *drawn[] = {"param", "grad", "optim_state", "activation", "workspace", "data"};
  for (size_t i = 0; i < sizeof drawn / sizeof drawn[0]; i++) {
    char pat[64];
    snprintf(pat, sizeof pat, "<path class=\"cat-%s\"", drawn[i]);
    CU_ASSERT_EQUAL(count_of(svg, pat), 1);
  }
  CU_ASSERT_EQUAL(count_of(svg, "class=\"cat-other\""), 0);
  char want[128];
  snprintf(want, sizeof want, "<title>step 1: peak %.2f MiB allocated</title>",
           (double)(22 * MiB + 512) / 1048576.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">peak 22.00 MiB<"));
  /* the owner, escaped, among the holders; never raw */
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "a&lt;b&amp;&quot;c&apos; (activation) 5.00 MiB"));
  CU_ASSERT_PTR_NULL(strstr(svg, "a<b"));
  CU_ASSERT_PTR_NULL(strstr(svg, "b&\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<polyline class=\"reserved\""));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">reserved<"));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">60.00 MiB<")); /* reserved's peak in the legend */
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">8.00 MiB<"));  /* activation's own peak */
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">D real forward<"));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">MiB<"));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">16<")); /* a y tick */
  /* self-contained */
  CU_ASSERT_PTR_NULL(strstr(svg, "<script"));
  CU_ASSERT_PTR_NULL(strstr(svg, "href"));
  CU_ASSERT_PTR_NULL(strstr(svg, "url("));
  /* the categories' colours differ */
  long cols[6];
  for (size_t i = 0; i < 6; i++) {
    char pat[64];
    snprintf(pat, sizeof pat, "class=\"cat-%s\"", drawn[i]);
    cols[i] = fill_after(svg, pat);
    CU_ASSERT(cols[i] >= 0);
    for (size_t j = 0; j < i; j++) CU_ASSERT_NOT_EQUAL(cols[i], cols[j]);
  }
  free(svg);

  /* a title goes before the peak, and as the heading; escaped too */
  ganfw_timeline_options opt = {.title = "run <1> & co", .width = 800, .height = 400};
  svg = svg_of(b.ev, b.n, &opt);
  CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>run &lt;1&gt; &amp; co: peak 22.00 MiB allocated"));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, ">run &lt;1&gt; &amp; co</text>"));
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "width=\"800\" height=\"400\""));
  free(svg);
  opt = (ganfw_timeline_options){.title = ""}; /* empty: as NULL */
  svg = svg_of(b.ev, b.n, &opt);
  CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, "<title>step 1: peak 22.00 MiB allocated</title>"));
  free(svg);
}

/* A step far longer than the plot is wide: the picture stays small, the numbers exact. */
static void test_svg_long_step(void) {
  enum { N = 60001 };
  ganfw_trace_event *ev = calloc(N, sizeof *ev);
  CU_ASSERT_PTR_NOT_NULL_FATAL(ev);
  ev[0] = (ganfw_trace_event){.kind = GANFW_TEV_STEP, .category = -1, .step = 4};
  /* block j is allocated, and block j - 100 freed after it */
  int64_t live = 0, peak = 0, peak_at = 0;
  for (int64_t i = 1, j = 0; i < N; j++) {
    for (int free_it = 0; free_it < 2 && i < N; free_it++) {
      int64_t blk = free_it ? j - 100 : j;
      if (blk < 0) continue;
      int64_t size = (blk % 97 + 1) * 4096 * (1 + (blk / 3000) % 4);
      ev[i] = (ganfw_trace_event){.kind = free_it ? GANFW_TEV_FREE : GANFW_TEV_ALLOC,
                                  .category = (int32_t)(blk % GANFW_MEM_COUNT),
                                  .size = size,
                                  .ptr = 0x100000 + (uint64_t)blk * 0x1000,
                                  .owner = "layer",
                                  .step = 4,
                                  .stage = (int32_t)(i * 3 / N + 1),
                                  .pass = GANFW_PASS_FORWARD,
                                  .reserved = 512 * MiB};
      live += free_it ? -size : size;
      if (live > peak) {
        peak = live;
        peak_at = i;
      }
      i++;
    }
  }
  ganfw_timeline_summary s;
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_summarize(ev, N, &s), GANFW_OK);
  CU_ASSERT_EQUAL(s.peak_allocated, peak);
  CU_ASSERT_EQUAL(s.peak_index, peak_at);
  char *svg = svg_of(ev, N, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
  CU_ASSERT(strlen(svg) < 400 * 1024);
  char want[96];
  snprintf(want, sizeof want, "peak %.2f MiB allocated</title>", (double)peak / 1048576.0);
  CU_ASSERT_PTR_NOT_NULL(strstr(svg, want));
  CU_ASSERT_EQUAL(count_of(svg, "<path class=\"cat-"), GANFW_MEM_COUNT);
  free(svg);
  free(ev);
}

static void test_svg_write_error(void) {
  FILE *f = fopen("/dev/full", "w");
  if (!f) return; /* no /dev/full here: nothing to check */
  builder b;
  build_step_a(&b, "D.conv1");
  CU_ASSERT_EQUAL(ganfw_timeline_write_svg(f, b.ev, b.n, NULL), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "SVG"));
  fclose(f);
}

/* --- PNG ----------------------------------------------------------------------------------- */

static int pixel_is(const float *px, int32_t h, int32_t w, int32_t y, int32_t x, long rgb) {
  for (int ch = 0; ch < 3; ch++) {
    int v = (int)(px[((size_t)ch * h + y) * w + x] * 255.0f + 0.5f);
    if (v != ((rgb >> (16 - 8 * ch)) & 0xff)) return 0;
  }
  return 1;
}

static void test_png(void) {
  builder b;
  build_step_a(&b, "D.conv1");
  char *svg = svg_of(b.ev, b.n, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(svg);
  long act = fill_after(svg, "class=\"cat-activation\"");
  long bg = fill_after(svg, "class=\"background\"");
  free(svg);
  CU_ASSERT_FATAL(act >= 0 && bg >= 0);

  const char *path = tmp_path("step.png");
  ganfw_status st = ganfw_timeline_write_png(path, b.ev, b.n, NULL);
  if (st) fprintf(stderr, "write_png: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  float *px = NULL;
  int32_t c, h, w;
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(path, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 3 && h == 560 && w == 1100);
  /* the activation's area in the plot (the legend is in the right quarter) */
  int found = 0;
  for (int32_t y = h / 10; y < h * 9 / 10 && !found; y++)
    for (int32_t x = w / 10; x < w * 6 / 10 && !found; x++) found = pixel_is(px, h, w, y, x, act);
  CU_ASSERT(found);
  CU_ASSERT(pixel_is(px, h, w, 0, 0, bg));
  CU_ASSERT(pixel_is(px, h, w, h - 1, w - 1, bg));
  /* the heading is drawn: ink in its corner */
  int ink = 0;
  for (int32_t y = 4; y < 24; y++)
    for (int32_t x = 4; x < 80; x++) ink += pixel_is(px, h, w, y, x, 0x000000);
  CU_ASSERT(ink > 20);
  free(px);

  ganfw_timeline_options opt = {.title = "small", .width = 640, .height = 300};
  path = tmp_path("small.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_timeline_write_png(path, b.ev, b.n, &opt), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_png_read_size(path, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 3 && h == 300 && w == 640);
}

/* --- bad input ----------------------------------------------------------------------------- */

static void test_bad_input(void) {
  builder b;
  build_step_a(&b, "D.conv1");
  ganfw_timeline_summary s;
  CU_ASSERT_EQUAL(ganfw_timeline_summarize(b.ev, 0, &s), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "empty"));
  CU_ASSERT_EQUAL(ganfw_timeline_summarize(NULL, 3, &s), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_timeline_summarize(b.ev, b.n, NULL), GANFW_ERR_INVALID_ARG);
  /* not starting with the step event */
  CU_ASSERT_EQUAL(ganfw_timeline_summarize(b.ev + 1, b.n - 1, &s), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "\"live\""));
  /* two steps in one range */
  builder two = b;
  two.ev[two.n - 1].kind = GANFW_TEV_STEP;
  CU_ASSERT_EQUAL(ganfw_timeline_summarize(two.ev, two.n, &s), GANFW_ERR_INVALID_ARG);
  /* a block without a memory category, a negative size */
  builder bad = b;
  bad.ev[6].category = 9;
  CU_ASSERT_EQUAL(ganfw_timeline_summarize(bad.ev, bad.n, &s), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "category 9"));
  bad = b;
  bad.ev[2].size = -1;
  CU_ASSERT_EQUAL(ganfw_timeline_summarize(bad.ev, bad.n, &s), GANFW_ERR_INVALID_ARG);

  /* the pictures refuse the same, and write nothing */
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(ganfw_timeline_write_svg(f, b.ev, 0, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_timeline_write_svg(f, b.ev + 1, b.n - 1, NULL), GANFW_ERR_INVALID_ARG);
  ganfw_timeline_options tiny = {.width = 10, .height = 10};
  CU_ASSERT_EQUAL(ganfw_timeline_write_svg(f, b.ev, b.n, &tiny), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "10 x 10"));
  CU_ASSERT_EQUAL(ganfw_timeline_write_svg(NULL, b.ev, b.n, NULL), GANFW_ERR_INVALID_ARG);
  fclose(f);
  CU_ASSERT_EQUAL(len, 0);
  free(text);
  const char *path = tmp_path("bad.png");
  CU_ASSERT_EQUAL(ganfw_timeline_write_png(path, b.ev, 0, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_timeline_write_png(path, b.ev + 1, b.n - 1, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_timeline_write_png(NULL, b.ev, b.n, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_NOT_EQUAL(access(path, F_OK), 0);
}

static CU_TestInfo tests[] = {
    {"find_step", test_find_step},
    {"summarize", test_summarize},
    {"summarize_free_live", test_summarize_free_live},
    {"svg", test_svg},
    {"svg_long_step", test_svg_long_step},
    {"svg_write_error", test_svg_write_error},
    {"png", test_png},
    {"bad_input", test_bad_input},
    CU_TEST_INFO_NULL,
};
GT_MAIN("timeline", tests)
