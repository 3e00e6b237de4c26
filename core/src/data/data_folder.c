/* The folder source: every *.png directly in a directory, sorted by name (strcmp), label 0.
 * Each sample is decoded from its file when requested ([c,h,w] in [0,1] as stored; the
 * transforms convert channels and size). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data/data_source.h"
#include "base/error.h"
#include "io/png_io.h"

typedef struct folder_src {
  char **paths; /* [n], "dir/name.png" */
  int64_t n;
} folder_src;

static ganfw_status folder_load(const void *self, int64_t index, ganfw_raw_image *img,
                                int32_t *label) {
  const folder_src *s = self;
  *label = 0;
  return ganfw_png_read(s->paths[index], &img->pixels, &img->c, &img->h, &img->w);
}

static const char *folder_sample_path(const void *self, int64_t index) {
  const folder_src *s = self;
  return s->paths[index];
}

static void folder_destroy(void *self) {
  folder_src *s = self;
  if (!s) return;
  for (int64_t i = 0; i < s->n; i++) free(s->paths[i]);
  free(s->paths);
  free(s);
}

static const ganfw_source_vt folder_vt = {folder_load, folder_sample_path, folder_destroy};

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_png_name(const char *name) {
  const size_t len = strlen(name);
  return len > 4 && strcasecmp(name + len - 4, ".png") == 0;
}

/* Every regular *.png file directly in `dir` into s->paths, sorted by name; no PNG files
 * is GANFW_ERR_IO. */
static ganfw_status list_pngs(const char *dir, folder_src *s) {
  DIR *d = opendir(dir);
  if (!d && errno == ENOTDIR)
    return ganfw_error_set(GANFW_ERR_IO,
                           "image folder '%s' is a file, not a folder: give the folder that "
                           "holds the .png files",
                           dir);
  if (!d)
    return ganfw_error_set(GANFW_ERR_IO, "cannot open image folder '%s': %s", dir, strerror(errno));
  int64_t cap = 0;
  ganfw_status st = GANFW_OK;
  const struct dirent *e;
  while (st == GANFW_OK && (e = readdir(d)) != NULL) {
    if (!is_png_name(e->d_name)) continue;
    const size_t len = strlen(dir) + 1 + strlen(e->d_name) + 1;
    char *path = malloc(len);
    if (!path) {
      st = ganfw_error_set(GANFW_ERR_OOM, "image folder '%s': no host memory", dir);
      break;
    }
    snprintf(path, len, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
      free(path);
      continue;
    }
    if (s->n == cap) {
      cap = cap ? 2 * cap : 256;
      char **grown = realloc(s->paths, sizeof(char *) * cap);
      if (!grown) {
        free(path);
        st = ganfw_error_set(GANFW_ERR_OOM, "image folder '%s': no host memory", dir);
        break;
      }
      s->paths = grown;
    }
    s->paths[s->n++] = path;
  }
  closedir(d);
  if (st == GANFW_OK && s->n == 0)
    st = ganfw_error_set(GANFW_ERR_IO, "image folder '%s' holds no .png files", dir);
  if (st == GANFW_OK) qsort(s->paths, (size_t)s->n, sizeof(char *), by_name);
  return st;
}

ganfw_status ganfw_dataset_open_folder(const char *dir, const ganfw_transform *tf,
                                       ganfw_dataset **out) {
  *out = NULL;
  if (!dir) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "image folder: no directory given");
  folder_src *s = calloc(1, sizeof *s);
  if (!s) return ganfw_error_set(GANFW_ERR_OOM, "image folder: no host memory");
  ganfw_status st = list_pngs(dir, s);
  int32_t c = 0, h = 0, w = 0;
  if (st == GANFW_OK) st = ganfw_png_read_size(s->paths[0], &c, &h, &w);
  if (st != GANFW_OK) {
    folder_destroy(s);
    return st;
  }
  char name[4200];
  snprintf(name, sizeof name, "image folder '%s'", dir);
  return ganfw_dataset_wrap(&folder_vt, s, name, s->n, 1, h, w, 3, tf, out);
}

ganfw_status ganfw_dataset_count_folder(const char *dir, int64_t *n) {
  *n = 0;
  if (!dir) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "image folder: no directory given");
  folder_src s = {NULL, 0};
  ganfw_status st = list_pngs(dir, &s);
  if (st == GANFW_OK) *n = s.n;
  for (int64_t i = 0; i < s.n; i++) free(s.paths[i]);
  free(s.paths);
  return st;
}
