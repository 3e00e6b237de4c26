/* The one JSON string escaper (core/src/base/json.c): quotes, backslashes and control bytes
 * escaped, everything else (UTF-8 included) copied, through a callback and a stdio stream. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "testutil.h"

typedef struct {
  char s[256];
  size_t n;
  int calls;
} sink;

static void put(void *ud, const char *bytes, size_t n) {
  sink *k = ud;
  CU_ASSERT_FATAL(k->n + n < sizeof k->s);
  memcpy(k->s + k->n, bytes, n);
  k->n += n;
  k->s[k->n] = '\0';
  k->calls++;
}

static const char *lit(const char *s) {
  static sink k;
  memset(&k, 0, sizeof k);
  ganfw_json_string(s, put, &k);
  return k.s;
}

static void test_escapes(void) {
  CU_ASSERT_STRING_EQUAL(lit("plain"), "\"plain\"");
  CU_ASSERT_STRING_EQUAL(lit(""), "\"\"");
  CU_ASSERT_STRING_EQUAL(lit(NULL), "\"\"");
  CU_ASSERT_STRING_EQUAL(lit("a\"b\\c"), "\"a\\\"b\\\\c\"");
  CU_ASSERT_STRING_EQUAL(lit("tab\there\nnl\x01\x1f"), "\"tab\\u0009here\\u000anl\\u0001\\u001f\"");
  CU_ASSERT_STRING_EQUAL(lit("\"\""), "\"\\\"\\\"\"");
  CU_ASSERT_STRING_EQUAL(lit("gr\xc3\xb6\xc3\x9f"
                             "e / \x7f"),
                         "\"gr\xc3\xb6\xc3\x9f"
                         "e / \x7f\"");
}

static void test_stream_matches_callback(void) {
  const char *s = "layer \"main.0\"\\weight\n";
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  ganfw_json_fputs(f, s);
  CU_ASSERT_EQUAL(fclose(f), 0);
  CU_ASSERT_STRING_EQUAL(buf, lit(s));
  free(buf);
}

static CU_TestInfo tests[] = {
    {"escapes", test_escapes},
    {"stream_matches_callback", test_stream_matches_callback},
    CU_TEST_INFO_NULL,
};
GT_MAIN("json", tests)
