/* Name suggestions (see suggest.h). */
#include "base/suggest.h"

#include <stdlib.h>
#include <string.h>

size_t ganfw_edit_distance(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  size_t *rows = malloc(3 * (lb + 1) * sizeof *rows);
  if (!rows) return (size_t)-1;
  size_t *prev2 = rows, *prev = rows + lb + 1, *cur = rows + 2 * (lb + 1);
  for (size_t j = 0; j <= lb; j++) prev[j] = prev2[j] = j;
  for (size_t i = 1; i <= la; i++) {
    cur[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t cost = a[i - 1] != b[j - 1];
      size_t d = prev[j] + 1;
      if (cur[j - 1] + 1 < d) d = cur[j - 1] + 1;
      if (prev[j - 1] + cost < d) d = prev[j - 1] + cost;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < d)
        d = prev2[j - 2] + 1;
      cur[j] = d;
    }
    size_t *t = prev2;
    prev2 = prev;
    prev = cur;
    cur = t;
  }
  size_t d = prev[lb];
  free(rows);
  return d;
}

int ganfw_suggest_near(size_t len, size_t d) {
  size_t limit = len / 3 > 2 ? len / 3 : 2;
  return d <= limit && d < len;
}
