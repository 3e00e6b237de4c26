/* The grace period after a stop signal (core/src/train/run_state.c): a process that has
 * not ended GANFW_STOP_GRACE seconds after SIGTERM or SIGINT (a step stuck in a library,
 * an exit that waits for a thread) is ended then, killed by that signal, with one line
 * saying so; the grace covers what follows the loop too, a run that ends without a signal
 * leaves no alarm behind, and the grace grows with the longest step. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "train/run_state.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Forks a child that runs `body` with GANFW_STOP_GRACE=1 and stderr to /dev/null; returns its
 * wait status and *seconds until it ended. The child exits 0 when `body` returns. */
static int in_child(void (*body)(void), double *seconds) {
  const double t0 = now_s();
  const pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    setenv("GANFW_STOP_GRACE", "1", 1);
    if (!freopen("/dev/null", "w", stderr)) _exit(5);
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  *seconds = now_s() - t0;
  return status;
}

/* A step that never returns to the loop, the signal's flag unread. */
static void stuck_in_step(void) {
  ganfw_interrupt_begin();
  raise(SIGTERM);
  const double t0 = now_s();
  while (now_s() - t0 < 10.0) {
  }
}

static void test_stuck_step_ends(void) {
  double s = 0;
  const int status = in_child(stuck_in_step, &s);
  CU_ASSERT(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CU_ASSERT_EQUAL(WTERMSIG(status), SIGTERM);
  CU_ASSERT(s > 0.8 && s < 4.0);
}

/* The loop stopped, but what follows it (a report, exit) hangs. */
static void stuck_after_loop(void) {
  ganfw_interrupt_begin();
  raise(SIGINT);
  ganfw_interrupt_end();
  sleep(10);
}

static void test_grace_outlives_end(void) {
  double s = 0;
  const int status = in_child(stuck_after_loop, &s);
  CU_ASSERT(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CU_ASSERT_EQUAL(WTERMSIG(status), SIGINT);
  CU_ASSERT(s < 4.0);
}

/* A run without a signal leaves no alarm: the process lives on past the grace. */
static void no_signal(void) {
  ganfw_interrupt_begin();
  ganfw_interrupt_end();
  sleep(2);
}

static void test_no_signal_no_alarm(void) {
  double s = 0;
  const int status = in_child(no_signal, &s);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CU_ASSERT(s >= 1.9);
}

/* The grace is GANFW_STOP_GRACE (default 30 s) plus three times the longest step. */
static void test_grace_grows_with_steps(void) {
  const char *old = getenv("GANFW_STOP_GRACE");
  char *saved = old ? strdup(old) : NULL;
  unsetenv("GANFW_STOP_GRACE");
  ganfw_interrupt_begin();
  CU_ASSERT_EQUAL(ganfw_interrupt_grace_s(), 30);
  usleep(400000); /* a step of 0.4 s */
  CU_ASSERT_FALSE(ganfw_interrupt_requested());
  CU_ASSERT(ganfw_interrupt_grace_s() >= 31 && ganfw_interrupt_grace_s() <= 33);
  ganfw_interrupt_end();
  setenv("GANFW_STOP_GRACE", "nonsense", 1); /* not seconds: the default, with a warning */
  ganfw_interrupt_begin();
  CU_ASSERT_EQUAL(ganfw_interrupt_grace_s(), 30);
  ganfw_interrupt_end();
  setenv("GANFW_STOP_GRACE", "5", 1);
  ganfw_interrupt_begin();
  CU_ASSERT_EQUAL(ganfw_interrupt_grace_s(), 5);
  ganfw_interrupt_end();
  if (saved)
    setenv("GANFW_STOP_GRACE", saved, 1);
  else
    unsetenv("GANFW_STOP_GRACE");
  free(saved);
}

static CU_TestInfo tests[] = {
    {"a stuck step ends after the grace", test_stuck_step_ends},
    {"the grace covers what follows the loop", test_grace_outlives_end},
    {"no signal, no alarm", test_no_signal_no_alarm},
    {"the grace grows with the longest step", test_grace_grows_with_steps},
    CU_TEST_INFO_NULL};

GT_MAIN("stop_grace", tests)
