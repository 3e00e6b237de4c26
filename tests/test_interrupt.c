/* Stopping a training run by signal (core/src/train/run_state.c): SIGINT and SIGTERM raise
 * a flag naming the signal, a second signal ends the process at once, killed by it, and
 * end puts the previous handlers back. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "testutil.h"
#include "train/run_state.h"

static volatile sig_atomic_t custom_seen;
static void custom(int sig) {
  custom_seen = sig;
}

static void test_flag_names_signal(void) {
  const int sigs[] = {SIGINT, SIGTERM};
  for (int i = 0; i < 2; i++) {
    ganfw_interrupt_begin();
    CU_ASSERT_FALSE(ganfw_interrupt_requested());
    CU_ASSERT_EQUAL(ganfw_interrupt_signal(), 0);
    raise(sigs[i]);
    CU_ASSERT(ganfw_interrupt_requested());
    CU_ASSERT_EQUAL(ganfw_interrupt_signal(), sigs[i]);
    CU_ASSERT_EQUAL(ganfw_interrupt_error(42, "runs/x/checkpoints"), GANFW_ERR_INTERRUPTED);
    const char *m = ganfw_error_message();
    CU_ASSERT_PTR_NOT_NULL(strstr(m, sigs[i] == SIGTERM ? "SIGTERM" : "SIGINT"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "step 42"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "runs/x/checkpoints"));
    CU_ASSERT_PTR_NOT_NULL(strstr(m, "train.resume=latest"));
    ganfw_interrupt_end();
  }
}

static void test_end_restores_previous(void) {
  struct sigaction sa = {0}, old_int, old_term;
  sa.sa_handler = custom;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  ganfw_interrupt_begin();
  ganfw_interrupt_end();
  custom_seen = 0;
  raise(SIGTERM);
  CU_ASSERT_EQUAL(custom_seen, SIGTERM);
  custom_seen = 0;
  raise(SIGINT);
  CU_ASSERT_EQUAL(custom_seen, SIGINT);
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
}

/* In a child: the first signal only raises the flag, the second kills at once. */
static void second_signal_kills(int first, int second) {
  pid_t pid = fork();
  CU_ASSERT_FATAL(pid >= 0);
  if (pid == 0) {
    ganfw_interrupt_begin();
    raise(first);
    if (!ganfw_interrupt_requested()) _exit(3);
    raise(second);
    _exit(0); /* not reached when the second signal killed it */
  }
  int status = 0;
  CU_ASSERT_EQUAL(waitpid(pid, &status, 0), pid);
  CU_ASSERT(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CU_ASSERT_EQUAL(WTERMSIG(status), second);
}

static void test_second_signal_exits_at_once(void) {
  second_signal_kills(SIGINT, SIGINT);
  second_signal_kills(SIGTERM, SIGTERM);
  second_signal_kills(SIGTERM, SIGINT);
}

static CU_TestInfo tests[] = {
    {"flag_names_signal", test_flag_names_signal},
    {"end_restores_previous", test_end_restores_previous},
    {"second_signal_exits_at_once", test_second_signal_exits_at_once},
    CU_TEST_INFO_NULL,
};
GT_MAIN("interrupt", tests)
