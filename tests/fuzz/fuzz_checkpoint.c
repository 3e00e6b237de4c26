/* Fuzz harness of the resume path's checkpoint metadata (io/checkpoint_meta.c over the
 * safetensors reader): format, crc32s, step, epoch, loader position, seed, RNG offset,
 * optimizer steps, data shape, memory strategies' scalars, and the checks against a run on
 * MNIST (60000 items, 1x28x28, 10 classes) with a GAN's two optimizers.
 *
 * Input: either a whole safetensors file, or, when it starts with '#', lines "key=value"
 * after that first line that become the metadata of a file the harness writes (format and
 * the run's position filled in unless given, the crc32s computed unless given, so that
 * mutations reach the field checks rather than stopping at a crc).
 * Oracle: no crash, leak or sanitizer report; every refusal names the file; what is
 * accepted lies within the documented bounds. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/checkpoint_meta.h"
#include "io/safetensors.h"

#define PATH   "fuzz.safetensors"
#define MAX_KV 64

static const ganfw_ckpt_resume_limits mnist = {
    .data_items = 60000, .channels = 1, .height = 28, .width = 28, .num_classes = 10};

static void fail(const char *why) {
  fprintf(stderr, "fuzz_checkpoint: %s (message: %s)\n", why, ganfw_error_message());
  abort();
}

/* The resume's reads and checks of f, and the oracle on their outcome. */
static void resume(const ganfw_st_file *f) {
  ganfw_ckpt_meta *m = NULL;
  ganfw_status st = ganfw_ckpt_meta_read(PATH, f, &m);
  if (st == GANFW_OK) st = ganfw_ckpt_meta_check_resume(PATH, m, &mnist);
  int64_t steps[2] = {0, 0};
  if (st == GANFW_OK) st = ganfw_ckpt_optim_step(PATH, f, "generator", &steps[0]);
  if (st == GANFW_OK) st = ganfw_ckpt_optim_step(PATH, f, "discriminator", &steps[1]);
  if (st != GANFW_OK) {
    if (!strstr(ganfw_error_message(), PATH)) fail("a refusal does not name the checkpoint");
    if (st != GANFW_ERR_IO && st != GANFW_ERR_CONFIG && st != GANFW_ERR_OOM)
      fail("a refusal that is neither IO nor CONFIG");
    ganfw_ckpt_meta_free(m);
    return;
  }
  if (m->step < 0 || m->step > GANFW_CKPT_MAX_COUNT || m->epoch < 0 ||
      m->epoch > GANFW_CKPT_MAX_COUNT || m->loader_position < 0 ||
      m->loader_position > mnist.data_items || m->rng_offset > GANFW_CKPT_MAX_RNG_OFFSET)
    fail("accepted a position outside the bounds");
  for (int k = 0; k < 2; k++)
    if (steps[k] < 0 || steps[k] > GANFW_CKPT_MAX_COUNT) fail("accepted an optimizer step");
  for (int32_t i = 0; i < m->n_extra; i++) {
    if (ganfw_ckpt_key_reserved(m->extra_keys[i])) fail("a reserved key among the extras");
    if (strncmp(m->extra_keys[i], "memory.", 7) == 0) {
      double v = strtod(m->extra_values[i], NULL);
      if (!isfinite(v) || v < 0) fail("accepted a strategy scalar that is not finite and >= 0");
    }
    if (ganfw_ckpt_meta_extra(m, m->extra_keys[i]) == NULL) fail("an extra that is not found");
  }
  ganfw_ckpt_meta_free(m);
}

/* Appends s JSON-escaped. */
static void json_str(char **p, const char *s) {
  *(*p)++ = '"';
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      *(*p)++ = '\\';
      *(*p)++ = (char)c;
    } else if (c < 0x20) {
      *p += sprintf(*p, "\\u%04x", c);
    } else {
      *(*p)++ = (char)c;
    }
  }
  *(*p)++ = '"';
}

/* "#" mode: the metadata lines into a safetensors file image with one small tensor. */
static void from_lines(const char *text, size_t size) {
  const char *keys[MAX_KV], *values[MAX_KV];
  int n = 0;
  static const char *const defaults[][2] = {{"format", "ganfw-checkpoint-1"},
                                            {"step", "10"},
                                            {"epoch", "0"},
                                            {"loader_position", "640"},
                                            {"seed", "1"},
                                            {"rng_offset", "99"},
                                            {"optim.generator.step", "10"},
                                            {"optim.discriminator.step", "10"}};
  char *copy = malloc(size + 1);
  if (!copy) return;
  memcpy(copy, text, size);
  copy[size] = '\0';
  char *line = strchr(copy, '\n'); /* past the "#..." line */
  while (line && n < MAX_KV) {
    char *start = line + 1;
    line = strchr(start, '\n');
    if (line) *line = '\0';
    char *eq = strchr(start, '=');
    if (!eq || eq == start) continue;
    *eq = '\0';
    int k = 0;
    while (k < n && strcmp(keys[k], start) != 0) k++;
    keys[k] = start;
    values[k] = eq + 1;
    if (k == n) n++;
  }
  for (size_t d = 0; d < sizeof defaults / sizeof defaults[0] && n < MAX_KV; d++) {
    int k = 0;
    while (k < n && strcmp(keys[k], defaults[d][0]) != 0) k++;
    if (k == n) keys[n] = defaults[d][0], values[n++] = defaults[d][1];
  }
  static const float w[4] = {1.0f, -2.0f, 0.5f, 4.0f};
  static const int64_t shape[1] = {4};
  char crc[9], hcrc[9];
  ganfw_ckpt_crc_format(ganfw_ckpt_crc_bytes(0, w, sizeof w), crc);
  const ganfw_ckpt_desc desc = {"generator.w", "F32", 1, shape};
  int64_t h = ganfw_ckpt_header_crc(keys, values, n, &desc, 1);
  if (h < 0) abort();
  ganfw_ckpt_crc_format(h, hcrc);
  int have_crc = 0, have_hcrc = 0;
  size_t room = 256;
  for (int k = 0; k < n; k++) {
    room += 6 * (strlen(keys[k]) + strlen(values[k])) + 8;
    have_crc |= strcmp(keys[k], "crc32") == 0;
    have_hcrc |= strcmp(keys[k], "header_crc32") == 0;
  }
  char *img = malloc(8 + room + sizeof w);
  if (!img) abort();
  char *p = img + 8;
  p += sprintf(p, "{\"generator.w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                  "\"__metadata__\":{");
  for (int k = 0; k < n; k++) {
    if (k) *p++ = ',';
    json_str(&p, keys[k]);
    *p++ = ':';
    json_str(&p, values[k]);
  }
  if (!have_crc) p += sprintf(p, "%s\"crc32\":\"%s\"", n ? "," : "", crc);
  if (!have_hcrc) p += sprintf(p, "%s\"header_crc32\":\"%s\"", n || !have_crc ? "," : "", hcrc);
  p += sprintf(p, "}}");
  while ((p - (img + 8)) % 8) *p++ = ' ';
  uint64_t hl = (uint64_t)(p - (img + 8));
  for (int i = 0; i < 8; i++) img[i] = (char)(hl >> (8 * i));
  memcpy(p, w, sizeof w);
  p += sizeof w;
  ganfw_st_file *f = NULL;
  if (ganfw_st_open_memory(img, p - img, PATH, &f) == GANFW_OK) {
    resume(f);
    ganfw_st_close(f);
  }
  free(img);
  free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 0 && data[0] == '#') {
    from_lines((const char *)data, size);
  } else {
    ganfw_st_file *f = NULL;
    if (ganfw_st_open_memory(data, (int64_t)size, PATH, &f) == GANFW_OK) {
      resume(f);
      ganfw_st_close(f);
    } else if (!strstr(ganfw_error_message(), PATH)) {
      fail("the reader's refusal does not name the file");
    }
  }
  ganfw_error_clear();
  return 0;
}
