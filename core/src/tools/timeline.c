/* The memory timeline of one step (tools/timeline.h): the replay that finds the peak and its
 * holders (a step's range of the trace is runtime/trace_event.c's), and one picture laid out once
 * as a list of primitives (rects, axis-aligned lines, text, the stacked areas, the reserved line)
 * that two back ends draw: SVG text, and an RGB raster [h,w,3] with a built-in 5x8 bitmap font for
 * the PNG. */
#include "tools/timeline.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/png_io.h"
#include "runtime/alloc.h" // defines: ganfw_mem_category_name

#define MIB 1048576.0

/* --- the step's events -------------------------------------------------------------------- */

static int is_block_event(int32_t kind) {
  return kind == GANFW_TEV_ALLOC || kind == GANFW_TEV_FREE || kind == GANFW_TEV_LIVE;
}

/* One step's range: non-empty, a STEP event first and no other, and blocks with a memory
 * category and a size. */
static ganfw_status check_range(const ganfw_trace_event *ev, int64_t n) {
  if (!ev || n <= 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "timeline: an empty range of events (n = %lld); pass one step's "
                           "events as ganfw_trace_find_step returns them",
                           (long long)n);
  if (ev[0].kind != GANFW_TEV_STEP)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "timeline: the range starts with a \"%s\" event, not a step event; "
                           "pass one step's events as ganfw_trace_find_step returns them",
                           ganfw_trace_kind_name(ev[0].kind));
  for (int64_t i = 1; i < n; i++) {
    const ganfw_trace_event *e = &ev[i];
    if (e->kind == GANFW_TEV_STEP)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "timeline: event %lld of the range starts step %d after step %d: "
                             "pass one step's events as ganfw_trace_find_step returns them",
                             (long long)i, e->step, ev[0].step);
    if (!is_block_event(e->kind)) continue;
    if (e->category < 0 || e->category >= GANFW_MEM_COUNT)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "timeline: event %lld (%s of %s) has category %d, not a memory "
                             "category (0..%d)",
                             (long long)i, ganfw_trace_kind_name(e->kind),
                             e->owner ? e->owner : "(unnamed)", e->category, GANFW_MEM_COUNT - 1);
    if (e->size < 0)
      return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                             "timeline: event %lld (%s of %s) has a negative size (%lld)",
                             (long long)i, ganfw_trace_kind_name(e->kind),
                             e->owner ? e->owner : "(unnamed)", (long long)e->size);
  }
  return GANFW_OK;
}

/* The last event of the LIVE snapshot that follows the STEP event (0 when there is none):
 * the snapshot is the state at the step's start, so it is counted as a whole. */
static int64_t snapshot_end(const ganfw_trace_event *ev, int64_t n) {
  int64_t i = 1;
  while (i < n && ev[i].kind == GANFW_TEV_LIVE) i++;
  return i - 1;
}

static void apply_event(const ganfw_trace_event *e, int64_t cur[GANFW_MEM_COUNT]) {
  if (e->kind == GANFW_TEV_ALLOC || e->kind == GANFW_TEV_LIVE) cur[e->category] += e->size;
  if (e->kind == GANFW_TEV_FREE) cur[e->category] -= e->size;
}

/* Live blocks by address: open addressing over event indices (-1 empty, -2 removed), at
 * least twice as many slots as blocks are ever inserted, so a probe always ends. */
typedef struct block_map {
  int64_t *slot;
  uint64_t mask;
} block_map;

static uint64_t hash_ptr(uint64_t p) {
  p ^= p >> 33;
  p *= 0xff51afd7ed558ccdull;
  p ^= p >> 33;
  return p;
}

/* The slot holding `ptr`; with `insert`, the slot where it would go when absent. */
static int64_t *map_slot(block_map *m, const ganfw_trace_event *ev, uint64_t ptr, int insert) {
  int64_t *tomb = NULL;
  for (uint64_t i = hash_ptr(ptr) & m->mask;; i = (i + 1) & m->mask) {
    int64_t s = m->slot[i];
    if (s == -1) return insert ? (tomb ? tomb : &m->slot[i]) : NULL;
    if (s == -2) {
      if (!tomb) tomb = &m->slot[i];
    } else if (ev[s].ptr == ptr) {
      return &m->slot[i];
    }
  }
}

typedef struct holder_row {
  const char *owner;
  int32_t category;
  int64_t bytes;
} holder_row;

static int by_owner(const void *a, const void *b) {
  const holder_row *x = a, *y = b;
  int c = strcmp(x->owner, y->owner);
  if (c) return c;
  return (x->category > y->category) - (x->category < y->category);
}

static int by_bytes(const void *a, const void *b) {
  const holder_row *x = a, *y = b;
  if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
  return by_owner(a, b);
}

/* The biggest (owner, category) holders among the blocks live right after event `peak`,
 * into top[0 .. *n_top). */
static ganfw_status find_holders(const ganfw_trace_event *ev, int64_t peak,
                                 ganfw_timeline_holder top[GANFW_TIMELINE_TOP], int32_t *n_top) {
  int64_t inserts = 0;
  for (int64_t i = 0; i <= peak; i++)
    if ((ev[i].kind == GANFW_TEV_ALLOC || ev[i].kind == GANFW_TEV_LIVE) && ev[i].ptr) inserts++;
  if (inserts == 0) return GANFW_OK;
  uint64_t cap = 16;
  while (cap < (uint64_t)inserts * 2 + 2) cap *= 2;
  block_map m = {malloc(cap * sizeof(int64_t)), cap - 1};
  holder_row *rows = malloc((size_t)inserts * sizeof *rows);
  if (!m.slot || !rows) {
    free(m.slot);
    free(rows);
    return ganfw_error_set(GANFW_ERR_OOM,
                           "timeline: out of host memory for the %lld blocks of step %d",
                           (long long)inserts, ev[0].step);
  }
  for (uint64_t i = 0; i < cap; i++) m.slot[i] = -1;
  for (int64_t i = 0; i <= peak; i++) {
    const ganfw_trace_event *e = &ev[i];
    if (!e->ptr) continue;
    if (e->kind == GANFW_TEV_ALLOC || e->kind == GANFW_TEV_LIVE) {
      *map_slot(&m, ev, e->ptr, 1) = i;
    } else if (e->kind == GANFW_TEV_FREE) {
      int64_t *s = map_slot(&m, ev, e->ptr, 0);
      if (s) *s = -2;
    }
  }
  size_t n_rows = 0;
  for (uint64_t i = 0; i < cap; i++) {
    if (m.slot[i] < 0) continue;
    const ganfw_trace_event *e = &ev[m.slot[i]];
    rows[n_rows++] = (holder_row){e->owner ? e->owner : "(unnamed)", e->category, e->size};
  }
  free(m.slot);
  /* sum per (owner, category): equal names from different pointers are one owner */
  qsort(rows, n_rows, sizeof *rows, by_owner);
  size_t n_sum = 0;
  for (size_t i = 0; i < n_rows; i++) {
    if (n_sum && by_owner(&rows[n_sum - 1], &rows[i]) == 0) {
      rows[n_sum - 1].bytes += rows[i].bytes;
    } else {
      rows[n_sum++] = rows[i];
    }
  }
  qsort(rows, n_sum, sizeof *rows, by_bytes);
  for (size_t i = 0; i < n_sum && *n_top < GANFW_TIMELINE_TOP; i++) {
    if (rows[i].bytes <= 0) break;
    top[(*n_top)++] = (ganfw_timeline_holder){rows[i].owner, rows[i].category, rows[i].bytes};
  }
  free(rows);
  return GANFW_OK;
}

/* The last OOM event of the range: the request, what was live and reserved when it failed,
 * and who held it (out->oom_*); oom_index -1 when there is none. */
static ganfw_status find_failure(const ganfw_trace_event *ev, int64_t n,
                                 ganfw_timeline_summary *out) {
  out->oom_index = -1;
  for (int64_t i = n - 1; i > 0 && out->oom_index < 0; i--)
    if (ev[i].kind == GANFW_TEV_OOM) out->oom_index = i;
  if (out->oom_index < 0) return GANFW_OK;
  const ganfw_trace_event *e = &ev[out->oom_index];
  int64_t cur[GANFW_MEM_COUNT] = {0};
  for (int64_t i = 0; i <= out->oom_index; i++) apply_event(&ev[i], cur);
  for (int c = 0; c < GANFW_MEM_COUNT; c++) out->oom_allocated += cur[c] > 0 ? cur[c] : 0;
  out->oom_bytes = e->size;
  out->oom_category = e->category;
  out->oom_stage = e->stage;
  out->oom_pass = e->pass;
  out->oom_owner = e->owner ? e->owner : "(unnamed)";
  out->oom_reserved = e->reserved;
  return find_holders(ev, out->oom_index, out->oom_top, &out->n_oom_top);
}

ganfw_status ganfw_timeline_summarize(const ganfw_trace_event *ev, int64_t n,
                                      ganfw_timeline_summary *out) {
  if (!out) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "timeline: summarize needs an output");
  memset(out, 0, sizeof *out);
  ganfw_status st = check_range(ev, n);
  if (st) return st;
  out->step = ev[0].step;
  out->n_events = n;
  out->peak_reserved = ev[0].reserved;
  int64_t cur[GANFW_MEM_COUNT] = {0};
  int64_t s_end = snapshot_end(ev, n);
  for (int64_t i = 0; i < n; i++) {
    apply_event(&ev[i], cur);
    if (ev[i].reserved > out->peak_reserved) out->peak_reserved = ev[i].reserved;
    if (i < s_end) continue;
    int64_t total = 0;
    for (int c = 0; c < GANFW_MEM_COUNT; c++) total += cur[c];
    if (i == s_end || total > out->peak_allocated) {
      out->peak_allocated = total;
      out->peak_index = i;
      memcpy(out->at_peak, cur, sizeof cur);
    }
    for (int c = 0; c < GANFW_MEM_COUNT; c++)
      if (i == s_end || cur[c] > out->peak_category[c]) out->peak_category[c] = cur[c];
  }
  out->peak_stage = ev[out->peak_index].stage;
  out->peak_pass = ev[out->peak_index].pass;
  st = find_holders(ev, out->peak_index, out->top, &out->n_top);
  return st ? st : find_failure(ev, n, out);
}

/* --- the picture, as primitives ------------------------------------------------------------ */

#define RGB_BACKGROUND 0xffffff
#define RGB_INK        0x000000
#define RGB_SOFT_INK   0x444444
#define RGB_GRID       0xc8c8c8
#define RGB_RESERVED   0x303030
#define RGB_FAILED     0xd62728 /* the failed request */
#define RGB_LIMIT      0xb00020 /* memory_limit */

/* Tableau's ten, one per category in GANFW_MEM_* order. */
static const uint32_t cat_rgb[] = {0x4e79a7, 0xf28e2b, 0x76b7b2, 0xe15759,
                                   0xedc948, 0x59a14f, 0xb07aa1, 0xff9da7};
_Static_assert(sizeof cat_rgb / sizeof cat_rgb[0] == GANFW_MEM_COUNT, "a colour per category");
/* A hue per stage; the pass sets how much white it is mixed with. */
static const uint32_t stage_rgb[] = {0xb4b4b4, 0x6fa8dc, 0xf6a45c, 0x7cc47c,
                                     0xb48fd8, 0xd8c068, 0xd86f6f};
_Static_assert(sizeof stage_rgb / sizeof stage_rgb[0] == GANFW_STAGE_COUNT, "a hue per stage");
static const double pass_white[] = {0.84, 0.76, 0.62, 0.70, 0.54};
_Static_assert(sizeof pass_white / sizeof pass_white[0] == GANFW_PASS_COUNT, "a tint per pass");

static uint32_t band_rgb(int32_t stage, int32_t pass) {
  uint32_t base = stage >= 0 && stage < GANFW_STAGE_COUNT ? stage_rgb[stage] : 0xb4b4b4;
  double w = pass >= 0 && pass < GANFW_PASS_COUNT ? pass_white[pass] : 0.84;
  uint32_t out = 0;
  for (int sh = 16; sh >= 0; sh -= 8) {
    double v = (double)((base >> sh) & 0xff) * (1.0 - w) + 255.0 * w;
    out |= (uint32_t)lround(v) << sh;
  }
  return out;
}

enum { ITEM_RECT, ITEM_LINE, ITEM_TEXT, ITEM_AREA, ITEM_RESERVED };
enum { ANCHOR_START, ANCHOR_MIDDLE, ANCHOR_END };

typedef struct pic_item {
  int32_t kind;
  int32_t anchor, scale; /* text: alignment at x0, glyph scale (1: 10px font, 2: 20px) */
  int32_t dashed;        /* lines */
  int32_t slot;          /* areas: the index into pic.drawn */
  uint32_t rgb;
  double x0, y0, x1, y1; /* rect corners, line ends; text: x0 and its top y0 */
  double width;          /* lines */
  const char *cls;       /* SVG class (static), NULL for none */
  char *text;            /* text, owned */
} pic_item;

typedef struct pic {
  int32_t w, h;
  ganfw_timeline_summary s;
  int64_t k;     /* segments along x: one per event, or one per pixel column when the step
                    has more events than the plot has columns */
  double *ex;    /* [k + 1] the segments' edges */
  double *ys;    /* [(n_drawn + 1) * k] the stack's edges per segment; row 0 is the axis */
  double *res_y; /* [k] the reserved line */
  int32_t n_drawn, drawn[GANFW_MEM_COUNT];
  char *title; /* the <title> text */
  pic_item *items;
  size_t n_items, cap_items;
  int oom;
} pic;

static void pic_free(pic *p) {
  for (size_t i = 0; i < p->n_items; i++) free(p->items[i].text);
  free(p->items);
  free(p->ex);
  free(p->ys);
  free(p->res_y);
  free(p->title);
}

static pic_item *pic_push(pic *p, int32_t kind) {
  if (p->oom) return NULL;
  if (p->n_items == p->cap_items) {
    size_t cap = p->cap_items ? p->cap_items * 2 : 256;
    pic_item *grown = realloc(p->items, cap * sizeof *grown);
    if (!grown) {
      p->oom = 1;
      return NULL;
    }
    p->items = grown;
    p->cap_items = cap;
  }
  pic_item *it = &p->items[p->n_items++];
  memset(it, 0, sizeof *it);
  it->kind = kind;
  it->scale = 1;
  return it;
}

static void pic_rect(pic *p, double x0, double y0, double x1, double y1, uint32_t rgb,
                     const char *cls) {
  pic_item *it = pic_push(p, ITEM_RECT);
  if (!it) return;
  *it =
      (pic_item){.kind = ITEM_RECT, .rgb = rgb, .x0 = x0, .y0 = y0, .x1 = x1, .y1 = y1, .cls = cls};
}

/* Axis-aligned lines only (x0 == x1 or y0 == y1). */
static void pic_line(pic *p, double x0, double y0, double x1, double y1, uint32_t rgb, double width,
                     int dashed, const char *cls) {
  pic_item *it = pic_push(p, ITEM_LINE);
  if (!it) return;
  *it = (pic_item){.kind = ITEM_LINE,
                   .rgb = rgb,
                   .x0 = x0,
                   .y0 = y0,
                   .x1 = x1,
                   .y1 = y1,
                   .width = width,
                   .dashed = dashed,
                   .cls = cls};
}

static void pic_text(pic *p, double x, double top, int32_t anchor, int32_t scale, uint32_t rgb,
                     const char *cls, const char *fmt, ...) __attribute__((format(printf, 8, 9)));
static void pic_text(pic *p, double x, double top, int32_t anchor, int32_t scale, uint32_t rgb,
                     const char *cls, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int len = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
  if (!text) {
    p->oom = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(text, (size_t)len + 1, fmt, ap);
  va_end(ap);
  pic_item *it = pic_push(p, ITEM_TEXT);
  if (!it) {
    free(text);
    return;
  }
  *it = (pic_item){.kind = ITEM_TEXT,
                   .rgb = rgb,
                   .x0 = x,
                   .y0 = top,
                   .anchor = anchor,
                   .scale = scale,
                   .cls = cls,
                   .text = text};
}

/* Text is laid out in 6-pixel cells (the bitmap font's; 10px monospace in the SVG). */
static double text_width(const char *s, int32_t scale) {
  size_t n = strlen(s);
  return n ? (double)(n * 6 - 1) * scale : 0.0;
}

/* `src` in at most `max` characters: its end replaced by "..." (keep_ends 0), or its middle
 * (keep_ends 1, for owner names: the net's prefix and the layer's last parts say the most). */
static void clip_text(char *dst, size_t cap, const char *src, size_t max, int keep_ends) {
  size_t n = strlen(src);
  if (max >= cap) max = cap - 1;
  if (n <= max) {
    memcpy(dst, src, n + 1);
  } else if (max <= 3) {
    snprintf(dst, cap, "%.*s", (int)max, "...");
  } else if (keep_ends) {
    size_t head = (max - 3) / 3;
    snprintf(dst, cap, "%.*s...%s", (int)head, src, src + n - (max - 3 - head));
  } else {
    snprintf(dst, cap, "%.*s...", (int)(max - 3), src);
  }
}

/* "D real backward", "setup" (no pass); `brief`: "D real bwd", for narrow bands. */
static void phase_label(char *buf, size_t cap, int32_t stage, int32_t pass, int brief) {
  static const char *const short_pass[] = {"", "fwd", "bwd", "recomp", "opt"};
  _Static_assert(sizeof short_pass / sizeof short_pass[0] == GANFW_PASS_COUNT, "per pass");
  const char *ps = ganfw_trace_pass_name(pass);
  if (brief && pass >= 0 && pass < GANFW_PASS_COUNT) ps = short_pass[pass];
  snprintf(buf, cap, "%s%s%s", ganfw_trace_stage_name(stage), ps[0] ? " " : "", ps);
}

static double round1(double v) {
  return round(v * 10.0) / 10.0;
}

typedef struct frame {
  double x0, x1;                                 /* the plot's left and right */
  double band_top, peak_row, data_top, data_bot; /* the bands' top, the peak label's row, the
                                                    data's top and the x axis */
  double fail_row;                               /* the failed request's label's row */
  double panel_x, panel_r;                       /* the legend's column */
  int64_t npx;                                   /* the plot's width in pixel columns */
  double top_mib;                                /* the y axis' end */
  double ystep;                                  /* MiB between the y axis' ticks */
  int n_ticks;                                   /* ... of which there are this many */
  double xscale;                                 /* pixels per event */
} frame;

static double y_of(const frame *fr, double bytes) {
  if (bytes < 0) bytes = 0;
  double y = fr->data_bot - bytes / MIB / fr->top_mib * (fr->data_bot - fr->data_top);
  return round1(y < fr->data_top ? fr->data_top : y); /* only inconsistent steps go higher */
}

/* The stacked bytes per segment (the event with the most live bytes stands for a pixel
 * column), the reserved line and the stack's edges. */
static ganfw_status build_segments(pic *p, const frame *fr, const ganfw_trace_event *ev,
                                   int64_t n) {
  int64_t k = n < fr->npx ? n : fr->npx;
  p->k = k;
  p->ex = malloc((size_t)(k + 1) * sizeof *p->ex);
  p->ys = malloc((size_t)(p->n_drawn + 1) * (size_t)k * sizeof *p->ys);
  p->res_y = malloc((size_t)k * sizeof *p->res_y);
  int64_t *vals = malloc((size_t)k * GANFW_MEM_COUNT * sizeof *vals);
  int64_t *best = malloc((size_t)k * sizeof *best);
  int64_t *res = malloc((size_t)k * sizeof *res);
  if (!p->ex || !p->ys || !p->res_y || !vals || !best || !res) {
    free(vals);
    free(best);
    free(res);
    return ganfw_error_set(GANFW_ERR_OOM, "timeline: out of host memory for the picture of step %d",
                           ev[0].step);
  }
  for (int64_t j = 0; j <= k; j++) p->ex[j] = round1(fr->x0 + (double)j * fr->npx / k);
  for (int64_t j = 0; j < k; j++) best[j] = res[j] = -1;
  int64_t cur[GANFW_MEM_COUNT] = {0};
  int64_t s_end = snapshot_end(ev, n);
  for (int64_t i = 0; i <= s_end; i++) apply_event(&ev[i], cur);
  for (int64_t i = 0; i < n; i++) {
    if (i > s_end) apply_event(&ev[i], cur);
    int64_t seg = i * k / n, total = 0;
    for (int c = 0; c < GANFW_MEM_COUNT; c++) total += cur[c] > 0 ? cur[c] : 0;
    if (total > best[seg]) {
      best[seg] = total;
      for (int c = 0; c < GANFW_MEM_COUNT; c++)
        vals[seg * GANFW_MEM_COUNT + c] = cur[c] > 0 ? cur[c] : 0;
    }
    int64_t r = ev[i].reserved > 0 ? ev[i].reserved : 0;
    if (r > res[seg]) res[seg] = r;
  }
  for (int64_t j = 0; j < k; j++) {
    double sum = 0;
    p->ys[j] = y_of(fr, 0);
    for (int32_t d = 0; d < p->n_drawn; d++) {
      sum += (double)vals[j * GANFW_MEM_COUNT + p->drawn[d]];
      p->ys[(d + 1) * k + j] = y_of(fr, sum);
    }
    p->res_y[j] = y_of(fr, (double)res[j]);
  }
  free(vals);
  free(best);
  free(res);
  return GANFW_OK;
}

/* A power-of-two MiB step giving at most max_ticks intervals up to a bit above ymax. */
static double y_step(double ymax_mib, int max_ticks, int *n_ticks) {
  double step = ldexp(1.0, -6);
  for (;;) {
    double t = ceil(ymax_mib * 1.04 / step);
    if (t < 1) t = 1;
    if (t <= max_ticks || step > 1e15) {
      *n_ticks = (int)t;
      return step;
    }
    step *= 2;
  }
}

/* 1, 2 or 5 times a power of ten, labels at least min_px apart. */
static int64_t x_step(int64_t n, double npx, double min_px) {
  int64_t step = 1;
  for (;;) {
    for (int m = 0; m < 3; m++) {
      int64_t s = step * (m == 0 ? 1 : m == 1 ? 2 : 5);
      if ((double)s * npx / (double)n >= min_px) return s;
    }
    if (step > INT64_MAX / 100) return step;
    step *= 10;
  }
}

static int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

/* "9.18 MiB", or "1.00 KiB" under a MiB (a small request must not read as 0.00 MiB). */
static const char *bytes_text(char *buf, size_t n, int64_t b) {
  if (b < ((int64_t)1 << 20))
    snprintf(buf, n, "%.2f KiB", (double)b / 1024.0);
  else
    snprintf(buf, n, "%.2f MiB", (double)b / MIB);
  return buf;
}

/* The bytes live when the request failed plus the request, saturated (a trace file's sizes
 * are not trusted). */
static int64_t failed_top(const ganfw_timeline_summary *s) {
  const int64_t live = max64(s->oom_allocated, 0), req = max64(s->oom_bytes, 0);
  return req > INT64_MAX - live ? INT64_MAX : live + req;
}

/* The bytes the y axis must reach: the peaks, the limit, the failed request on top of
 * what was live. */
static int64_t y_needed(const ganfw_timeline_summary *s, const ganfw_timeline_options *opt) {
  int64_t top = max64(s->peak_allocated, s->peak_reserved);
  if (opt && opt->memory_limit > 0) top = max64(top, opt->memory_limit);
  if (s->oom_index >= 0) top = max64(top, failed_top(s));
  return top;
}

/* The middle of the pixel column of event i. */
static double event_x(const pic *p, int64_t i, int64_t n) {
  int64_t seg = i * p->k / n;
  return floor((p->ex[seg] + p->ex[seg + 1]) / 2) + 0.5;
}

/* memory_limit: a dashed line across the plot, labelled at its left end above it. */
static void draw_limit(pic *p, const frame *fr, int64_t limit) {
  if (limit <= 0) return;
  double y = floor(y_of(fr, (double)limit)) + 0.5;
  pic_line(p, fr->x0, y, fr->x1, y, RGB_LIMIT, 2, 1, "limit");
  char line[64];
  snprintf(line, sizeof line, "memory_limit %.2f MiB", (double)limit / MIB);
  double lx = fr->x0 + 6, top = y - 13 < fr->data_top ? y + 4 : y - 13;
  pic_rect(p, lx - 2, top - 2, lx + text_width(line, 1) + 2, top + 10, RGB_BACKGROUND, NULL);
  pic_text(p, lx, top, ANCHOR_START, 1, RGB_LIMIT, "limit-label", "%s", line);
}

/* The failed request: a line at its event, the request stacked on what was live then, and
 * "failed: OWNER (CATEGORY) X MiB" in the row above the plot, left of the line when the
 * right has no room. */
static void draw_failure(pic *p, const frame *fr, int64_t n) {
  const ganfw_timeline_summary *s = &p->s;
  if (s->oom_index < 0) return;
  double x = event_x(p, s->oom_index, n);
  pic_line(p, x, fr->band_top, x, fr->data_bot, RGB_FAILED, 1, 0, "oom");
  double y_live = y_of(fr, (double)s->oom_allocated);
  double y_req = y_of(fr, (double)failed_top(s));
  if (y_live - y_req < 2) y_req = y_live - 2;
  pic_rect(p, x - 4, y_req, x + 5, y_live, RGB_FAILED, "oom-request");
  char line[256], owner[128];
  clip_text(owner, sizeof owner, s->oom_owner, 60, 1);
  char size[32];
  snprintf(line, sizeof line, "failed: %s (%s) %s", owner, ganfw_mem_category_name(s->oom_category),
           bytes_text(size, sizeof size, max64(s->oom_bytes, 0)));
  double lw = text_width(line, 1), lx = x + 5;
  if (lx + lw > fr->x1) lx = x - 5 - lw;
  if (lx < 2) lx = 2;
  pic_rect(p, lx - 3, fr->fail_row - 3, lx + lw + 3, fr->fail_row + 10, RGB_BACKGROUND, NULL);
  pic_text(p, lx, fr->fail_row, ANCHOR_START, 1, RGB_FAILED, "oom-label", "%s", line);
}

/* The legend's rows for a moment of the step ("at the peak: event 12, D real backward")
 * and its holders, from y down to the plot's bottom at most. */
static void legend_holders(pic *p, const frame *fr, double y, const char *what, int64_t index,
                           int32_t stage, int32_t pass, const ganfw_timeline_holder *top,
                           int32_t n_top) {
  const double lxp = fr->panel_x;
  const size_t max_chars = (size_t)((fr->panel_r - lxp + 1) / 6);
  char phase[64], line[512], clipped[512];
  phase_label(phase, sizeof phase, stage, pass, 0);
  snprintf(line, sizeof line, "%s: event %lld, %s", what, (long long)index, phase);
  if (strlen(line) <= max_chars) {
    pic_text(p, lxp, y, ANCHOR_START, 1, RGB_INK, NULL, "%s", line);
    y += 14;
  } else {
    pic_text(p, lxp, y, ANCHOR_START, 1, RGB_INK, NULL, "%s: event %lld", what, (long long)index);
    y += 12;
    clip_text(clipped, sizeof clipped, phase, max_chars - 2, 0);
    pic_text(p, lxp + 12, y, ANCHOR_START, 1, RGB_INK, NULL, "%s", clipped);
    y += 14;
  }
  for (int32_t t = 0; t < n_top; t++) {
    const ganfw_timeline_holder *hd = &top[t];
    char suffix[96];
    snprintf(suffix, sizeof suffix, " (%s) %.2f MiB", ganfw_mem_category_name(hd->category),
             (double)hd->bytes / MIB);
    size_t row_chars = max_chars - 2; /* after the colour mark */
    int one_line = strlen(hd->owner) + strlen(suffix) <= row_chars;
    if (y + (one_line ? 12 : 25) > fr->data_bot) break;
    pic_rect(p, lxp, y + 1, lxp + 4, y + 7, cat_rgb[hd->category], NULL);
    if (one_line) {
      pic_text(p, lxp + 8, y, ANCHOR_START, 1, RGB_INK, "holder", "%s%s", hd->owner, suffix);
      y += 12;
    } else { /* a long name: the owner, then its category and bytes below */
      clip_text(clipped, sizeof clipped, hd->owner, row_chars, 1);
      pic_text(p, lxp + 8, y, ANCHOR_START, 1, RGB_INK, "holder", "%s", clipped);
      pic_text(p, lxp + 20, y + 11, ANCHOR_START, 1, RGB_INK, "holder", "%s", suffix + 1);
      y += 25;
    }
  }
}

/* The picture's size (opt's, or 1100 x 560), the categories it draws and where everything
 * goes: the plot, the rows above it, the legend's column, the y axis' ticks. */
static ganfw_status pic_layout(pic *p, int64_t n, const ganfw_timeline_options *opt, frame *fr) {
  const ganfw_timeline_summary *s = &p->s;
  int32_t w = opt && opt->width ? opt->width : 1100, h = opt && opt->height ? opt->height : 560;
  if (w < 400 || w > 4096 || h < 240 || h > 4096)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "timeline: a picture of %d x %d pixels; the width must be 400..4096 "
                           "and the height 240..4096 (0 for the default 1100 x 560)",
                           w, h);
  p->w = w;
  p->h = h;
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    if (s->peak_category[c] > 0) p->drawn[p->n_drawn++] = c;
  int32_t panel_w = w / 4 < 170 ? 170 : w / 4 > 300 ? 300 : w / 4;
  fr->x0 = 60;
  fr->x1 = w - panel_w - 24;
  fr->npx = (int64_t)(fr->x1 - fr->x0);
  fr->panel_x = fr->x1 + 16;
  fr->panel_r = w - 8;
  fr->band_top = 30;
  fr->peak_row = 46;
  fr->fail_row = 60;
  fr->data_top = s->oom_index >= 0 ? 76 : 62; /* room for the failure's label */
  fr->data_bot = h - 34;
  double ymax = (double)y_needed(s, opt) / MIB;
  if (ymax <= 0) ymax = 1;
  int max_ticks = (int)((fr->data_bot - fr->data_top) / 45);
  max_ticks = max_ticks < 2 ? 2 : max_ticks > 8 ? 8 : max_ticks;
  fr->ystep = y_step(ymax, max_ticks, &fr->n_ticks);
  fr->top_mib = fr->ystep * fr->n_ticks;
  fr->xscale = (double)fr->npx / (double)n;
  return GANFW_OK;
}

/* The heading (opt->title, or "step N") into heading, and the <title>: the heading, then
 * ": peak X MiB allocated". */
static ganfw_status pic_title(pic *p, const ganfw_timeline_options *opt, char *heading,
                              size_t cap) {
  int has_title = opt && opt->title && opt->title[0];
  if (has_title) {
    snprintf(heading, cap, "%s", opt->title);
  } else {
    snprintf(heading, cap, "step %d", p->s.step);
  }
  const char *title_src = has_title ? opt->title : heading;
  size_t tl = strlen(title_src) + 64;
  p->title = malloc(tl);
  if (!p->title) return ganfw_error_set(GANFW_ERR_OOM, "timeline: out of host memory");
  snprintf(p->title, tl, "%s: peak %.2f MiB allocated", title_src,
           (double)p->s.peak_allocated / MIB);
  return GANFW_OK;
}

/* Under everything: the background, the phases' bands (runs of events with equal stage and
 * pass), the grid, the stacked categories and the reserved line. */
static void draw_plot(pic *p, const frame *fr, const ganfw_trace_event *ev, int64_t n) {
  pic_rect(p, 0, 0, p->w, p->h, RGB_BACKGROUND, "background");
  for (int64_t a = 0, i = 1; i <= n; i++) {
    if (i < n && ev[i].stage == ev[a].stage && ev[i].pass == ev[a].pass) continue;
    pic_rect(p, round1(fr->x0 + a * fr->xscale), fr->band_top, round1(fr->x0 + i * fr->xscale),
             fr->data_bot, band_rgb(ev[a].stage, ev[a].pass), "phase");
    a = i;
  }
  for (int t = 1; t <= fr->n_ticks; t++) {
    double y = y_of(fr, t * fr->ystep * MIB);
    pic_line(p, fr->x0, y, fr->x1, y, RGB_GRID, 1, 0, "grid");
  }
  for (int32_t d = 0; d < p->n_drawn; d++) {
    pic_item *it = pic_push(p, ITEM_AREA);
    if (it) {
      it->slot = d;
      it->rgb = cat_rgb[p->drawn[d]];
    }
  }
  pic_item *res_it = pic_push(p, ITEM_RESERVED);
  if (res_it) {
    res_it->rgb = RGB_RESERVED;
    res_it->width = 1.5;
    res_it->cls = "reserved";
  }
}

/* The axes: MiB up the left with a label per tick, the events' indices along the bottom. */
static void draw_axes(pic *p, const frame *fr, int64_t n) {
  pic_line(p, fr->x0, fr->data_top, fr->x0, fr->data_bot, RGB_INK, 1, 0, "axis");
  pic_line(p, fr->x0, fr->data_bot, fr->x1, fr->data_bot, RGB_INK, 1, 0, "axis");
  for (int t = 0; t <= fr->n_ticks; t++) {
    double y = y_of(fr, t * fr->ystep * MIB);
    pic_line(p, fr->x0 - 4, y, fr->x0, y, RGB_INK, 1, 0, NULL);
    pic_text(p, fr->x0 - 7, round(y) - 3, ANCHOR_END, 1, RGB_INK, NULL, "%g", t * fr->ystep);
  }
  pic_text(p, fr->x0 - 7, fr->band_top + 3, ANCHOR_END, 1, RGB_INK, NULL, "MiB");
  int64_t xs = x_step(n, (double)fr->npx, 70);
  for (int64_t i = 0; i <= n; i += xs) {
    double x = round1(fr->x0 + i * fr->xscale);
    pic_line(p, x, fr->data_bot, x, fr->data_bot + 4, RGB_INK, 1, 0, NULL);
    pic_text(p, x, fr->data_bot + 6, ANCHOR_MIDDLE, 1, RGB_INK, NULL, "%lld", (long long)i);
    if (i > INT64_MAX - xs) break;
  }
  pic_text(p, fr->x1, fr->data_bot + 19, ANCHOR_END, 1, RGB_SOFT_INK, NULL,
           "event (index in the step)");
}

/* The peak: a line through the plot, its label in a row below the phase labels. */
static void draw_peak(pic *p, const frame *fr, int64_t n) {
  double px = event_x(p, p->s.peak_index, n);
  pic_line(p, px, fr->band_top, px, fr->data_bot, RGB_INK, 1, 1, "peak");
  char line[64];
  snprintf(line, sizeof line, "peak %.2f MiB", (double)p->s.peak_allocated / MIB);
  double lw = text_width(line, 1), lx = px + 5;
  if (lx + lw > fr->x1) lx = px - 5 - lw;
  if (lx < 2) lx = 2;
  pic_rect(p, lx - 3, fr->peak_row - 3, lx + lw + 3, fr->peak_row + 10, RGB_BACKGROUND, NULL);
  pic_text(p, lx, fr->peak_row, ANCHOR_START, 1, RGB_INK, "peak-label", "%s", line);
}

/* Each phase's label where its band has room (the brief one when the long one does not fit):
 * at the band's start, else just after the peak's line, else just before it, never across
 * that line. */
static void draw_phase_labels(pic *p, const frame *fr, const ganfw_trace_event *ev, int64_t n) {
  const double px = event_x(p, p->s.peak_index, n);
  const double keep0 = px - 3, keep1 = px + 3;
  for (int64_t a = 0, i = 1; i <= n; i++) {
    if (i < n && ev[i].stage == ev[a].stage && ev[i].pass == ev[a].pass) continue;
    double b0 = fr->x0 + a * fr->xscale, b1 = fr->x0 + i * fr->xscale;
    char label[64];
    phase_label(label, sizeof label, ev[a].stage, ev[a].pass, 0);
    double tw = text_width(label, 1);
    if (tw + 6 > b1 - b0) {
      phase_label(label, sizeof label, ev[a].stage, ev[a].pass, 1);
      tw = text_width(label, 1);
    }
    a = i;
    if (tw + 6 > b1 - b0) continue;
    double cand[3] = {round(b0 + 3), round(keep1 + 1), round(keep0 - 1 - tw)}, tx = -1;
    for (int c = 0; c < 3 && tx < 0; c++)
      if (cand[c] >= b0 + 3 - 0.5 && cand[c] + tw <= b1 - 3 + 0.5 &&
          (cand[c] + tw <= keep0 || cand[c] >= keep1))
        tx = cand[c];
    if (tx < 0) continue;
    pic_text(p, tx, fr->band_top + 3, ANCHOR_START, 1, RGB_SOFT_INK, "phase-label", "%s", label);
  }
}

/* The heading at the top left, and beside it the peaks and the number of events, or the
 * allocated peak alone, or nothing, as the width allows. */
static void draw_heading(pic *p, const char *heading, int64_t n) {
  const ganfw_timeline_summary *s = &p->s;
  char line[512], clipped[512];
  size_t max_title = (size_t)((p->w - 16) / 12);
  clip_text(clipped, sizeof clipped, heading, max_title, 0);
  pic_text(p, 8, 6, ANCHOR_START, 2, RGB_INK, "heading", "%s", clipped);
  double sx = 8 + text_width(clipped, 2) + 14;
  double peak_mib = (double)s->peak_allocated / MIB;
  snprintf(line, sizeof line, "peak %.2f MiB allocated, %.2f MiB reserved, %lld events", peak_mib,
           (double)s->peak_reserved / MIB, (long long)n);
  if (sx + text_width(line, 1) > p->w - 8)
    snprintf(line, sizeof line, "peak %.2f MiB allocated", peak_mib);
  if (sx + text_width(line, 1) <= p->w - 8)
    pic_text(p, sx, 13, ANCHOR_START, 1, RGB_SOFT_INK, NULL, "%s", line);
}

/* One row of the legend: a mark drawn by the caller, `name` after it, `value` at the right. */
static void legend_row(pic *p, const frame *fr, double y, const char *name, const char *value) {
  pic_text(p, fr->panel_x + 16, y + 1, ANCHOR_START, 1, RGB_INK, NULL, "%s", name);
  pic_text(p, fr->panel_r, y + 1, ANCHOR_END, 1, RGB_INK, NULL, "%s", value);
}

/* The legend: the categories with their own peaks, reserved, the allocated peak, the limit
 * and the failed request; then who held the bytes: when the step failed, then (not at the
 * peak, which may have passed), else at the peak. */
static void draw_legend(pic *p, const frame *fr, const ganfw_timeline_options *opt) {
  const ganfw_timeline_summary *s = &p->s;
  double y = fr->data_top, lxp = fr->panel_x;
  char value[64];
  pic_text(p, lxp, y, ANCHOR_START, 1, RGB_INK, NULL, "peak per category");
  y += 16;
  for (int32_t d = 0; d < p->n_drawn; d++) {
    int32_t c = p->drawn[d];
    pic_rect(p, lxp, y, lxp + 10, y + 8, cat_rgb[c], NULL);
    snprintf(value, sizeof value, "%.2f MiB", (double)s->peak_category[c] / MIB);
    legend_row(p, fr, y, ganfw_mem_category_name(c), value);
    y += 14;
  }
  pic_line(p, lxp, y + 4, lxp + 10, y + 4, RGB_RESERVED, 2, 0, NULL);
  snprintf(value, sizeof value, "%.2f MiB", (double)s->peak_reserved / MIB);
  legend_row(p, fr, y, "reserved", value);
  y += 14;
  pic_line(p, lxp + 5.5, y, lxp + 5.5, y + 9, RGB_INK, 1, 1, NULL);
  snprintf(value, sizeof value, "%.2f MiB", (double)s->peak_allocated / MIB);
  legend_row(p, fr, y, "peak allocated", value);
  y += 14;
  if (opt && opt->memory_limit > 0) {
    pic_line(p, lxp, y + 4.5, lxp + 10, y + 4.5, RGB_LIMIT, 2, 0, NULL);
    snprintf(value, sizeof value, "%.2f MiB", (double)opt->memory_limit / MIB);
    legend_row(p, fr, y, "memory_limit", value);
    y += 14;
  }
  if (s->oom_index >= 0) {
    pic_rect(p, lxp + 2, y, lxp + 9, y + 9, RGB_FAILED, NULL);
    legend_row(p, fr, y, "failed request", bytes_text(value, sizeof value, max64(s->oom_bytes, 0)));
    y += 14;
  }
  y += 10;
  if (s->oom_index >= 0)
    legend_holders(p, fr, y, "live at the failure", s->oom_index, s->oom_stage, s->oom_pass,
                   s->oom_top, s->n_oom_top);
  else
    legend_holders(p, fr, y, "at the peak", s->peak_index, s->peak_stage, s->peak_pass, s->top,
                   s->n_top);
}

/* The picture of one step as primitives, in the order they are drawn. */
static ganfw_status pic_build(pic *p, const ganfw_trace_event *ev, int64_t n,
                              const ganfw_timeline_options *opt) {
  ganfw_status st = ganfw_timeline_summarize(ev, n, &p->s);
  frame fr;
  char heading[512];
  if (st == GANFW_OK) st = pic_layout(p, n, opt, &fr);
  if (st == GANFW_OK) st = build_segments(p, &fr, ev, n);
  if (st == GANFW_OK) st = pic_title(p, opt, heading, sizeof heading);
  if (st) return st;
  draw_plot(p, &fr, ev, n);
  draw_axes(p, &fr, n);
  draw_peak(p, &fr, n);
  draw_limit(p, &fr, opt ? opt->memory_limit : 0);
  draw_failure(p, &fr, n);
  draw_phase_labels(p, &fr, ev, n);
  draw_heading(p, heading, n);
  draw_legend(p, &fr, opt);
  if (p->oom) return ganfw_error_set(GANFW_ERR_OOM, "timeline: out of host memory");
  return GANFW_OK;
}

/* --- SVG ----------------------------------------------------------------------------------- */

static void svg_num(FILE *f, double v) {
  char b[32];
  snprintf(b, sizeof b, "%.1f", v);
  size_t n = strlen(b);
  if (n >= 2 && b[n - 2] == '.' && b[n - 1] == '0') b[n - 2] = '\0';
  fputs(strcmp(b, "-0") ? b : "0", f);
}

/* The length of a valid UTF-8 sequence at s (0 when it is not one). */
static int utf8_len(const unsigned char *s) {
  unsigned char c = s[0];
  int len = c >= 0xc2 && c <= 0xdf   ? 2
            : c >= 0xe0 && c <= 0xef ? 3
            : c >= 0xf0 && c <= 0xf4 ? 4
                                     : 0;
  for (int i = 1; i < len; i++)
    if ((s[i] & 0xc0) != 0x80) return 0;
  if ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] > 0x9f) || (c == 0xf0 && s[1] < 0x90) ||
      (c == 0xf4 && s[1] > 0x8f))
    return 0;
  return len;
}

void ganfw_xml_fputs(FILE *f, const char *str) {
  const unsigned char *s = (const unsigned char *)(str ? str : "");
  while (*s) {
    unsigned char c = *s;
    if (c == '&') {
      fputs("&amp;", f);
    } else if (c == '<') {
      fputs("&lt;", f);
    } else if (c == '>') {
      fputs("&gt;", f);
    } else if (c == '"') {
      fputs("&quot;", f);
    } else if (c == '\'') {
      fputs("&apos;", f);
    } else if (c < 0x20 || c == 0x7f) {
      fputc('?', f);
    } else if (c >= 0x80) {
      int len = utf8_len(s);
      if (len == 0) {
        fputc('?', f);
      } else {
        fwrite(s, 1, (size_t)len, f);
        s += len;
        continue;
      }
    } else {
      fputc(c, f);
    }
    s++;
  }
}

static void svg_class(FILE *f, const char *cls) {
  if (cls) fprintf(f, " class=\"%s\"", cls);
}

static void svg_item(FILE *f, const pic *p, const pic_item *it) {
  int64_t k = p->k;
  switch (it->kind) {
  case ITEM_RECT:
    fputs("<rect", f);
    svg_class(f, it->cls);
    fputs(" x=\"", f);
    svg_num(f, it->x0);
    fputs("\" y=\"", f);
    svg_num(f, it->y0);
    fputs("\" width=\"", f);
    svg_num(f, it->x1 - it->x0);
    fputs("\" height=\"", f);
    svg_num(f, it->y1 - it->y0);
    fprintf(f, "\" fill=\"#%06x\"/>\n", (unsigned)it->rgb);
    break;
  case ITEM_LINE:
    fputs("<line", f);
    svg_class(f, it->cls);
    fputs(" x1=\"", f);
    svg_num(f, it->x0);
    fputs("\" y1=\"", f);
    svg_num(f, it->y0);
    fputs("\" x2=\"", f);
    svg_num(f, it->x1);
    fputs("\" y2=\"", f);
    svg_num(f, it->y1);
    fprintf(f, "\" stroke=\"#%06x\" stroke-width=\"", (unsigned)it->rgb);
    svg_num(f, it->width);
    fprintf(f, "\"%s/>\n", it->dashed ? " stroke-dasharray=\"4 3\"" : "");
    break;
  case ITEM_TEXT:
    fputs("<text", f);
    svg_class(f, it->cls);
    fputs(" x=\"", f);
    svg_num(f, it->x0);
    fputs("\" y=\"", f);
    svg_num(f, it->y0 + 7 * it->scale);
    fputc('"', f);
    if (it->anchor == ANCHOR_MIDDLE) fputs(" text-anchor=\"middle\"", f);
    if (it->anchor == ANCHOR_END) fputs(" text-anchor=\"end\"", f);
    if (it->scale == 2) fputs(" font-size=\"20\" font-weight=\"bold\"", f);
    fprintf(f, " fill=\"#%06x\">", (unsigned)it->rgb);
    ganfw_xml_fputs(f, it->text);
    fputs("</text>\n", f);
    break;
  case ITEM_AREA: {
    const double *top = p->ys + (size_t)(it->slot + 1) * (size_t)k;
    const double *bot = p->ys + (size_t)it->slot * (size_t)k;
    fprintf(f, "<path class=\"cat-%s\" fill=\"#%06x\" d=\"M",
            ganfw_mem_category_name(p->drawn[it->slot]), (unsigned)it->rgb);
    svg_num(f, p->ex[0]);
    fputc(',', f);
    svg_num(f, top[0]);
    for (int64_t j = 1; j < k; j++) {
      if (top[j] == top[j - 1]) continue;
      fputc('H', f);
      svg_num(f, p->ex[j]);
      fputc('V', f);
      svg_num(f, top[j]);
    }
    fputc('H', f);
    svg_num(f, p->ex[k]);
    fputc('V', f);
    svg_num(f, bot[k - 1]);
    for (int64_t j = k - 1; j >= 1; j--) {
      if (bot[j - 1] == bot[j]) continue;
      fputc('H', f);
      svg_num(f, p->ex[j]);
      fputc('V', f);
      svg_num(f, bot[j - 1]);
    }
    fputc('H', f);
    svg_num(f, p->ex[0]);
    fputs("Z\"/>\n", f);
    break;
  }
  case ITEM_RESERVED: {
    const double *r = p->res_y;
    fputs("<polyline", f);
    svg_class(f, it->cls);
    fprintf(f, " fill=\"none\" stroke=\"#%06x\" stroke-width=\"", (unsigned)it->rgb);
    svg_num(f, it->width);
    fputs("\" points=\"", f);
    svg_num(f, p->ex[0]);
    fputc(',', f);
    svg_num(f, r[0]);
    for (int64_t j = 1; j < k; j++) {
      if (r[j] == r[j - 1]) continue;
      fputc(' ', f);
      svg_num(f, p->ex[j]);
      fputc(',', f);
      svg_num(f, r[j - 1]);
      fputc(' ', f);
      svg_num(f, p->ex[j]);
      fputc(',', f);
      svg_num(f, r[j]);
    }
    fputc(' ', f);
    svg_num(f, p->ex[k]);
    fputc(',', f);
    svg_num(f, r[k - 1]);
    fputs("\"/>\n", f);
    break;
  }
  }
}

ganfw_status ganfw_timeline_write_svg(FILE *f, const ganfw_trace_event *ev, int64_t n,
                                      const ganfw_timeline_options *opt) {
  if (!f) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "timeline: write_svg needs a file");
  pic p = {0};
  ganfw_status st = pic_build(&p, ev, n, opt);
  if (st) {
    pic_free(&p);
    return st;
  }
  fprintf(f,
          "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
          "viewBox=\"0 0 %d %d\" font-family=\"monospace\" font-size=\"10\">\n<title>",
          p.w, p.h, p.w, p.h);
  ganfw_xml_fputs(f, p.title);
  fputs("</title>\n", f);
  for (size_t i = 0; i < p.n_items; i++) svg_item(f, &p, &p.items[i]);
  fputs("</svg>\n", f);
  int32_t step = p.s.step;
  pic_free(&p);
  if (fflush(f) != 0 || ferror(f))
    return ganfw_error_set(GANFW_ERR_IO, "timeline: writing the SVG of step %d failed (%s)", step,
                           strerror(errno));
  return GANFW_OK;
}

/* --- PNG ----------------------------------------------------------------------------------- */

/* 5x8 glyphs for ASCII 32..126, drawn for this file: 8 rows of 5 bits from the top (bit 4 is
 * the left column), rows 0-6 above the baseline, row 7 for descenders; a line's comment is
 * the code of its first glyph. */
// clang-format off
static const uint64_t font5x8[95] = {
    0x0000000000, 0x2108420080, 0x5280000000, 0x52beafa940, 0x23e8e2f880, 0xc644444c60, /* 32 */
    0x64a88ac9a0, 0x2100000000, 0x1110841040, 0x4104211100, 0x012aea9000, 0x0109f21000, /* 38 */
    0x0000001088, 0x0001f00000, 0x0000003180, 0x0044444000, 0x74675cc5c0, 0x23084211c0, /* 44 */
    0x74422223e0, 0xf88820c5c0, 0x11952f8840, 0xfc3c10c5c0, 0x3221e8c5c0, 0xf844442100, /* 50 */
    0x7462e8c5c0, 0x7462f08980, 0x0318063000, 0x0318063088, 0x1111041040, 0x003e0f8000, /* 56 */
    0x4104111100, 0x7442220080, 0x746f5bc1c0, 0x7463f8c620, 0xf463e8c7c0, 0x74610845c0, /* 62 */
    0xf46318c7c0, 0xfc21e843e0, 0xfc21e84200, 0x746178c5e0, 0x8c63f8c620, 0x71084211c0, /* 68 */
    0x3884214980, 0x8ca98a4a20, 0x84210843e0, 0x8eeb58c620, 0x8c7359c620, 0x746318c5c0, /* 74 */
    0xf463e84200, 0x74631ac9a0, 0xf463ea4a20, 0x7c20e087c0, 0xf908421080, 0x8c6318c5c0, /* 80 */
    0x8c6318a880, 0x8c635ad540, 0x8c54454620, 0x8c54421080, 0xf8444443e0, 0x72108421c0, /* 86 */
    0x0410410400, 0x70842109c0, 0x22a2000000, 0x000000001f, 0x4100000000, 0x001c17c5e0, /* 92 */
    0x843d18c7c0, 0x001d0845c0, 0x085f18c5e0, 0x001d1fc1c0, 0x3251c42100, 0x001f18bc2e, /* 98 */
    0x842d98c620, 0x20184211c0, 0x100c210a4c, 0x84254c5240, 0x61084211c0, 0x00355ad6a0, /* 104 */
    0x002d98c620, 0x001d18c5c0, 0x003d18fa10, 0x001f18bc21, 0x002d984200, 0x001f0707c0, /* 110 */
    0x42388424c0, 0x002318cda0, 0x002318a880, 0x00231ad540, 0x0022a22a20, 0x002318bc2e, /* 116 */
    0x003e2223e0, 0x1108821040, 0x2108421080, 0x4108221100, 0x0011510000, /* 122 */
};
// clang-format on

typedef struct raster {
  uint8_t *px; /* [h,w,3] */
  int64_t w, h;
} raster;

/* Fills [xa, xb) x [ya, yb), clipped to the image. */
static void rs_fill(raster *r, int64_t xa, int64_t ya, int64_t xb, int64_t yb, uint32_t rgb) {
  if (xa < 0) xa = 0;
  if (ya < 0) ya = 0;
  if (xb > r->w) xb = r->w;
  if (yb > r->h) yb = r->h;
  uint8_t c0 = (uint8_t)(rgb >> 16), c1 = (uint8_t)(rgb >> 8), c2 = (uint8_t)rgb;
  for (int64_t y = ya; y < yb; y++) {
    uint8_t *row = r->px + (size_t)(y * r->w) * 3;
    for (int64_t x = xa; x < xb; x++) {
      row[x * 3] = c0;
      row[x * 3 + 1] = c1;
      row[x * 3 + 2] = c2;
    }
  }
}

/* An axis-aligned line `t` pixels thick around the pixel centres it passes, dashed 4 on 3
 * off when asked. */
static void rs_line(raster *r, double x0, double y0, double x1, double y1, int64_t t, int dashed,
                    uint32_t rgb) {
  if (t < 1) t = 1;
  if (x0 == x1) {
    int64_t x = (int64_t)floor(x0) - (t - 1) / 2;
    int64_t ya = lround(y0 < y1 ? y0 : y1), yb = lround(y0 < y1 ? y1 : y0) + 1;
    for (int64_t y = ya; y < yb; y += dashed ? 7 : yb - ya)
      rs_fill(r, x, y, x + t, dashed && y + 4 < yb ? y + 4 : yb, rgb);
  } else {
    int64_t y = (int64_t)floor(y0) - (t - 1) / 2;
    int64_t xa = lround(x0 < x1 ? x0 : x1), xb = lround(x0 < x1 ? x1 : x0) + 1;
    for (int64_t x = xa; x < xb; x += dashed ? 7 : xb - xa)
      rs_fill(r, x, y, dashed && x + 4 < xb ? x + 4 : xb, y + t, rgb);
  }
}

static void rs_text(raster *r, double x, double top, int32_t anchor, int32_t scale, const char *s,
                    uint32_t rgb) {
  double tw = text_width(s, scale);
  int64_t cx = lround(anchor == ANCHOR_END ? x - tw : anchor == ANCHOR_MIDDLE ? x - tw / 2 : x);
  int64_t cy = lround(top);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++, cx += 6 * scale) {
    uint64_t g = font5x8[(*c >= 32 && *c <= 126 ? *c : '?') - 32];
    for (int row = 0; row < 8; row++)
      for (int col = 0; col < 5; col++)
        if ((g >> ((7 - row) * 5 + (4 - col))) & 1)
          rs_fill(r, cx + col * scale, cy + row * scale, cx + (col + 1) * scale,
                  cy + (row + 1) * scale, rgb);
  }
}

static void rs_item(raster *r, const pic *p, const pic_item *it) {
  int64_t k = p->k;
  switch (it->kind) {
  case ITEM_RECT:
    rs_fill(r, lround(it->x0), lround(it->y0), lround(it->x1), lround(it->y1), it->rgb);
    break;
  case ITEM_LINE:
    rs_line(r, it->x0, it->y0, it->x1, it->y1, lround(it->width), it->dashed, it->rgb);
    break;
  case ITEM_TEXT:
    rs_text(r, it->x0, it->y0, it->anchor, it->scale, it->text, it->rgb);
    break;
  case ITEM_AREA: {
    const double *top = p->ys + (size_t)(it->slot + 1) * (size_t)k;
    const double *bot = p->ys + (size_t)it->slot * (size_t)k;
    int64_t j = 0;
    for (int64_t x = lround(p->ex[0]); x < lround(p->ex[k]); x++) {
      while (j + 1 < k && p->ex[j + 1] <= x + 0.5) j++;
      rs_fill(r, x, lround(top[j]), x + 1, lround(bot[j]), it->rgb);
    }
    break;
  }
  case ITEM_RESERVED: {
    const double *ry = p->res_y;
    for (int64_t j = 0; j < k; j++) {
      int64_t y = lround(ry[j]);
      rs_fill(r, lround(p->ex[j]), y - 1, lround(p->ex[j + 1]) + 1, y + 1, it->rgb);
      if (j > 0 && ry[j] != ry[j - 1]) {
        int64_t ya = lround(ry[j] < ry[j - 1] ? ry[j] : ry[j - 1]);
        int64_t yb = lround(ry[j] < ry[j - 1] ? ry[j - 1] : ry[j]);
        rs_fill(r, lround(p->ex[j]) - 1, ya - 1, lround(p->ex[j]) + 1, yb + 1, it->rgb);
      }
    }
    break;
  }
  }
}

ganfw_status ganfw_timeline_write_png(const char *path, const ganfw_trace_event *ev, int64_t n,
                                      const ganfw_timeline_options *opt) {
  if (!path) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "timeline: write_png needs a path");
  pic p = {0};
  ganfw_status st = pic_build(&p, ev, n, opt);
  if (st) {
    pic_free(&p);
    return st;
  }
  raster r = {malloc((size_t)p.w * (size_t)p.h * 3), p.w, p.h};
  if (!r.px) {
    pic_free(&p);
    return ganfw_error_set(GANFW_ERR_OOM, "timeline: out of host memory for a %d x %d picture (%s)",
                           p.w, p.h, path);
  }
  for (size_t i = 0; i < p.n_items; i++) rs_item(&r, &p, &p.items[i]);
  st = ganfw_png_write_u8(path, r.px, p.h, p.w, 3);
  free(r.px);
  pic_free(&p);
  return st;
}
