/* "Did you mean" (core/src/base/suggest.c): the edit distance with transpositions and the
 * rule shared by config keys and plugin names. */
#include "base/suggest.h"
#include "testutil.h"

static void test_edit_distance(void) {
  CU_ASSERT_EQUAL(ganfw_edit_distance("", ""), 0);
  CU_ASSERT_EQUAL(ganfw_edit_distance("adam", "adam"), 0);
  CU_ASSERT_EQUAL(ganfw_edit_distance("bach_size", "batch_size"), 1); /* insertion */
  CU_ASSERT_EQUAL(ganfw_edit_distance("adma", "adam"), 1);            /* transposition */
  CU_ASSERT_EQUAL(ganfw_edit_distance("sdg", "sgd"), 1);
  CU_ASSERT_EQUAL(ganfw_edit_distance("kitten", "sitting"), 3);
  CU_ASSERT_EQUAL(ganfw_edit_distance("", "abc"), 3);
  CU_ASSERT_EQUAL(ganfw_edit_distance("abc", ""), 3);
}

static void test_near_rule(void) {
  CU_ASSERT(ganfw_suggest_near(4, 1)); /* "adma" -> adam */
  CU_ASSERT(ganfw_suggest_near(4, 2)); /* at least 2 edits allowed */
  CU_ASSERT(!ganfw_suggest_near(4, 3));
  CU_ASSERT(!ganfw_suggest_near(2, 2)); /* never as many edits as letters */
  CU_ASSERT(ganfw_suggest_near(12, 4)); /* len / 3 for longer names */
  CU_ASSERT(!ganfw_suggest_near(12, 5));
}

static CU_TestInfo tests[] = {
    {"edit_distance", test_edit_distance},
    {"near_rule", test_near_rule},
    CU_TEST_INFO_NULL,
};
GT_MAIN("suggest", tests)
