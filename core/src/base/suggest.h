/* "Did you mean": how near a typed name is to a known one, for the suggestions of config
 * keys (config/config.c) and plugin names (plugin/plugin_host.c), one rule for both. */
#ifndef GANFW_SUGGEST_H
#define GANFW_SUGGEST_H

#include <stddef.h>

/* Optimal-string-alignment distance (Levenshtein with adjacent transpositions) between a
 * and b; (size_t)-1 when out of host memory. */
size_t ganfw_edit_distance(const char *a, const char *b);
/* 1 when a known name at distance d from a typed name of `len` characters is worth
 * suggesting: at most max(2, len / 3) edits, and fewer than len. */
int ganfw_suggest_near(size_t len, size_t d);

#endif
