/* The folder source, laid out as torchvision's ImageFolder reads one: PNG and JPEG files
 * (told by their first bytes) directly in a folder (label 0), or one sub-folder a class,
 * optionally under train/ and test/ (data.h, ganfw_dataset_open_folder). Each sample is
 * decoded from its file when requested ([c,h,w] in [0,1] as stored, a JPEG possibly scaled
 * down in the DCT domain; the transforms composite alpha, convert channels and size). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/data_source.h"
#include "base/error.h"
#include "base/log.h"
#include "io/jpeg_io.h"
#include "io/png_io.h"

/* Folders below a class folder are walked this deep at most (a symbolic link that points
 * up would otherwise be walked for ever). */
#define FOLDER_MAX_DEPTH 32

typedef enum { IMAGE_NONE = 0, IMAGE_PNG, IMAGE_JPEG } image_format;

typedef struct folder_sample {
  char *path;     /* "dir/.../name" */
  size_t dir_len; /* path[dir_len] is the '/' before the name */
  int32_t label;
  uint8_t format; /* image_format */
} folder_sample;

typedef struct folder_src {
  folder_sample *samples; /* [n], in class order, each class in os.walk order */
  int64_t n, cap;
  char **classes; /* [num_classes] class folder names; NULL for a flat folder */
  int32_t num_classes;
  int32_t min_h, min_w; /* JPEGs decode no smaller than this (0: full size) */
} folder_src;

/* What was left out of a listing, for the one warning after it. */
typedef struct folder_skips {
  int64_t not_image, root_image, beside_split;
  char not_image_eg[512], root_image_eg[512], beside_split_eg[512];
  const char *lone_split; /* "train" or "test": the only class folder has that name */
} folder_skips;

static void count_skip(int64_t *n, char *eg, size_t cap, const char *path) {
  if ((*n)++ == 0) snprintf(eg, cap, "%s", path);
}

/* --- reading a sample ------------------------------------------------------------------- */
static ganfw_status folder_load(const void *self, int64_t index, ganfw_raw_image *img,
                                int32_t *label) {
  const folder_src *s = self;
  const folder_sample *e = &s->samples[index];
  *label = e->label;
  img->full_h = img->full_w = 0;
  if (e->format == IMAGE_JPEG)
    return ganfw_jpeg_read_scaled(e->path, s->min_h, s->min_w, &img->pixels, &img->c, &img->h,
                                  &img->w, &img->full_h, &img->full_w);
  return ganfw_png_read(e->path, &img->pixels, &img->c, &img->h, &img->w);
}

static const char *folder_sample_path(const void *self, int64_t index) {
  const folder_src *s = self;
  return s->samples[index].path;
}

static void free_names(char **v, int64_t n) {
  for (int64_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

static void folder_destroy(void *self) {
  folder_src *s = self;
  if (!s) return;
  for (int64_t i = 0; i < s->n; i++) free(s->samples[i].path);
  free(s->samples);
  free_names(s->classes, s->num_classes);
  free(s);
}

static const ganfw_source_vt folder_vt = {folder_load, folder_sample_path, folder_destroy};

/* --- listing ------------------------------------------------------------------------------ */
typedef struct name_list {
  char **v;
  int64_t n, cap;
} name_list;

static ganfw_status no_memory(const char *dir) {
  return ganfw_error_set(GANFW_ERR_OOM, "image folder '%s': no host memory for its listing", dir);
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of `dir` but ".", ".." and hidden ones (a leading '.'), sorted by strcmp. */
static ganfw_status read_names(const char *dir, name_list *out) {
  memset(out, 0, sizeof *out);
  DIR *d = opendir(dir);
  if (!d && errno == ENOTDIR)
    return ganfw_error_set(GANFW_ERR_IO,
                           "image folder '%s' is a file, not a folder: give the folder that "
                           "holds the images (or their class folders)",
                           dir);
  if (!d)
    return ganfw_error_set(GANFW_ERR_IO, "cannot open image folder '%s': %s", dir, strerror(errno));
  ganfw_status st = GANFW_OK;
  const struct dirent *e;
  while (st == GANFW_OK && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (out->n == out->cap) {
      const int64_t cap = out->cap ? 2 * out->cap : 64;
      char **grown = realloc(out->v, sizeof(char *) * cap);
      if (!grown) {
        st = no_memory(dir);
        break;
      }
      out->v = grown;
      out->cap = cap;
    }
    if (!(out->v[out->n] = strdup(e->d_name)))
      st = no_memory(dir);
    else
      out->n++;
  }
  closedir(d);
  if (st != GANFW_OK) {
    free_names(out->v, out->n);
    memset(out, 0, sizeof *out);
    return st;
  }
  if (out->n) qsort(out->v, (size_t)out->n, sizeof(char *), by_name);
  return GANFW_OK;
}

/* "dir/name", malloc'd; NULL when out of memory. */
static char *join_path(const char *dir, const char *name) {
  const size_t len = strlen(dir) + 1 + strlen(name) + 1;
  char *p = malloc(len);
  if (p) snprintf(p, len, "%s/%s", dir, name);
  return p;
}

/* What the entry at `path` is: a folder (1), a file whose first bytes are an image's
 * (*format set), or neither (0, *format IMAGE_NONE). A file that cannot be read is an
 * error naming it. */
static ganfw_status entry_kind(const char *path, int *is_dir, image_format *format) {
  *is_dir = 0;
  *format = IMAGE_NONE;
  struct stat sb;
  if (stat(path, &sb) != 0) return GANFW_OK; /* a dangling link: not an image */
  if (S_ISDIR(sb.st_mode)) {
    *is_dir = 1;
    return GANFW_OK;
  }
  if (!S_ISREG(sb.st_mode)) return GANFW_OK; /* a pipe or device: never opened */
  FILE *f = fopen(path, "rb");
  if (!f)
    return ganfw_error_set(GANFW_ERR_IO, "cannot open '%s' in an image folder: %s", path,
                           strerror(errno));
  uint8_t head[8];
  const size_t n = fread(head, 1, sizeof head, f);
  fclose(f);
  static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (n == 8 && memcmp(head, png_sig, 8) == 0)
    *format = IMAGE_PNG;
  else if (ganfw_jpeg_signature(head, n))
    *format = IMAGE_JPEG;
  return GANFW_OK;
}

static ganfw_status add_sample(folder_src *s, char *path, size_t dir_len, int32_t label,
                               image_format format, const char *dir) {
  if (s->n == s->cap) {
    const int64_t cap = s->cap ? 2 * s->cap : 256;
    folder_sample *grown = realloc(s->samples, sizeof *grown * cap);
    if (!grown) {
      free(path);
      return no_memory(dir);
    }
    s->samples = grown;
    s->cap = cap;
  }
  s->samples[s->n++] = (folder_sample){path, dir_len, label, (uint8_t)format};
  return GANFW_OK;
}

/* torchvision's order within a class: sorted(os.walk(...)) by folder path, then each
 * folder's file names sorted. */
static int by_folder_then_name(const void *pa, const void *pb) {
  const folder_sample *a = pa, *b = pb;
  const size_t n = a->dir_len < b->dir_len ? a->dir_len : b->dir_len;
  const int r = memcmp(a->path, b->path, n);
  if (r) return r;
  if (a->dir_len != b->dir_len) return a->dir_len < b->dir_len ? -1 : 1;
  return strcmp(a->path + a->dir_len + 1, b->path + b->dir_len + 1);
}

/* Every image anywhere below `dir` into s with `label`; the rest counted in sk. */
static ganfw_status walk_class(const char *dir, int32_t label, int depth, folder_src *s,
                               folder_skips *sk) {
  if (depth > FOLDER_MAX_DEPTH)
    return ganfw_error_set(GANFW_ERR_IO,
                           "image folder '%s' lies %d folders deep in its class folder: a "
                           "symbolic link that points up? (remove it)",
                           dir, depth);
  name_list names;
  ganfw_status st = read_names(dir, &names);
  for (int64_t i = 0; st == GANFW_OK && i < names.n; i++) {
    char *path = join_path(dir, names.v[i]);
    if (!path) {
      st = no_memory(dir);
      break;
    }
    int is_dir;
    image_format format;
    st = entry_kind(path, &is_dir, &format);
    if (st == GANFW_OK && is_dir) st = walk_class(path, label, depth + 1, s, sk);
    if (st == GANFW_OK && !is_dir && format != IMAGE_NONE)
      st = add_sample(s, path, strlen(dir), label, format, dir);
    else {
      if (st == GANFW_OK && !is_dir)
        count_skip(&sk->not_image, sk->not_image_eg, sizeof sk->not_image_eg, path);
      free(path);
    }
  }
  free_names(names.v, names.n);
  return st;
}

/* The class folders (non-hidden sub-folders, sorted) of `dir` into *classes; with `files`
 * not NULL also its image files (*formats per file) and counts the other files in sk. */
static ganfw_status list_top(const char *dir, name_list *classes, name_list *files,
                             image_format **formats, folder_skips *sk) {
  memset(classes, 0, sizeof *classes);
  if (files) memset(files, 0, sizeof *files);
  if (formats) *formats = NULL;
  name_list names;
  ganfw_status st = read_names(dir, &names);
  if (st != GANFW_OK) return st;
  image_format *fmt = files ? malloc(sizeof *fmt * (names.n ? names.n : 1)) : NULL;
  if (files && !fmt) st = no_memory(dir);
  /* Each name moves into classes or files, or is freed: names.v is left empty. */
  for (int64_t i = 0; st == GANFW_OK && i < names.n; i++) {
    char *path = join_path(dir, names.v[i]);
    if (!path) {
      st = no_memory(dir);
      break;
    }
    int is_dir;
    image_format format;
    st = entry_kind(path, &is_dir, &format);
    if (st == GANFW_OK && is_dir) {
      classes->v = classes->v ? classes->v : calloc((size_t)names.n, sizeof(char *));
      if (!classes->v)
        st = no_memory(dir);
      else
        classes->v[classes->n++] = names.v[i], names.v[i] = NULL;
    } else if (st == GANFW_OK && files && format != IMAGE_NONE) {
      files->v = files->v ? files->v : calloc((size_t)names.n, sizeof(char *));
      if (!files->v)
        st = no_memory(dir);
      else
        fmt[files->n] = format, files->v[files->n++] = names.v[i], names.v[i] = NULL;
    } else if (st == GANFW_OK && files) {
      count_skip(&sk->not_image, sk->not_image_eg, sizeof sk->not_image_eg, path);
    }
    free(path);
  }
  free_names(names.v, names.n);
  if (st != GANFW_OK) {
    free_names(classes->v, classes->n);
    memset(classes, 0, sizeof *classes);
    if (files) {
      free_names(files->v, files->n);
      memset(files, 0, sizeof *files);
    }
    free(fmt);
    return st;
  }
  if (formats)
    *formats = fmt;
  else
    free(fmt);
  return GANFW_OK;
}

/* One split's folder `dir` into s: its class folders, or its images when it has none. */
static ganfw_status list_split(const char *dir, folder_src *s, folder_skips *sk) {
  name_list classes, files;
  image_format *formats = NULL;
  ganfw_status st = list_top(dir, &classes, &files, &formats, sk);
  if (st != GANFW_OK) return st;
  if (classes.n == 0) { /* flat: the images, label 0 */
    for (int64_t i = 0; st == GANFW_OK && i < files.n; i++) {
      char *path = join_path(dir, files.v[i]);
      st = path ? add_sample(s, path, strlen(dir), 0, formats[i], dir) : no_memory(dir);
    }
    if (st == GANFW_OK && s->n == 0)
      st = ganfw_error_set(GANFW_ERR_IO,
                           "image folder '%s' holds no PNG or JPEG images (nor class folders "
                           "of them)",
                           dir);
  } else {
    for (int64_t i = 0; i < files.n; i++) {
      char *path = join_path(dir, files.v[i]);
      count_skip(&sk->root_image, sk->root_image_eg, sizeof sk->root_image_eg,
                 path ? path : files.v[i]);
      free(path);
    }
    if (classes.n > INT32_MAX)
      st = ganfw_error_set(GANFW_ERR_IO, "image folder '%s' has too many class folders", dir);
    for (int64_t k = 0; st == GANFW_OK && k < classes.n; k++) {
      char *cdir = join_path(dir, classes.v[k]);
      if (!cdir) {
        st = no_memory(dir);
        break;
      }
      const int64_t first = s->n;
      st = walk_class(cdir, (int32_t)k, 1, s, sk);
      if (st == GANFW_OK && s->n == first)
        st = ganfw_error_set(GANFW_ERR_IO,
                             "class folder '%s' holds no PNG or JPEG images: every sub-folder of "
                             "'%s' is a class, so add its images or remove it",
                             cdir, dir);
      if (st == GANFW_OK)
        qsort(s->samples + first, (size_t)(s->n - first), sizeof *s->samples, by_folder_then_name);
      free(cdir);
    }
    if (st == GANFW_OK) {
      s->classes = classes.v;
      s->num_classes = (int32_t)classes.n;
      classes.v = NULL;
      classes.n = 0;
    }
  }
  free_names(classes.v, classes.n);
  free_names(files.v, files.n);
  free(formats);
  return st;
}

static int is_folder(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

int ganfw_dataset_folder_has_test(const char *dir) {
  char tr[4200], te[4200];
  snprintf(tr, sizeof tr, "%s/train", dir);
  snprintf(te, sizeof te, "%s/test", dir);
  return is_folder(tr) && is_folder(te);
}

/* "a, b, c" of the first names of l (at most cap bytes). */
static void name_sample(const name_list *l, char *buf, size_t cap) {
  buf[0] = '\0';
  for (int64_t i = 0; i < l->n; i++) {
    const size_t at = strlen(buf);
    if (at + 8 >= cap) break;
    snprintf(buf + at, cap - at, "%s%s", i ? ", " : "", l->v[i]);
  }
  if (!l->n) snprintf(buf, cap, "none: the images lie in the folder itself");
}

/* The class folders of `mine` (s->classes) and of the other split `other` must be the
 * same names; an error naming both folders otherwise. */
static ganfw_status check_same_classes(const folder_src *s, const char *mine, const char *other) {
  name_list theirs;
  ganfw_status st = list_top(other, &theirs, NULL, NULL, NULL);
  if (st != GANFW_OK) return st;
  int same = theirs.n == s->num_classes;
  for (int64_t k = 0; same && k < theirs.n; k++) same = strcmp(theirs.v[k], s->classes[k]) == 0;
  if (!same) {
    char a[1024], b[1024];
    const name_list ours = {s->classes, s->num_classes, s->num_classes};
    name_sample(&ours, a, sizeof a);
    name_sample(&theirs, b, sizeof b);
    st = ganfw_error_set(GANFW_ERR_IO,
                         "image folders '%s' and '%s' have different class folders (%s; and "
                         "%s): the train and test splits need the same classes, numbered the "
                         "same",
                         mine, other, a, b);
  }
  free_names(theirs.v, theirs.n);
  return st;
}

/* Lists the split of `dir` that train asks for into s, its folder's path into split. The
 * split layout is dir holding both train/ and test/; a folder with one of them alone is a
 * folder of classes, one of which is named so. */
static ganfw_status list_folder(const char *dir, int32_t train, folder_src *s, folder_skips *sk,
                                char *split, size_t cap) {
  char tr[4200], te[4200];
  snprintf(tr, sizeof tr, "%s/train", dir);
  snprintf(te, sizeof te, "%s/test", dir);
  const int has_train = is_folder(tr), has_test = is_folder(te);
  if (!has_train || !has_test) {
    if (!train) {
      /* The folder's own errors (missing, a file) come first. */
      name_list c;
      ganfw_status st = list_top(dir, &c, NULL, NULL, NULL);
      if (st != GANFW_OK) return st;
      free_names(c.v, c.n);
      return ganfw_error_set(
          GANFW_ERR_IO,
          "image folder '%s' has %s, so no test split to evaluate on: lay it "
          "out as %s/train/<class>/... and %s/test/<class>/... with the same "
          "class folders",
          dir, has_train ? "train/ but no test/ beside it" : "no test/ sub-folder", dir, dir);
    }
    snprintf(split, cap, "%s", dir);
    ganfw_status st = list_split(dir, s, sk);
    if (st == GANFW_OK && s->num_classes == 1 &&
        (strcmp(s->classes[0], "train") == 0 || strcmp(s->classes[0], "test") == 0))
      sk->lone_split = s->classes[0];
    return st;
  }
  /* Whatever lies beside train/ and test/ is not read. */
  name_list names;
  ganfw_status st = read_names(dir, &names);
  if (st != GANFW_OK) return st;
  for (int64_t i = 0; i < names.n; i++)
    if (strcmp(names.v[i], "train") != 0 && strcmp(names.v[i], "test") != 0) {
      char *path = join_path(dir, names.v[i]);
      count_skip(&sk->beside_split, sk->beside_split_eg, sizeof sk->beside_split_eg,
                 path ? path : names.v[i]);
      free(path);
    }
  free_names(names.v, names.n);
  snprintf(split, cap, "%s", train ? tr : te);
  st = list_split(train ? tr : te, s, sk);
  if (st == GANFW_OK) st = check_same_classes(s, train ? tr : te, train ? te : tr);
  return st;
}

/* The one warning of what a listing left out (nothing when nothing was). */
static void warn_skips(const char *dir, const folder_skips *sk) {
  if (sk->lone_split)
    ganfw_log(GANFW_LOG_WARN,
              "image folder '%s': its only class folder is %s/, read as one class: a folder "
              "split in two holds both train/ and test/",
              dir, sk->lone_split);
  if (!sk->not_image && !sk->root_image && !sk->beside_split) return;
  char text[2400] = "";
  size_t at = 0;
  if (sk->not_image)
    at += (size_t)snprintf(text + at, sizeof text - at, "; %lld %s (e.g. '%s')",
                           (long long)sk->not_image,
                           sk->not_image == 1 ? "file that is not a PNG or JPEG image"
                                              : "files that are not PNG or JPEG images",
                           sk->not_image_eg);
  if (sk->root_image && at < sizeof text)
    at += (size_t)snprintf(text + at, sizeof text - at,
                           "; %lld image%s beside the class folders, in no class (e.g. '%s')",
                           (long long)sk->root_image, sk->root_image == 1 ? "" : "s",
                           sk->root_image_eg);
  if (sk->beside_split && at < sizeof text)
    snprintf(text + at, sizeof text - at, "; %lld entr%s beside train/ and test/ (e.g. '%s')",
             (long long)sk->beside_split, sk->beside_split == 1 ? "y" : "ies", sk->beside_split_eg);
  ganfw_log(GANFW_LOG_WARN, "image folder '%s': skipped%s", dir, text + 1);
}

/* The header size of a listed image. */
static ganfw_status read_size(const folder_sample *e, int32_t *c, int32_t *h, int32_t *w) {
  return e->format == IMAGE_JPEG ? ganfw_jpeg_read_size(e->path, c, h, w)
                                 : ganfw_png_read_size(e->path, c, h, w);
}

ganfw_status ganfw_dataset_open_folder(const char *dir, int32_t train, const ganfw_transform *tf,
                                       ganfw_dataset **out) {
  *out = NULL;
  if (!dir) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "image folder: no directory given");
  folder_src *s = calloc(1, sizeof *s);
  if (!s) return ganfw_error_set(GANFW_ERR_OOM, "image folder: no host memory");
  folder_skips sk;
  memset(&sk, 0, sizeof sk);
  char split[4200];
  ganfw_status st = list_folder(dir, train, s, &sk, split, sizeof split);
  int32_t c = 0, h = 0, w = 0;
  if (st == GANFW_OK) st = read_size(&s->samples[0], &c, &h, &w);
  if (st != GANFW_OK) {
    folder_destroy(s);
    return st;
  }
  warn_skips(dir, &sk);
  if (tf) ganfw_transform_decode_min(tf, &s->min_h, &s->min_w);
  char name[4300];
  snprintf(name, sizeof name, "image folder '%s'", split);
  const int32_t classes = s->num_classes ? s->num_classes : 1;
  st = ganfw_dataset_wrap(&folder_vt, s, name, s->n, classes, h, w, 3, tf, out);
  if (st == GANFW_OK && s->classes)
    ganfw_dataset_set_class_names(*out, (const char *const *)s->classes, s->num_classes);
  return st;
}

ganfw_status ganfw_dataset_count_folder(const char *dir, int32_t train, int64_t *n) {
  *n = 0;
  if (!dir) return ganfw_error_set(GANFW_ERR_INVALID_ARG, "image folder: no directory given");
  folder_src *s = calloc(1, sizeof *s);
  if (!s) return ganfw_error_set(GANFW_ERR_OOM, "image folder: no host memory");
  folder_skips sk;
  memset(&sk, 0, sizeof sk);
  char split[4200];
  const ganfw_status st = list_folder(dir, train, s, &sk, split, sizeof split);
  if (st == GANFW_OK) *n = s->n;
  folder_destroy(s);
  return st;
}
