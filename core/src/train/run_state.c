/* Checkpoint metadata, resuming and stopping by signal, shared by the trainers (see
 * run_state.h). */
#include "train/run_state.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"

void ganfw_extras_add(ganfw_extras *e, const char *key, const char *fmt, double v) {
  if (e->n == GANFW_MAX_EXTRA) return;
  snprintf(e->keys[e->n], sizeof e->keys[0], "%s", key);
  snprintf(e->values[e->n], sizeof e->values[0], fmt, v);
  e->key_ptr[e->n] = e->keys[e->n];
  e->value_ptr[e->n] = e->values[e->n];
  e->n++;
}

void ganfw_extras_add_strategies(const ganfw_session *s, ganfw_extras *e) {
  for (int32_t i = 0; i < s->n_memory; i++) {
    const ganfw_session_memory *m = &s->memory[i];
    const char *name;
    double value;
    for (int32_t k = 0; m->vt->scalar && m->vt->scalar(m->self, k, &name, &value); k++) {
      char key[128];
      snprintf(key, sizeof key, "memory.%s.%s", m->name, name);
      ganfw_extras_add(e, key, "%.17g", value);
    }
  }
}

ganfw_status ganfw_run_save_checkpoint(ganfw_session *s, const char *path,
                                       const ganfw_ckpt_net *nets, int32_t n,
                                       const ganfw_loader *loader, int64_t step,
                                       const ganfw_extras *extras) {
  int64_t epoch = 0, offset = 0;
  ganfw_loader_position(loader, &epoch, &offset);
  ganfw_extras e = {.n = 0};
  ganfw_extras_add(&e, "data.channels", "%.0f", s->data_info.channels);
  ganfw_extras_add(&e, "data.height", "%.0f", s->data_info.height);
  ganfw_extras_add(&e, "data.width", "%.0f", s->data_info.width);
  if (s->data_info.num_classes > 0)
    ganfw_extras_add(&e, "data.num_classes", "%.0f", s->data_info.num_classes);
  for (int32_t i = 0; extras && i < extras->n && e.n < GANFW_MAX_EXTRA; i++) {
    memcpy(e.keys[e.n], extras->keys[i], sizeof e.keys[0]);
    memcpy(e.values[e.n], extras->values[i], sizeof e.values[0]);
    e.key_ptr[e.n] = e.keys[e.n];
    e.value_ptr[e.n] = e.values[e.n];
    e.n++;
  }
  ganfw_extras_add_strategies(s, &e);
  ganfw_ckpt_meta meta = {.step = step,
                          .epoch = epoch,
                          .loader_position = offset,
                          .seed = s->ctx->seed,
                          .rng_offset = s->ctx->rng_offset,
                          .n_extra = e.n,
                          .extra_keys = e.key_ptr,
                          .extra_values = e.value_ptr};
  ganfw_status st = ganfw_checkpoint_save(path, nets, n, &meta);
  if (st == GANFW_OK) ganfw_log(GANFW_LOG_INFO, "checkpoint %s", path);
  return st;
}

/* Gives each strategy back the scalars it saved. */
static ganfw_status restore_scalars(ganfw_session *s, const ganfw_ckpt_meta *meta) {
  for (int32_t i = 0; i < s->n_memory; i++) {
    const ganfw_session_memory *m = &s->memory[i];
    const char *name;
    double value;
    for (int32_t k = 0; m->vt->scalar && m->vt->scalar(m->self, k, &name, &value); k++) {
      char key[128];
      snprintf(key, sizeof key, "memory.%s.%s", m->name, name);
      const char *saved = ganfw_ckpt_meta_extra(meta, key);
      if (!saved || !m->vt->set_scalar) continue;
      ganfw_status st = m->vt->set_scalar(m->self, name, strtod(saved, NULL));
      if (st != GANFW_OK) return ganfw_error_wrap(st, "restoring %s", key);
    }
  }
  return GANFW_OK;
}

ganfw_status ganfw_run_resume(ganfw_session *s, const char *ckpt_dir, const ganfw_ckpt_net *nets,
                              int32_t n, ganfw_loader *loader, ganfw_ckpt_meta **meta) {
  *meta = NULL;
  const char *what = s->train.resume;
  char path[4200];
  if (strcmp(what, "latest") == 0) {
    int64_t step = -1;
    ganfw_status st = ganfw_checkpoint_latest(ckpt_dir, path, sizeof path, &step);
    if (st != GANFW_OK) return st;
    if (step < 0) {
      ganfw_log(GANFW_LOG_INFO, "train.resume: latest: no checkpoint in %s yet, starting anew",
                ckpt_dir);
      return GANFW_OK;
    }
  } else {
    snprintf(path, sizeof path, "%s", what);
  }
  /* The run's numbers the checkpoint's position and data shape must fit. */
  const ganfw_ckpt_resume_limits lim = {.data_items = s->data ? ganfw_dataset_size(s->data)
                                                              : GANFW_CKPT_MAX_COUNT,
                                        .channels = s->data_info.channels,
                                        .height = s->data_info.height,
                                        .width = s->data_info.width,
                                        .num_classes = s->data_info.num_classes};
  ganfw_ckpt_meta *m = NULL;
  ganfw_status st = ganfw_checkpoint_resume(path, nets, n, &lim, &m);
  if (st != GANFW_OK) return ganfw_error_wrap(st, "train.resume");
  if (m->seed != s->ctx->seed) {
    ganfw_log(GANFW_LOG_WARN,
              "train.resume: the checkpoint was made with seed %llu, the config says %llu; "
              "continuing with the checkpoint's",
              (unsigned long long)m->seed, (unsigned long long)s->ctx->seed);
    s->ctx->seed = m->seed;
  }
  s->ctx->rng_offset = m->rng_offset;
  st = restore_scalars(s, m);
  if (st == GANFW_OK) st = ganfw_loader_seek(loader, m->epoch, m->loader_position);
  if (st != GANFW_OK) {
    ganfw_ckpt_meta_free(m);
    return st;
  }
  ganfw_log(GANFW_LOG_INFO, "resumed from %s at step %lld", path, (long long)m->step);
  *meta = m;
  return GANFW_OK;
}

int32_t ganfw_run_already_done(int64_t step, int64_t total) {
  if (step < total) return 0;
  ganfw_log(GANFW_LOG_INFO,
            "resumed at step %lld, and this run ends at step %lld (train.max_steps, "
            "train.epochs): nothing left to train; raise train.max_steps to go on",
            (long long)step, (long long)total);
  return 1;
}

double ganfw_now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static volatile sig_atomic_t interrupted; /* the signal number, 0 none */
static volatile sig_atomic_t forwarded;   /* SIGUSR1/2 when it came as one (ganfw launch) */
static volatile sig_atomic_t grace_s;     /* what the first signal arms (seconds) */
static volatile sig_atomic_t grace_armed; /* 1: the alarm runs */
static volatile sig_atomic_t announce;    /* 1: the first signal says what happens next */
static struct sigaction previous_int, previous_term, previous_usr1, previous_usr2, previous_alrm;
static int alrm_installed;           /* previous_alrm holds the handler before ours */
static int32_t grace_base;           /* GANFW_STOP_GRACE, or the default */
static double last_ask, longest_gap; /* between two asks of the loop (ganfw_now_s) */

#define GRACE_DEFAULT_S 30
#define GRACE_MAX_S     86400

/* Writes a, the number n (when >= 0) and b to stderr: async-signal-safe. */
static void say(const char *a, long n, const char *b) {
  char buf[512], digits[24];
  size_t len = 0;
  for (const char *p = a; *p && len < sizeof buf; p++) buf[len++] = *p;
  if (n >= 0) {
    size_t k = 0;
    do {
      digits[k++] = (char)('0' + n % 10);
      n /= 10;
    } while (n > 0 && k < sizeof digits);
    while (k > 0 && len < sizeof buf) buf[len++] = digits[--k];
  }
  for (const char *p = b; *p && len < sizeof buf; p++) buf[len++] = *p;
  (void)!write(STDERR_FILENO, buf, len);
}

static const char *signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : "SIGTERM";
}

/* The grace period is over and the process still runs: it ends as the stop signal's
 * default would have ended it. */
static void on_grace_over(int sig) {
  (void)sig;
  const int as = interrupted ? interrupted : SIGTERM;
  say("ganfw: still running ", (long)grace_s,
      " s after the stop signal (a step, a file or the exit is stuck): ending the process now; "
      "the last checkpoint stands\n");
  signal(as, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, as);
  pthread_sigmask(SIG_UNBLOCK, &set, NULL);
  raise(as);
  _exit(128 + as); /* not reached: the signal's default ends the process */
}

/* SIGUSR1 and SIGUSR2 are Ctrl-C and SIGTERM forwarded by `ganfw launch` (or a scheduler):
 * mpirun passes them to every rank at once, where its own SIGTERM reaches the ranks only
 * after odls_base_sigkill_timeout. */
static void on_stop_signal(int sig) {
  const int as = sig == SIGUSR1 ? SIGINT : sig == SIGUSR2 ? SIGTERM : sig;
  if (interrupted) { /* the second one: stop now, as the signal's default would */
    signal(as, SIG_DFL);
    raise(as);
    return;
  }
  forwarded = as != sig ? sig : 0;
  interrupted = as;
  alarm((unsigned)grace_s);
  grace_armed = 1;
  if (announce) {
    say("ganfw: ", -1, signal_name(as));
    say(": stopping after this step and its checkpoint; a second signal, or ", (long)grace_s,
        " s without an end, ends the process at once\n");
  }
}

/* GANFW_STOP_GRACE when it is a whole number of seconds in 1..GRACE_MAX_S, else the
 * default (with a warning when it is set but not such a number). */
static int32_t grace_from_env(void) {
  const char *v = getenv("GANFW_STOP_GRACE");
  if (!v || !*v) return GRACE_DEFAULT_S;
  char *end = NULL;
  const long s = strtol(v, &end, 10);
  if (*end == '\0' && s >= 1 && s <= GRACE_MAX_S) return (int32_t)s;
  ganfw_log(GANFW_LOG_WARN,
            "GANFW_STOP_GRACE=%s is not a whole number of seconds from 1 to %d; the grace after "
            "a stop signal is %d s",
            v, GRACE_MAX_S, GRACE_DEFAULT_S);
  return GRACE_DEFAULT_S;
}

void ganfw_interrupt_disarm(void) {
  alarm(0);
  grace_armed = 0;
  if (alrm_installed) sigaction(SIGALRM, &previous_alrm, NULL);
  alrm_installed = 0;
}

void ganfw_interrupt_begin(void) {
  ganfw_interrupt_disarm();
  interrupted = 0;
  forwarded = 0;
  grace_base = grace_from_env();
  grace_s = grace_base;
  longest_gap = 0;
  last_ask = ganfw_now_s();
  announce = ganfw_log_level() <= GANFW_LOG_INFO;
  struct sigaction sa = {0};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &previous_int);
  sigaction(SIGTERM, &sa, &previous_term);
  sigaction(SIGUSR1, &sa, &previous_usr1);
  sigaction(SIGUSR2, &sa, &previous_usr2);
  struct sigaction over = {0};
  over.sa_handler = on_grace_over;
  sigemptyset(&over.sa_mask);
  sigaction(SIGALRM, &over, &previous_alrm);
  alrm_installed = 1;
}

void ganfw_interrupt_end(void) {
  sigaction(SIGINT, &previous_int, NULL);
  sigaction(SIGTERM, &previous_term, NULL);
  sigaction(SIGUSR1, &previous_usr1, NULL);
  sigaction(SIGUSR2, &previous_usr2, NULL);
  if (!grace_armed) ganfw_interrupt_disarm(); /* an armed grace covers the rest and exit */
}

int32_t ganfw_interrupt_requested(void) {
  const double now = ganfw_now_s();
  if (now - last_ask > longest_gap) {
    longest_gap = now - last_ask;
    const double g = grace_base + 3.0 * longest_gap + 1.0;
    grace_s = (sig_atomic_t)(g < GRACE_MAX_S ? g : GRACE_MAX_S);
  }
  last_ask = now;
  return interrupted != 0;
}

int32_t ganfw_interrupt_grace_s(void) {
  return (int32_t)grace_s;
}

int32_t ganfw_interrupt_signal(void) {
  return (int32_t)interrupted;
}

ganfw_status ganfw_interrupt_error(int64_t step, const char *ckpt_dir) {
  return ganfw_error_set(GANFW_ERR_INTERRUPTED,
                         "%s%s at step %lld; a checkpoint is in %s: continue with "
                         "--set train.resume=latest",
                         interrupted == SIGTERM ? "terminated (SIGTERM" : "interrupted (SIGINT",
                         forwarded == SIGUSR1   ? ", forwarded as SIGUSR1)"
                         : forwarded == SIGUSR2 ? ", forwarded as SIGUSR2)"
                                                : ")",
                         (long long)step, ckpt_dir);
}
