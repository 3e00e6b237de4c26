/* The caching allocator's out-of-memory report (see alloc.h): what PyTorch's says (tried to
 * allocate, capacity, free, allocated, reserved but unallocated) plus fragmentation, bytes
 * per category and the biggest holders by owner, kept for ganfw_alloc_last_oom. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "runtime/alloc_internal.h"

typedef struct owner_row {
  const char *owner;
  int32_t category;
  int64_t bytes;
} owner_row;

static int owner_row_cmp(const void *x, const void *y) {
  const owner_row *p = x, *q = y;
  if (p->category != q->category) return p->category < q->category ? -1 : 1;
  if (p->owner == q->owner) return 0;
  if (!p->owner) return -1;
  if (!q->owner) return 1;
  return strcmp(p->owner, q->owner);
}

static void copy_name(char *dst, const char *src) {
  snprintf(dst, OWNER_COPY_MAX, "%s", src);
}

/* The biggest (owner, category) holders of live blocks, into r->top. */
static void oom_top_owners(ganfw_alloc *a, ganfw_oom_report *r) {
  r->n_top = 0;
  if (a->map_count == 0) return;
  owner_row *rows = malloc(a->map_count * sizeof *rows);
  if (!rows) return;
  size_t n = 0;
  for (size_t i = 0; i <= a->map_mask; i++) {
    const blk *b = a->map[i].b;
    if (!a->map[i].key) continue;
    rows[n].owner = b->owner;
    rows[n].category = b->category;
    rows[n].bytes = (int64_t)b->size;
    n++;
  }
  qsort(rows, n, sizeof *rows, owner_row_cmp);
  size_t m = 0; /* merge equal (owner, category) runs in place */
  for (size_t i = 0; i < n; i++) {
    if (m > 0 && owner_row_cmp(&rows[m - 1], &rows[i]) == 0)
      rows[m - 1].bytes += rows[i].bytes;
    else
      rows[m++] = rows[i];
  }
  for (int k = 0; k < GANFW_OOM_TOP && (size_t)k < m; k++) { /* selection of the top few */
    size_t best = (size_t)k;
    for (size_t i = (size_t)k + 1; i < m; i++)
      if (rows[i].bytes > rows[best].bytes) best = i;
    owner_row t = rows[k];
    rows[k] = rows[best];
    rows[best] = t;
    copy_name(a->oom_names[k], rows[k].owner ? rows[k].owner : "(unnamed)");
    r->top[k].owner = a->oom_names[k];
    r->top[k].category = rows[k].category;
    r->top[k].bytes = rows[k].bytes;
    r->n_top = k + 1;
  }
  free(rows);
}

/* What the request's pool had cached (every free block of each pool, by a walk of the
 * segments) and what refused the segment it needed, into r (after the limit and the
 * capacity are there). */
static void oom_diagnose(const ganfw_alloc *a, size_t size, int64_t reserved, int have_dev,
                         size_t dev_total, ganfw_oom_report *r) {
  const int large = size > GANFW_ALLOC_SMALL_SIZE || a->ar != NULL;
  r->large_pool = large;
  r->max_split_size = (int64_t)a->max_split_size;
  for (const seg *s = a->segs; s; s = s->next)
    for (const blk *b = s->first; b; b = b->next) {
      if (b->allocated) continue;
      if ((b->pool == POOL_LARGE) == large) {
        r->pool_free += (int64_t)b->size;
        if ((int64_t)b->size > r->pool_largest) r->pool_largest = (int64_t)b->size;
      } else {
        r->other_free += (int64_t)b->size;
      }
    }
  if (size > MAX_REQUEST) {
    r->cause = GANFW_OOM_CAUSE_TOO_LARGE;
    return;
  }
  const size_t seg_bytes = ganfw_alloc_segment_size(size);
  r->segment_bytes = (int64_t)seg_bytes;
  if ((a->memory_limit && size > a->memory_limit) ||
      (!a->memory_limit && have_dev && size > dev_total))
    r->cause = GANFW_OOM_CAUSE_TOO_LARGE;
  else if (a->memory_limit && (size_t)reserved + seg_bytes > a->memory_limit)
    r->cause = GANFW_OOM_CAUSE_LIMIT; /* raw_try's test, on the state it failed in */
  else
    r->cause = GANFW_OOM_CAUSE_DEVICE;
}

ganfw_status ganfw_alloc_oom(ganfw_alloc *a, size_t size, int32_t category, const char *owner) {
  ganfw_oom_report *r = &a->oom;
  memset(r, 0, sizeof *r);
  a->st.num_ooms++;
  a->have_oom = 1;
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  r->requested = (int64_t)(size > INT64_MAX ? INT64_MAX : size);
  r->req_category = category;
  copy_name(a->oom_names[GANFW_OOM_TOP], owner ? owner : "");
  r->req_owner = a->oom_names[GANFW_OOM_TOP];
  size_t total = 0, dev_free = 0;
  int have_dev = a->be->vt->capacity && a->be->vt->capacity(a->be, &total, &dev_free) == GANFW_OK;
  if (a->memory_limit) {
    r->limited = 1;
    r->capacity = (int64_t)a->memory_limit;
    int64_t left = (int64_t)a->memory_limit - st.reserved.current;
    if (left < 0) left = 0;
    if (have_dev && (int64_t)dev_free < left) left = (int64_t)dev_free;
    r->free_bytes = left;
  } else if (have_dev) {
    r->capacity = (int64_t)total;
    r->free_bytes = (int64_t)dev_free;
  }
  r->allocated = st.allocated.current;
  r->reserved = st.reserved.current;
  r->reserved_unallocated = st.reserved.current - st.allocated.current;
  r->largest_free_block = st.largest_free_block;
  r->fragmentation = st.fragmentation;
  for (int c = 0; c < GANFW_MEM_COUNT; c++) r->category[c] = st.category[c].current;
  oom_diagnose(a, size, st.reserved.current, have_dev, total, r);
  oom_top_owners(a, r);
  if (a->trace_on) ganfw_alloc_trace_add(a, GANFW_TEV_OOM, NULL, NULL, size, category, owner);
  char text[3072];
  ganfw_oom_report_format(a, r, text, sizeof text);
  return ganfw_error_set(GANFW_ERR_OOM, "%s", text);
}

int ganfw_alloc_last_oom(const ganfw_alloc *a, ganfw_oom_report *out) {
  if (!a || !a->have_oom) return 0;
  if (out) *out = a->oom;
  return 1;
}

void ganfw_alloc_set_oom_hook(ganfw_alloc *a, ganfw_oom_hook fn, void *ud) {
  if (!a) return;
  a->hook = fn;
  a->hook_ud = ud;
}

/* Appends printf-style text at *len, keeping buf NUL-terminated and *len <= n - 1. */
__attribute__((format(printf, 4, 5))) static void app(char *buf, size_t n, size_t *len,
                                                      const char *fmt, ...) {
  if (*len + 1 >= n) return;
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(buf + *len, n - *len, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  *len = (*len + (size_t)k < n - 1) ? *len + (size_t)k : n - 1;
}

/* "(a request of at most 1 MiB gets a 2 MiB segment)": the rule that sized the segment. */
static const char *segment_rule(int64_t requested) {
  if (requested <= (int64_t)GANFW_ALLOC_SMALL_SIZE)
    return "a request of at most 1 MiB gets a 2 MiB small-pool segment";
  if (requested < (int64_t)GANFW_ALLOC_MIN_LARGE)
    return "a request of 1-10 MiB gets a 20 MiB segment";
  return "a request of 10 MiB or more gets its size rounded up to 2 MiB";
}

/* The "Why:" lines: what refused the new segment, then whether the request's pool could
 * have served it from its cache (fragmentation only when its free bytes would hold the
 * request but no block does). */
static void oom_format_cause(const ganfw_oom_report *r, char *buf, size_t n, size_t *len) {
  char s1[32], s2[32], s3[32], s4[32];
  const char *pool = r->large_pool ? "large" : "small";
  const char *other = r->large_pool ? "small" : "large";
  ganfw_alloc_fmt_bytes(s1, sizeof s1, r->requested);
  switch (r->cause) {
  case GANFW_OOM_CAUSE_UNKNOWN:
    return;
  case GANFW_OOM_CAUSE_TOO_LARGE:
    if (r->segment_bytes == 0)
      app(buf, n, len, "\nWhy: the request (%s) is larger than any device holds.", s1);
    else if (r->limited)
      app(buf, n, len, "\nWhy: the request alone (%s) is larger than memory_limit %s.", s1,
          ganfw_alloc_fmt_bytes(s2, sizeof s2, r->capacity));
    else
      app(buf, n, len, "\nWhy: the request alone (%s) is larger than the device (%s).", s1,
          ganfw_alloc_fmt_bytes(s2, sizeof s2, r->capacity));
    return;
  case GANFW_OOM_CAUSE_LIMIT:
    app(buf, n, len,
        "\nWhy: the limit is reached by reserved memory: %s reserved of memory_limit %s, and "
        "the new %s segment this request needs (%s) would pass it.",
        ganfw_alloc_fmt_bytes(s2, sizeof s2, r->reserved),
        ganfw_alloc_fmt_bytes(s3, sizeof s3, r->capacity),
        ganfw_alloc_fmt_bytes(s4, sizeof s4, r->segment_bytes), segment_rule(r->requested));
    break;
  default: /* GANFW_OOM_CAUSE_DEVICE */
    app(buf, n, len, "\nWhy: the device refused the new %s segment this request needs (%s)",
        ganfw_alloc_fmt_bytes(s2, sizeof s2, r->segment_bytes), segment_rule(r->requested));
    if (r->capacity > 0)
      app(buf, n, len, "; it has %s free", ganfw_alloc_fmt_bytes(s3, sizeof s3, r->free_bytes));
    app(buf, n, len, ".");
    break;
  }
  /* the cache: the request's own pool, then the other one, which it cannot use */
  if (r->pool_largest >= r->requested && r->max_split_size > 0) {
    app(buf, n, len,
        " The %s pool's largest free block (%s) would hold it, but max_split_size %s keeps "
        "it whole (a request under max_split_size never takes a block of that size or more, "
        "a larger one only a block under the request + 20 MiB).",
        pool, ganfw_alloc_fmt_bytes(s2, sizeof s2, r->pool_largest),
        ganfw_alloc_fmt_bytes(s3, sizeof s3, r->max_split_size));
  } else if (r->pool_free >= r->requested) {
    app(buf, n, len,
        "\nReserved but unallocated memory of the %s pool (%s) would hold the request but is "
        "fragmented (the largest free block is %s).",
        pool, ganfw_alloc_fmt_bytes(s2, sizeof s2, r->pool_free),
        ganfw_alloc_fmt_bytes(s3, sizeof s3, r->pool_largest));
  } else if (r->pool_free > 0) {
    app(buf, n, len, " The %s pool's cached free memory (%s) is less than the request.", pool,
        ganfw_alloc_fmt_bytes(s2, sizeof s2, r->pool_free));
  }
  if (r->other_free > 0)
    app(buf, n, len,
        " The %s cached free in the %s pool cannot serve it (requests of at most 1 MiB use "
        "the small pool, larger ones the large pool).",
        ganfw_alloc_fmt_bytes(s2, sizeof s2, r->other_free), other);
}

void ganfw_oom_report_format(const ganfw_alloc *a, const ganfw_oom_report *r, char *buf, size_t n) {
  if (!buf || n == 0) return;
  buf[0] = '\0';
  if (!r) return;
  size_t len = 0;
  char s1[32], s2[32], s3[32], s4[32];
  app(buf, n, &len, "out of memory: tried to allocate %s",
      ganfw_alloc_fmt_bytes(s1, sizeof s1, r->requested));
  if (r->req_category >= 0 && r->req_category < GANFW_MEM_COUNT)
    app(buf, n, &len, " for %s", ganfw_mem_category_name(r->req_category));
  if (r->req_owner && r->req_owner[0]) app(buf, n, &len, " '%s'", r->req_owner);
  if (r->capacity > 0)
    app(buf, n, &len, " (%s %s, %s free; ", r->limited ? "memory_limit" : "device capacity",
        ganfw_alloc_fmt_bytes(s1, sizeof s1, r->capacity),
        ganfw_alloc_fmt_bytes(s2, sizeof s2, r->free_bytes));
  else
    app(buf, n, &len, " (device capacity unknown; ");
  app(buf, n, &len, "%s allocated by ganfw, %s reserved but unallocated).",
      ganfw_alloc_fmt_bytes(s3, sizeof s3, r->allocated),
      ganfw_alloc_fmt_bytes(s4, sizeof s4, r->reserved_unallocated));
  app(buf, n, &len, " Largest free block %s, fragmentation %.1f%%.",
      ganfw_alloc_fmt_bytes(s1, sizeof s1, r->largest_free_block), 100.0 * r->fragmentation);
  oom_format_cause(r, buf, n, &len);

  /* categories, largest first */
  int order[GANFW_MEM_COUNT], k = 0;
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    if (r->category[c] > 0) order[k++] = c;
  for (int i = 1; i < k; i++)
    for (int j = i; j > 0 && r->category[order[j]] > r->category[order[j - 1]]; j--) {
      int t = order[j];
      order[j] = order[j - 1];
      order[j - 1] = t;
    }
  if (k > 0) {
    app(buf, n, &len, "\nBy category:");
    for (int i = 0; i < k; i++)
      app(buf, n, &len, "%s %s %s", i ? "," : "", ganfw_mem_category_name(order[i]),
          ganfw_alloc_fmt_bytes(s1, sizeof s1, r->category[order[i]]));
    app(buf, n, &len, ".");
  }
  if (r->n_top > 0) {
    app(buf, n, &len, "\nBiggest holders:");
    for (int i = 0; i < r->n_top && i < GANFW_OOM_TOP; i++)
      app(buf, n, &len, "%s %s (%s) %s", i ? "," : "", r->top[i].owner ? r->top[i].owner : "?",
          ganfw_mem_category_name(r->top[i].category),
          ganfw_alloc_fmt_bytes(s1, sizeof s1, r->top[i].bytes));
    app(buf, n, &len, ".");
  }
  if (a && a->hook && len + 1 < n) {
    a->hook(a->hook_ud, r, buf + len, n - len);
    buf[n - 1] = '\0';
  }
}
