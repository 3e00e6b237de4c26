/* The allocator's trace as Chrome Trace Event JSON, and read back from memory.json (see
 * trace_file.h). */
#include "io/trace_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "base/json.h"
#include "runtime/alloc.h"

/* --- Chrome's Trace Event JSON ------------------------------------------------------------ */

enum { TID_STEPS = 1, TID_PHASES = 2, TID_OPS = 3 };
#define OP_DEPTH 64

typedef struct chrome_out {
  FILE *f;
  int first; /* no event written yet */
} chrome_out;

static void sep(chrome_out *o) {
  fputs(o->first ? "\n" : ",\n", o->f);
  o->first = 0;
}

static void us(FILE *f, int64_t t_ns) {
  fprintf(f, "%" PRId64 ".%03d", t_ns / 1000, (int)(t_ns % 1000));
}

/* A complete event: name on thread tid from t0 to t1. */
static void slice(chrome_out *o, int tid, const char *name, const char *cat, int64_t t0,
                  int64_t t1) {
  sep(o);
  fputs("{\"ph\": \"X\", \"pid\": 1, \"tid\": ", o->f);
  fprintf(o->f, "%d, \"name\": ", tid);
  ganfw_json_fputs(o->f, name);
  fputs(", \"cat\": ", o->f);
  ganfw_json_fputs(o->f, cat);
  fputs(", \"ts\": ", o->f);
  us(o->f, t0);
  fputs(", \"dur\": ", o->f);
  us(o->f, t1 > t0 ? t1 - t0 : 0);
  fputc('}', o->f);
}

static void counters(chrome_out *o, int64_t t, const int64_t *cat, int64_t reserved) {
  sep(o);
  fputs("{\"ph\": \"C\", \"pid\": 1, \"name\": \"allocated\", \"ts\": ", o->f);
  us(o->f, t);
  fputs(", \"args\": {", o->f);
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    fprintf(o->f, "%s\"%s\": %" PRId64, c ? ", " : "", ganfw_mem_category_name(c), cat[c]);
  fputs("}}", o->f);
  sep(o);
  fputs("{\"ph\": \"C\", \"pid\": 1, \"name\": \"reserved\", \"ts\": ", o->f);
  us(o->f, t);
  fprintf(o->f, ", \"args\": {\"reserved\": %" PRId64 "}}", reserved);
}

static void thread_name(chrome_out *o, int tid, const char *name) {
  sep(o);
  fprintf(o->f,
          "{\"ph\": \"M\", \"pid\": 1, \"tid\": %d, \"name\": \"thread_name\", "
          "\"args\": {\"name\": \"%s\"}}",
          tid, name);
}

static void phase_name(const ganfw_trace_event *e, char *buf, size_t n) {
  const char *pass = ganfw_trace_pass_name(e->pass);
  snprintf(buf, n, "%s%s%s", ganfw_trace_stage_name(e->stage), *pass ? " " : "", pass);
}

ganfw_status ganfw_trace_write_chrome(FILE *f, const ganfw_trace_event *ev, int64_t n,
                                      const char *title) {
  if (!f || (n > 0 && !ev))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "ganfw_trace_write_chrome: NULL argument");
  chrome_out o = {f, 1};
  fputs("{\"traceEvents\": [", f);
  sep(&o);
  fputs("{\"ph\": \"M\", \"pid\": 1, \"name\": \"process_name\", \"args\": {\"name\": "
        "\"ganfw device memory\"}}",
        f);
  thread_name(&o, TID_STEPS, "steps");
  thread_name(&o, TID_PHASES, "phases");
  thread_name(&o, TID_OPS, "layers");
  int64_t cat[GANFW_MEM_COUNT] = {0}, reserved = 0;
  int64_t step_t0 = 0, phase_t0 = 0;
  int32_t step = 0, in_live = 0;
  int32_t ph_stage = -1, ph_pass = -1;
  struct {
    const char *name;
    int64_t t0;
    int32_t stage, pass;
  } ops[OP_DEPTH];
  int depth = 0;
  char name[256];
  for (int64_t i = 0; i < n; i++) {
    const ganfw_trace_event *e = &ev[i];
    /* the phase band: a run of events with the same stage and pass inside a step */
    if (step > 0 && (e->stage != ph_stage || e->pass != ph_pass || e->kind == GANFW_TEV_STEP)) {
      if (ph_stage >= 0 && e->t_ns > phase_t0) {
        const ganfw_trace_event pe = {.stage = ph_stage, .pass = ph_pass};
        phase_name(&pe, name, sizeof name);
        slice(&o, TID_PHASES, name, "phase", phase_t0, e->t_ns);
      }
      ph_stage = e->stage;
      ph_pass = e->pass;
      phase_t0 = e->t_ns;
    }
    switch (e->kind) {
    case GANFW_TEV_STEP:
      if (step > 0) {
        snprintf(name, sizeof name, "step %d", (int)step);
        slice(&o, TID_STEPS, name, "step", step_t0, e->t_ns);
      }
      step = e->step;
      step_t0 = e->t_ns;
      ph_stage = step > 0 ? e->stage : -1;
      ph_pass = e->pass;
      phase_t0 = e->t_ns;
      depth = 0;
      if (step > 0) { /* the LIVE snapshot that follows restates every category */
        memset(cat, 0, sizeof cat);
        in_live = 1;
      }
      break;
    case GANFW_TEV_LIVE:
      if (e->category >= 0 && e->category < GANFW_MEM_COUNT) cat[e->category] += e->size;
      break;
    case GANFW_TEV_ALLOC:
    case GANFW_TEV_FREE:
      if (e->category >= 0 && e->category < GANFW_MEM_COUNT)
        cat[e->category] += e->kind == GANFW_TEV_ALLOC ? e->size : -e->size;
      reserved = e->reserved;
      counters(&o, e->t_ns, cat, reserved);
      break;
    case GANFW_TEV_SEGMENT_ALLOC:
    case GANFW_TEV_SEGMENT_FREE:
    case GANFW_TEV_EMPTY_CACHE:
      reserved = e->reserved;
      counters(&o, e->t_ns, cat, reserved);
      if (e->kind == GANFW_TEV_EMPTY_CACHE) {
        sep(&o);
        fprintf(f,
                "{\"ph\": \"i\", \"pid\": 1, \"tid\": %d, \"s\": \"p\", \"name\": "
                "\"empty_cache\", \"ts\": ",
                TID_PHASES);
        us(f, e->t_ns);
        fprintf(f, ", \"args\": {\"released\": %" PRId64 "}}", e->size);
      }
      break;
    case GANFW_TEV_OOM:
      sep(&o);
      fprintf(f,
              "{\"ph\": \"i\", \"pid\": 1, \"tid\": %d, \"s\": \"p\", \"name\": "
              "\"out of memory\", \"ts\": ",
              TID_PHASES);
      us(f, e->t_ns);
      fprintf(f, ", \"args\": {\"requested\": %" PRId64 ", \"owner\": ", e->size);
      ganfw_json_fputs(f, e->owner ? e->owner : "");
      fputs("}}", f);
      break;
    case GANFW_TEV_OP_BEGIN:
      if (depth < OP_DEPTH) {
        ops[depth].name = e->owner ? e->owner : "(unnamed)";
        ops[depth].t0 = e->t_ns;
        ops[depth].stage = e->stage;
        ops[depth].pass = e->pass;
      }
      depth++;
      break;
    case GANFW_TEV_OP_END:
      if (depth > 0 && --depth < OP_DEPTH) {
        const ganfw_trace_event pe = {.stage = ops[depth].stage, .pass = ops[depth].pass};
        phase_name(&pe, name, sizeof name);
        slice(&o, TID_OPS, ops[depth].name, name, ops[depth].t0, e->t_ns);
      }
      break;
    default:
      break;
    }
    if (in_live && (i + 1 == n || ev[i + 1].kind != GANFW_TEV_LIVE)) {
      in_live = 0; /* the snapshot is complete: one sample of every counter */
      counters(&o, e->t_ns, cat, e->reserved);
    }
  }
  if (step > 0 && n > 0) {
    snprintf(name, sizeof name, "step %d", (int)step);
    slice(&o, TID_STEPS, name, "step", step_t0, ev[n - 1].t_ns);
  }
  fputs("\n],\n\"displayTimeUnit\": \"ms\",\n\"otherData\": {\"title\": ", f);
  ganfw_json_fputs(f, title ? title : "ganfw memory trace");
  fprintf(f, ", \"events\": %" PRId64 "}\n}\n", n);
  if (ferror(f))
    return ganfw_error_set(GANFW_ERR_IO, "could not write the Chrome trace: write error on the "
                                         "output stream (disk full?)");
  return GANFW_OK;
}

typedef struct chrome_job {
  const ganfw_trace_event *ev;
  int64_t n;
  const char *title;
} chrome_job;

static ganfw_status write_chrome(FILE *f, void *ud) {
  const chrome_job *j = ud;
  return ganfw_trace_write_chrome(f, j->ev, j->n, j->title);
}

ganfw_status ganfw_trace_write_chrome_file(const char *path, const ganfw_trace_event *ev, int64_t n,
                                           const char *title) {
  chrome_job j = {ev, n, title};
  return ganfw_file_write_atomic(path, write_chrome, &j);
}

/* --- memory.json's events ------------------------------------------------------------------ */

/* The value after `"key": ` in line, or NULL. */
static const char *field(const char *line, const char *key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\": ", key);
  const char *p = strstr(line, pat);
  return p ? p + strlen(pat) : NULL;
}

static int64_t int_field(const char *line, const char *key, int *ok) {
  const char *p = field(line, key);
  if (!p) {
    *ok = 0;
    return 0;
  }
  char *end;
  errno = 0;
  long long v = strtoll(*p == '"' ? p + 1 : p, &end, 0);
  if (errno || end == p) *ok = 0;
  return v;
}

/* A JSON string literal at p (after its opening quote is checked) unescaped into out (n
 * bytes); returns 0, or -1 when it is not one. */
static int string_at(const char *p, char *out, size_t n) {
  if (!p || *p != '"') return -1;
  size_t k = 0;
  for (p++; *p && *p != '"'; p++) {
    char c = *p;
    if (c == '\\') {
      p++;
      if (*p == 'u') { /* \u00XX, as the core writes control bytes: four hex digits */
        unsigned v = 0;
        for (int d = 1; d <= 4; d++) {
          const char h = p[d];
          if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F')))
            return -1;
          v = v * 16 + (unsigned)(h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        c = (char)v;
        p += 4;
      } else if (*p == 'n') {
        c = '\n';
      } else if (*p == 't') {
        c = '\t';
      } else if (*p == 'r') {
        c = '\r';
      } else if (*p == '"' || *p == '\\' || *p == '/') {
        c = *p;
      } else {
        return -1;
      }
    }
    if (k + 1 < n) out[k++] = c;
  }
  if (*p != '"') return -1;
  out[k] = '\0';
  return 0;
}

static int32_t name_index(const char *s, const char *(*name)(int32_t), int32_t count) {
  for (int32_t i = 0; i < count; i++)
    if (strcmp(s, name(i)) == 0) return i;
  return -1;
}

static const char *kind_name(int32_t i) {
  return ganfw_trace_kind_name(i);
}
static const char *stage_name(int32_t i) {
  return ganfw_trace_stage_name(i);
}
static const char *pass_name(int32_t i) {
  return ganfw_trace_pass_name(i);
}
static const char *category_name(int32_t i) {
  return ganfw_mem_category_name(i);
}

/* One event line into *e, its owner (or "") into owner. 0, or -1 when malformed. */
static int parse_event(const char *line, ganfw_trace_event *e, char *owner, size_t n) {
  char word[64];
  int ok = 1;
  memset(e, 0, sizeof *e);
  if (string_at(field(line, "kind"), word, sizeof word) != 0) return -1;
  e->kind = name_index(word, kind_name, GANFW_TEV_COUNT);
  if (string_at(field(line, "stage"), word, sizeof word) != 0) return -1;
  e->stage = name_index(word, stage_name, GANFW_STAGE_COUNT);
  if (string_at(field(line, "pass"), word, sizeof word) != 0) return -1;
  e->pass = name_index(word, pass_name, GANFW_PASS_COUNT);
  if (e->kind < 0 || e->stage < 0 || e->pass < 0) return -1;
  e->t_ns = int_field(line, "t_ns", &ok);
  e->step = (int32_t)int_field(line, "step", &ok);
  e->ptr = (uint64_t)int_field(line, "ptr", &ok);
  e->size = int_field(line, "size", &ok);
  e->allocated = int_field(line, "allocated", &ok);
  e->reserved = int_field(line, "reserved", &ok);
  if (!ok) return -1;
  const char *c = field(line, "category");
  e->category = -1;
  if (c && *c == '"') {
    if (string_at(c, word, sizeof word) != 0) return -1;
    e->category = name_index(word, category_name, GANFW_MEM_COUNT);
  }
  const char *o = field(line, "owner");
  owner[0] = '\0';
  if (o && *o == '"' && string_at(o, owner, n) != 0) return -1;
  return 0;
}

ganfw_status ganfw_trace_read_memory_json(const char *path, ganfw_trace_event **ev, int64_t *n,
                                          char **names) {
  *ev = NULL;
  *n = 0;
  *names = NULL;
  FILE *f = fopen(path, "r");
  if (!f) return ganfw_error_set(GANFW_ERR_IO, "%s: cannot read it: %s", path, strerror(errno));
  ganfw_status st = GANFW_OK;
  char *line = NULL, owner[1024];
  size_t cap_line = 0, cap = 0, pool_len = 0, pool_cap = 0;
  int64_t lineno = 0;
  int32_t saw_trace = 0;
  ganfw_trace_event *out = NULL;
  size_t *owner_at = NULL; /* offset of each event's owner in the pool + 1; 0: none */
  char *pool = NULL;
  while (st == GANFW_OK && getline(&line, &cap_line, f) > 0) {
    lineno++;
    if (strstr(line, "\"trace\": {")) saw_trace = 1;
    if (!saw_trace || !strstr(line, "{\"t_ns\": ")) continue;
    ganfw_trace_event e;
    if (parse_event(line, &e, owner, sizeof owner) != 0) {
      st = ganfw_error_set(GANFW_ERR_CONFIG, "%s:%lld: not a trace event of ganfw's memory.json",
                           path, (long long)lineno);
      break;
    }
    if ((size_t)*n == cap) {
      size_t nc = cap ? cap * 2 : 4096;
      ganfw_trace_event *no = realloc(out, nc * sizeof *no);
      size_t *na = no ? realloc(owner_at, nc * sizeof *na) : NULL;
      if (no) out = no;
      if (!na) {
        st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory reading %s", path);
        break;
      }
      owner_at = na;
      cap = nc;
    }
    owner_at[*n] = 0;
    if (owner[0]) {
      const size_t len = strlen(owner) + 1;
      if (pool_len + len > pool_cap) {
        size_t pc = pool_cap ? pool_cap * 2 : 65536;
        while (pc < pool_len + len) pc *= 2;
        char *np = realloc(pool, pc);
        if (!np) {
          st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory reading %s", path);
          break;
        }
        pool = np;
        pool_cap = pc;
      }
      memcpy(pool + pool_len, owner, len);
      owner_at[*n] = pool_len + 1;
      pool_len += len;
    }
    out[(*n)++] = e;
  }
  free(line);
  if (st == GANFW_OK && ferror(f))
    st = ganfw_error_set(GANFW_ERR_IO, "%s: read error: %s", path, strerror(errno));
  fclose(f);
  if (st == GANFW_OK && !saw_trace)
    st = ganfw_error_set(GANFW_ERR_CONFIG, "%s: not a ganfw memory.json (no \"trace\" section)",
                         path);
  if (st == GANFW_OK && *n == 0)
    st = ganfw_error_set(GANFW_ERR_CONFIG,
                         "%s holds no trace events: the run was not traced; train it with "
                         "device.trace: true (or `ganfw CONFIG --trace`), or plot the config "
                         "instead (`ganfw plot CONFIG`, from the plan)",
                         path);
  if (st != GANFW_OK) {
    free(out);
    free(owner_at);
    free(pool);
    *n = 0;
    return st;
  }
  for (int64_t i = 0; i < *n; i++) out[i].owner = owner_at[i] ? pool + owner_at[i] - 1 : NULL;
  free(owner_at);
  *ev = out;
  *names = pool;
  return GANFW_OK;
}
