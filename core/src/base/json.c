/* JSON string literals (see json.h). */
#include "base/json.h"

void ganfw_json_string(const char *s, ganfw_json_put_fn put, void *ud) {
  put(ud, "\"", 1);
  const char *run = s; /* bytes waiting to be copied as they are */
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c != '"' && c != '\\' && c >= 0x20) continue;
    if (s > run) put(ud, run, (size_t)(s - run));
    char esc[8];
    if (c < 0x20) {
      snprintf(esc, sizeof esc, "\\u%04x", c);
      put(ud, esc, 6);
    } else {
      esc[0] = '\\', esc[1] = (char)c;
      put(ud, esc, 2);
    }
    run = s + 1;
  }
  if (s && s > run) put(ud, run, (size_t)(s - run));
  put(ud, "\"", 1);
}

static void put_file(void *ud, const char *bytes, size_t n) {
  fwrite(bytes, 1, n, (FILE *)ud);
}

void ganfw_json_fputs(FILE *f, const char *s) {
  ganfw_json_string(s, put_file, f);
}
