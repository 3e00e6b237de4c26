/* JSON string literals, the one escaper for every JSON the core writes (memory.json's
 * trace, compare's JSON table, safetensors headers): quotes around, `"` and `\` escaped,
 * control bytes as \u00XX, every other byte (UTF-8 included) as it is. */
#ifndef GANFW_JSON_H
#define GANFW_JSON_H

#include <stddef.h>
#include <stdio.h>

/* Receives the literal in pieces: put(ud, bytes, n). */
typedef void (*ganfw_json_put_fn)(void *ud, const char *bytes, size_t n);

/* Emits the JSON literal of s (NULL: the empty string) through put. */
void ganfw_json_string(const char *s, ganfw_json_put_fn put, void *ud);
/* The same into a stdio stream; errors show in ferror(f). */
void ganfw_json_fputs(FILE *f, const char *s);

#endif
