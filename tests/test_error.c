/* The error channel (core/src/base/error.c): wrap adds context, and the first failure stays
 * the one reported when a clean-up after it fails too. */
#include <string.h>

#include "base/error.h"
#include "testutil.h"

static void test_wrap_adds_context(void) {
  ganfw_error_set(GANFW_ERR_IO, "disk full");
  CU_ASSERT_EQUAL(ganfw_error_wrap(GANFW_ERR_IO, "step %d", 30), GANFW_ERR_IO);
  CU_ASSERT_STRING_EQUAL(ganfw_error_message(), "step 30: disk full");
  CU_ASSERT_EQUAL(ganfw_error_code(), GANFW_ERR_IO);
  ganfw_error_clear();
  CU_ASSERT_STRING_EQUAL(ganfw_error_message(), "");
}

static void test_first_failure_is_kept(void) {
  ganfw_error_saved first;
  /* the sample PNG failed first; memory.json fails after the loop */
  ganfw_status st = ganfw_error_set(GANFW_ERR_IO, "samples/step_000030.png: No space left");
  ganfw_error_save(&first, st);
  ganfw_status later = ganfw_error_set(GANFW_ERR_CONFIG, "memory.json: cannot write");
  CU_ASSERT_EQUAL(ganfw_error_first(&first, later), GANFW_ERR_IO);
  CU_ASSERT_EQUAL(ganfw_error_code(), GANFW_ERR_IO);
  CU_ASSERT_STRING_EQUAL(
      ganfw_error_message(),
      "samples/step_000030.png: No space left; later: memory.json: cannot write");

  /* the clean-up succeeded but touched the message: the first one comes back */
  ganfw_error_set(GANFW_ERR_IO, "first");
  ganfw_error_save(&first, GANFW_ERR_IO);
  ganfw_error_clear();
  CU_ASSERT_EQUAL(ganfw_error_first(&first, GANFW_OK), GANFW_ERR_IO);
  CU_ASSERT_STRING_EQUAL(ganfw_error_message(), "first");

  /* nothing failed before: the later status and message stand */
  ganfw_error_clear();
  ganfw_error_save(&first, GANFW_OK);
  later = ganfw_error_set(GANFW_ERR_IO, "memory.json: cannot write");
  CU_ASSERT_EQUAL(ganfw_error_first(&first, later), GANFW_ERR_IO);
  CU_ASSERT_STRING_EQUAL(ganfw_error_message(), "memory.json: cannot write");
  ganfw_error_clear();
  ganfw_error_save(&first, GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_error_first(&first, GANFW_OK), GANFW_OK);
}

static CU_TestInfo tests[] = {
    {"wrap_adds_context", test_wrap_adds_context},
    {"first_failure_is_kept", test_first_failure_is_kept},
    CU_TEST_INFO_NULL,
};
GT_MAIN("error", tests)
