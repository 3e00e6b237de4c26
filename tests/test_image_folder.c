/* The image folder data set (data/data_folder.c) as a torchvision ImageFolder user lays one
 * out, on folders written here at run time under a mkdtemp folder: class sub-folders, their
 * numbering and the order of their images (against torchvision's own ImageFolder when
 * /usr/bin/python3 has it), train/ and test/ splits, the one warning of skipped files,
 * alpha composited over data.background, mixed formats and channel counts, JPEGs decoded
 * scaled in the DCT domain through the transforms, the loader's worker threads, and every
 * bad layout refused with a message naming the folder. */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "config/config.h"
#include "data/data.h"
#include "data/data_source.h"
#include "io/jpeg_io.h"
#include "io/png_io.h"
#include "testutil.h"
#include "tools/sample.h"

/* --- fixtures ----------------------------------------------------------------------------- */
/* `rel` inside this run's temporary folder, into buf (PATH_CAP bytes). */
enum { PATH_CAP = 700 };
static char *at(char *buf, const char *rel) {
  const char *tmp_root = gt_tmp_root("folder");
  snprintf(buf, PATH_CAP, "%s/%s", tmp_root, rel);
  return buf;
}

/* Makes the folder `rel` and the folders above it under the temporary folder. */
static void make_dirs(const char *rel) {
  char p[PATH_CAP];
  at(p, rel);
  for (char *s = p + strlen(gt_tmp_root("folder")) + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      mkdir(p, 0755);
      *s = '/';
    }
  mkdir(p, 0755);
}

static void write_text(const char *rel, const char *text) {
  char p[PATH_CAP];
  FILE *f = fopen(at(p, rel), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

/* A gray h x w PNG of one value. */
static void gray_png(const char *rel, int h, int w, uint8_t value) {
  char p[PATH_CAP];
  uint8_t *px = malloc((size_t)h * w);
  memset(px, value, (size_t)h * w);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(at(p, rel), px, h, w, 1), GANFW_OK);
  free(px);
}

/* A smooth RGB (c = 3) or gray (c = 1) picture as a JPEG. */
static void smooth_jpeg(const char *rel, int h, int w, int c, const gt_jpeg_opts *o) {
  char p[PATH_CAP];
  uint8_t *px = malloc((size_t)h * w * c);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < c; k++)
        px[((size_t)y * w + x) * c + k] =
            (uint8_t)(128 + 100 * sin(2.5 * x / w + k) * cos(1.5 * y / h - 0.5 * k));
  CU_ASSERT_EQUAL_FATAL(gt_write_jpeg(at(p, rel), px, h, w, c, o), 0);
  free(px);
}

static int msg_has(const char *s) {
  const char *m = ganfw_error_message();
  if (strstr(m, s)) return 1;
  printf("\n  message \"%s\" lacks \"%s\"\n", m, s);
  return 0;
}

static int count(const char *text, const char *needle) {
  int n = 0;
  for (const char *p = strstr(text, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* stderr (the log) from now until capture_end goes into a file, then into err. */
static int capture_begin(void) {
  char log[PATH_CAP];
  fflush(stderr);
  const int saved = dup(2), fd = open(at(log, "stderr.txt"), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  CU_ASSERT_FATAL(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  return saved;
}

static void capture_end(int saved, char *err, size_t cap) {
  char log[PATH_CAP];
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  FILE *f = fopen(at(log, "stderr.txt"), "r");
  const size_t len = f ? fread(err, 1, cap - 1, f) : 0;
  err[len] = '\0';
  if (f) fclose(f);
}

/* ganfw_dataset_open("folder", rel, train, tf) with stderr (the log) captured into err. */
static ganfw_status open_captured(const char *rel, int32_t train, const ganfw_transform *tf,
                                  ganfw_dataset **ds, char *err, size_t cap) {
  char dir[PATH_CAP];
  at(dir, rel);
  const int saved = capture_begin();
  const ganfw_status st = ganfw_dataset_open("folder", dir, train, tf, ds);
  capture_end(saved, err, cap);
  return st;
}

static const ganfw_transform gray_unit = {.channels = 1, .unit_range = 1};

/* The (0, 0) pixel (as 0..255) and label of every sample of ds, gray unit-range. */
static void values_and_labels(const ganfw_dataset *ds, int *values, int32_t *labels) {
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  float *img = malloc(sizeof(float) * c * h * w);
  for (int64_t i = 0; i < ganfw_dataset_size(ds); i++) {
    CU_ASSERT_EQUAL_FATAL(ganfw_dataset_get(ds, i, 0, img, &labels[i]), GANFW_OK);
    values[i] = (int)lrintf(img[0] * 255.0f);
  }
  free(img);
}

/* --- class folders ------------------------------------------------------------------------ */
/* Three class folders, numbered in strcmp order of their names; the images of a class in
 * torchvision's order (sorted(os.walk()): by folder path, then by name), nested folders
 * included. Each image is one gray value, so its place tells which file it is. */
static const struct {
  const char *rel;
  uint8_t value;
} class_files[] = {
    {"classes/cat/z.png", 3},   {"classes/ant/b.png", 1},     {"classes/ant/a.png", 2},
    {"classes/cat/a/x.png", 4}, {"classes/cat/a b/y.png", 5}, {"classes/cat/a/c/w.png", 6},
    {"classes/cat/B.png", 7},   {"classes/bee/q.png", 8},
};
enum { CLASS_FILES = sizeof class_files / sizeof class_files[0] };

static void test_classes_and_order(void) {
  make_dirs("classes/ant");
  make_dirs("classes/bee");
  make_dirs("classes/cat/a/c");
  make_dirs("classes/cat/a b");
  for (int i = 0; i < CLASS_FILES; i++) gray_png(class_files[i].rel, 2, 3, class_files[i].value);
  ganfw_dataset *ds = NULL;
  char err[4096], dir[PATH_CAP];
  CU_ASSERT_EQUAL_FATAL(open_captured("classes", 1, &gray_unit, &ds, err, sizeof err), GANFW_OK);
  CU_ASSERT_PTR_NULL(strstr(err, "warning")); /* nothing skipped, nothing said */
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), CLASS_FILES);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(ds), 3);
  CU_ASSERT_STRING_EQUAL(ganfw_dataset_class_name(ds, 0), "ant");
  CU_ASSERT_STRING_EQUAL(ganfw_dataset_class_name(ds, 1), "bee");
  CU_ASSERT_STRING_EQUAL(ganfw_dataset_class_name(ds, 2), "cat");
  CU_ASSERT_PTR_NULL(ganfw_dataset_class_name(ds, 3));
  int values[CLASS_FILES];
  int32_t labels[CLASS_FILES];
  values_and_labels(ds, values, labels);
  /* cat: its own files (B, z), then cat/a, then "cat/a b" (' ' sorts before '/'), cat/a/c */
  const int want_values[CLASS_FILES] = {2, 1, 8, 7, 3, 4, 5, 6};
  const int32_t want_labels[CLASS_FILES] = {0, 0, 1, 2, 2, 2, 2, 2};
  for (int i = 0; i < CLASS_FILES; i++) {
    CU_ASSERT_EQUAL(values[i], want_values[i]);
    CU_ASSERT_EQUAL(labels[i], want_labels[i]);
  }
  CU_ASSERT(strstr(ganfw_dataset_name(ds), at(dir, "classes")) != NULL);
  int64_t n = 0;
  CU_ASSERT_EQUAL(ganfw_dataset_count("folder", dir, 1, &n), GANFW_OK);
  CU_ASSERT_EQUAL(n, CLASS_FILES);
  ganfw_dataset_destroy(ds);

  /* torchvision's ImageFolder on the same folder: the same classes, labels and order */
  if (!gt_python_has("torchvision")) {
    printf("\n  torchvision part skipped: /usr/bin/python3 cannot import torchvision ");
    return;
  }
  char cmd[2048], out[PATH_CAP];
  at(out, "torchvision.txt");
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c 'import sys\nfrom torchvision.datasets import ImageFolder\n"
           "d = ImageFolder(sys.argv[1])\nf = open(sys.argv[2], \"w\")\n"
           "f.write(\" \".join(d.classes) + \"\\n\")\n"
           "for p, y in d.samples: f.write(\"%%s %%d\\n\" %% (p, y))\n' '%s' '%s' 2>&1",
           dir, out);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  FILE *f = fopen(out, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[PATH_CAP + 16];
  CU_ASSERT_FATAL(fgets(line, sizeof line, f) != NULL);
  CU_ASSERT_STRING_EQUAL(line, "ant bee cat\n");
  int i = 0;
  while (fgets(line, sizeof line, f) && i < CLASS_FILES) {
    /* "<path> <label>": the path's value must be the one ganfw gives sample i */
    char *sp = strrchr(line, ' ');
    CU_ASSERT_FATAL(sp != NULL);
    *sp = '\0';
    const int label = atoi(sp + 1);
    int value = -1;
    for (int k = 0; k < CLASS_FILES; k++) {
      char p[PATH_CAP];
      if (strcmp(at(p, class_files[k].rel), line) == 0) value = class_files[k].value;
    }
    CU_ASSERT_EQUAL(value, want_values[i]);
    CU_ASSERT_EQUAL(label, want_labels[i]);
    i++;
  }
  CU_ASSERT_EQUAL(i, CLASS_FILES);
  fclose(f);
}

/* Files that are no images, wherever they are, and images beside class folders: left out
 * and counted in one warning naming the folder, the counts and a first example; hidden
 * names (a leading '.') are not even counted. */
static void test_skipped_files(void) {
  make_dirs("skips/a");
  make_dirs("skips/b");
  make_dirs("skips/.git");
  gray_png("skips/a/1.png", 4, 4, 10);
  write_text("skips/a/notes.txt", "not an image");
  smooth_jpeg("skips/b/2.JPG", 4, 4, 3, NULL);
  smooth_jpeg("skips/b/3.png", 4, 4, 1, NULL); /* a JPEG named .png: taken by content */
  write_text("skips/README.md", "# images");
  write_text("skips/.DS_Store", "hidden");
  gray_png("skips/stray.png", 4, 4, 20);
  char p[PATH_CAP], root[PATH_CAP];
  CU_ASSERT_EQUAL_FATAL(mkfifo(at(p, "skips/b/pipe"), 0644), 0); /* never opened */
  ganfw_dataset *ds = NULL;
  char err[4096];
  CU_ASSERT_EQUAL_FATAL(open_captured("skips", 1, NULL, &ds, err, sizeof err), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 3);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(ds), 2);
  CU_ASSERT_EQUAL(count(err, "warning"), 1);
  char want[4 * PATH_CAP], stray[PATH_CAP];
  snprintf(want, sizeof want,
           "image folder '%s': skipped 3 files that are not PNG or JPEG "
           "images (e.g. '%s'); 1 image beside the class folders, in no class (e.g. '%s')",
           at(root, "skips"), at(p, "skips/README.md"), at(stray, "skips/stray.png"));
  if (!strstr(err, want)) printf("\n  log \"%s\" lacks \"%s\"\n", err, want);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
  int32_t labels[3];
  float img[3 * 4 * 4];
  for (int i = 0; i < 3; i++)
    CU_ASSERT_EQUAL(ganfw_dataset_get(ds, i, 0, img, &labels[i]), GANFW_OK);
  CU_ASSERT(labels[0] == 0 && labels[1] == 1 && labels[2] == 1);
  ganfw_dataset_destroy(ds);
}

/* A class folder without images (empty, or only other files), a folder without any image,
 * and a symbolic link loop below a class: each refused naming the folder. */
static void test_layout_errors(void) {
  char p[PATH_CAP], q[PATH_CAP], err[4096];
  ganfw_dataset *ds = (ganfw_dataset *)1;
  make_dirs("noimg/a");
  make_dirs("noimg/b");
  gray_png("noimg/a/1.png", 2, 2, 1);
  CU_ASSERT_EQUAL(open_captured("noimg", 1, NULL, &ds, err, sizeof err), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(ds);
  CU_ASSERT(msg_has(at(p, "noimg/b")) && msg_has("holds no PNG or JPEG images") &&
            msg_has("every sub-folder of"));
  write_text("noimg/b/readme.txt", "text");
  CU_ASSERT_EQUAL(open_captured("noimg", 1, NULL, &ds, err, sizeof err), GANFW_ERR_IO);
  CU_ASSERT(msg_has(at(p, "noimg/b")) && msg_has("holds no PNG or JPEG images"));
  make_dirs("textonly");
  write_text("textonly/a.png", "not a png");
  CU_ASSERT_EQUAL(open_captured("textonly", 1, NULL, &ds, err, sizeof err), GANFW_ERR_IO);
  CU_ASSERT(msg_has(at(p, "textonly")) && msg_has("holds no PNG or JPEG images"));
  make_dirs("loop/a");
  gray_png("loop/a/1.png", 2, 2, 1);
  CU_ASSERT_EQUAL_FATAL(symlink(at(q, "loop/a"), at(p, "loop/a/again")), 0);
  CU_ASSERT_EQUAL(open_captured("loop", 1, NULL, &ds, err, sizeof err), GANFW_ERR_IO);
  CU_ASSERT(msg_has(at(p, "loop/a/again")) && msg_has("symbolic link"));
  ganfw_error_clear();
}

/* --- train/ and test/ ---------------------------------------------------------------------- */
static void test_train_test(void) {
  make_dirs("split/train/a");
  make_dirs("split/train/b");
  make_dirs("split/test/a");
  make_dirs("split/test/b");
  make_dirs("split/val/a");
  gray_png("split/train/a/1.png", 2, 2, 11);
  gray_png("split/train/b/1.png", 2, 2, 12);
  gray_png("split/train/b/2.png", 2, 2, 13);
  gray_png("split/test/a/1.png", 2, 2, 21);
  gray_png("split/test/b/1.png", 2, 2, 22);
  gray_png("split/val/a/1.png", 2, 2, 31);
  write_text("split/notes.txt", "about the split");
  char p[PATH_CAP], q[PATH_CAP], err[4096];
  ganfw_dataset *ds = NULL;
  int values[4];
  int32_t labels[4];
  CU_ASSERT_EQUAL_FATAL(open_captured("split", 1, &gray_unit, &ds, err, sizeof err), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 3);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_dataset_name(ds), at(p, "split/train")));
  values_and_labels(ds, values, labels);
  CU_ASSERT(values[0] == 11 && values[1] == 12 && values[2] == 13);
  CU_ASSERT(labels[0] == 0 && labels[1] == 1 && labels[2] == 1);
  CU_ASSERT_EQUAL(count(err, "warning"), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "2 entries beside train/ and test/"));
  ganfw_dataset_destroy(ds);
  CU_ASSERT_EQUAL_FATAL(open_captured("split", 0, &gray_unit, &ds, err, sizeof err), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_size(ds), 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_dataset_name(ds), at(p, "split/test")));
  values_and_labels(ds, values, labels);
  CU_ASSERT(values[0] == 21 && values[1] == 22 && labels[0] == 0 && labels[1] == 1);
  CU_ASSERT_STRING_EQUAL(ganfw_dataset_class_name(ds, 1), "b");
  ganfw_dataset_destroy(ds);
  int64_t n = 0;
  CU_ASSERT_EQUAL(ganfw_dataset_count("folder", at(p, "split"), 1, &n), GANFW_OK);
  CU_ASSERT_EQUAL(n, 3);
  CU_ASSERT_EQUAL(ganfw_dataset_count("folder", at(p, "split"), 0, &n), GANFW_OK);
  CU_ASSERT_EQUAL(n, 2);

  /* other class folders in test/: refused for either split, naming both folders */
  make_dirs("mismatch/train/a");
  make_dirs("mismatch/train/b");
  make_dirs("mismatch/test/a");
  make_dirs("mismatch/test/c");
  gray_png("mismatch/train/a/1.png", 2, 2, 1);
  gray_png("mismatch/train/b/1.png", 2, 2, 1);
  gray_png("mismatch/test/a/1.png", 2, 2, 1);
  gray_png("mismatch/test/c/1.png", 2, 2, 1);
  for (int32_t train = 0; train <= 1; train++) {
    CU_ASSERT_EQUAL(open_captured("mismatch", train, NULL, &ds, err, sizeof err), GANFW_ERR_IO);
    CU_ASSERT(msg_has(at(p, "mismatch/train")) && msg_has(at(q, "mismatch/test")) &&
              msg_has("different class folders") && msg_has("a, b") && msg_has("a, c"));
  }

  /* no split: the test split says there is no test/ (after the folder's own errors) */
  CU_ASSERT_EQUAL(open_captured("classes", 0, NULL, &ds, err, sizeof err), GANFW_ERR_IO);
  CU_ASSERT(msg_has(at(p, "classes")) && msg_has("has no test/ sub-folder") &&
            msg_has("/train/<class>/"));
  CU_ASSERT_EQUAL(ganfw_dataset_count("folder", at(p, "classes"), 0, &n), GANFW_ERR_IO);
  CU_ASSERT(msg_has("has no test/ sub-folder"));
  CU_ASSERT_EQUAL(open_captured("nowhere", 0, NULL, &ds, err, sizeof err), GANFW_ERR_IO);
  CU_ASSERT(msg_has(at(p, "nowhere")) && msg_has("No such file"));

  /* train/ alone is a folder of one class named train, with a warning; no test split */
  make_dirs("trainonly/train/a");
  gray_png("trainonly/train/a/1.png", 2, 2, 1);
  CU_ASSERT_EQUAL_FATAL(open_captured("trainonly", 1, NULL, &ds, err, sizeof err), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_num_classes(ds), 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "its only class folder is train/"));
  ganfw_dataset_destroy(ds);
  CU_ASSERT_EQUAL(open_captured("trainonly", 0, NULL, &ds, err, sizeof err), GANFW_ERR_IO);
  CU_ASSERT(msg_has("has train/ but no test/ beside it"));
  ganfw_error_clear();
}

/* --- alpha and channels -------------------------------------------------------------------- */
/* RGBA and gray+alpha PNGs composited over white (the default), black, a colour, or their
 * alpha dropped; then converted to the data set's channels. */
static void test_background(void) {
  make_dirs("alpha");
  char p[PATH_CAP];
  const uint8_t rgba[12] = {10, 20, 30, 0, 40, 50, 60, 128, 70, 80, 90, 255};
  const uint8_t ga[6] = {100, 0, 100, 51, 100, 255};
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(at(p, "alpha/a_rgba.png"), rgba, 1, 3, 4), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(at(p, "alpha/b_ga.png"), ga, 1, 3, 2), GANFW_OK);
  const float a1 = 128 / 255.0f, g1 = 51 / 255.0f;
  const struct {
    int32_t mode;
    float bg[3];
  } modes[] = {{GANFW_ALPHA_OVER_WHITE, {1, 1, 1}},
               {GANFW_ALPHA_OVER_COLOR, {0, 0, 0}},
               {GANFW_ALPHA_OVER_COLOR, {1.0f, 0.5f, 0.0f}},
               {GANFW_ALPHA_DROP, {0, 0, 0}}};
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
    ganfw_transform tf = {.unit_range = 1, .alpha = modes[m].mode};
    memcpy(tf.background, modes[m].bg, sizeof tf.background);
    const int drop = modes[m].mode == GANFW_ALPHA_DROP;
    for (int32_t ch = 1; ch <= 3; ch += 2) {
      tf.channels = ch;
      ganfw_dataset *ds = NULL;
      CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(at(p, "alpha"), 1, &tf, &ds), GANFW_OK);
      float img[9], want[9];
      /* RGBA: pixel x, channel k */
      for (int x = 0; x < 3; x++) {
        const float a = x == 0 ? 0.0f : x == 1 ? a1 : 1.0f;
        float rgb[3];
        for (int k = 0; k < 3; k++) {
          const float v = rgba[4 * x + k] / 255.0f;
          rgb[k] = drop ? v : a * v + (1 - a) * modes[m].bg[k];
        }
        if (ch == 1)
          want[x] = 0.299f * rgb[0] + 0.587f * rgb[1] + 0.114f * rgb[2];
        else
          for (int k = 0; k < 3; k++) want[k * 3 + x] = rgb[k];
      }
      CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 0, 0, img, NULL), GANFW_OK);
      for (int i = 0; i < 3 * ch; i++) CU_ASSERT_DOUBLE_EQUAL(img[i], want[i], 1e-5);
      /* gray+alpha: gray over the background (its luma for one channel) */
      const float bg_luma =
          0.299f * modes[m].bg[0] + 0.587f * modes[m].bg[1] + 0.114f * modes[m].bg[2];
      for (int x = 0; x < 3; x++) {
        const float a = x == 0 ? 0.0f : x == 1 ? g1 : 1.0f, v = 100 / 255.0f;
        for (int k = 0; k < ch; k++)
          want[k * 3 + x] = drop ? v : a * v + (1 - a) * (ch == 1 ? bg_luma : modes[m].bg[k]);
      }
      CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 1, 0, img, NULL), GANFW_OK);
      for (int i = 0; i < 3 * ch; i++) CU_ASSERT_DOUBLE_EQUAL(img[i], want[i], 1e-5);
      ganfw_dataset_destroy(ds);
    }
  }
}

static ganfw_transform tf_from(const char *yaml, ganfw_status want) {
  ganfw_config *cfg = NULL;
  ganfw_transform tf;
  memset(&tf, 0, sizeof tf);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(yaml, "bg.yaml", &cfg), GANFW_OK);
  const ganfw_status st =
      ganfw_transform_from_config(ganfw_cfg_section(ganfw_config_root(cfg), "data"), &tf);
  if (st != want) printf("\n  %s: got %d, %s\n", yaml, (int)st, ganfw_error_message());
  CU_ASSERT_EQUAL(st, want);
  if (st == GANFW_OK) { /* the defaults are in the resolved config */
    char text[4096] = "";
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    CU_ASSERT_EQUAL(ganfw_config_write_resolved(cfg, f), GANFW_OK);
    fclose(f);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "background:"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "jpeg_dct_scale:"));
  }
  ganfw_config_destroy(cfg);
  return tf;
}

/* data.background and data.jpeg_dct_scale as the config gives them, and their refusals. */
static void test_background_config(void) {
  ganfw_transform tf = tf_from("data: {}\n", GANFW_OK);
  CU_ASSERT(tf.alpha == GANFW_ALPHA_OVER_WHITE && tf.jpeg_full_size == 0);
  tf = tf_from("data: {background: black}\n", GANFW_OK);
  CU_ASSERT(tf.alpha == GANFW_ALPHA_OVER_COLOR && tf.background[0] == 0 && tf.background[2] == 0);
  tf = tf_from("data: {background: none, jpeg_dct_scale: false}\n", GANFW_OK);
  CU_ASSERT(tf.alpha == GANFW_ALPHA_DROP && tf.jpeg_full_size == 1);
  tf = tf_from("data: {background: [255, 51, 0]}\n", GANFW_OK);
  CU_ASSERT(tf.alpha == GANFW_ALPHA_OVER_COLOR);
  CU_ASSERT(tf.background[0] == 1.0f && tf.background[1] == 0.2f && tf.background[2] == 0.0f);
  tf_from("data: {background: blue}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("bg.yaml:1:") && msg_has("data.background is white, black, none") &&
            msg_has("not 'blue'"));
  tf_from("data: {background: [1, 2]}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("bg.yaml:1:") && msg_has("got a list of 2"));
  tf_from("data: {background: [0, 0, 256]}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("bg.yaml:1:") && msg_has("256"));
  tf_from("data: {background: {r: 1}}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("data.background is white"));
  tf_from("data: {jpeg_dct_scale: 2}\n", GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("data.jpeg_dct_scale"));
  ganfw_error_clear();
}

/* A gray JPEG, an RGB PNG, an RGBA PNG and a gray PNG in one folder: channels 0 makes all
 * RGB (gray replicated, as torchvision's ImageFolder's convert("RGB")), channels 1 gray
 * (PIL's luma). Images of other sizes: refused at their get naming data.crop, never the
 * transform's internal resize_h/resize_w. */
static void test_mixed_channels_and_sizes(void) {
  make_dirs("mixed");
  char p[PATH_CAP];
  smooth_jpeg("mixed/a.jpg", 8, 8, 1, &(gt_jpeg_opts){.quality = 100});
  uint8_t rgb[8 * 8 * 3], rgba[8 * 8 * 4];
  for (int i = 0; i < 64; i++) {
    rgb[3 * i] = 200, rgb[3 * i + 1] = 100, rgb[3 * i + 2] = 0;
    rgba[4 * i] = 0, rgba[4 * i + 1] = 0, rgba[4 * i + 2] = 255, rgba[4 * i + 3] = 255;
  }
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(at(p, "mixed/b.png"), rgb, 8, 8, 3), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(at(p, "mixed/c.png"), rgba, 8, 8, 4), GANFW_OK);
  gray_png("mixed/d.png", 8, 8, 77);
  const ganfw_transform rgb_tf = {.unit_range = 1}, gray_tf = {.channels = 1, .unit_range = 1};
  ganfw_dataset *ds = NULL, *gs = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(at(p, "mixed"), 1, &rgb_tf, &ds), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(at(p, "mixed"), 1, &gray_tf, &gs), GANFW_OK);
  int32_t c, h, w;
  ganfw_dataset_shape(ds, &c, &h, &w);
  CU_ASSERT(c == 3 && h == 8 && w == 8);
  ganfw_dataset_shape(gs, &c, &h, &w);
  CU_ASSERT(c == 1);
  float img[3 * 64], g[64], direct[64];
  float *px = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_jpeg_read(at(p, "mixed/a.jpg"), &px, &c, &h, &w), GANFW_OK);
  memcpy(direct, px, sizeof direct);
  free(px);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 0, 0, img, NULL), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(img, direct, sizeof direct), 0);
  CU_ASSERT_EQUAL(memcmp(img + 64, direct, sizeof direct), 0);
  CU_ASSERT_EQUAL(memcmp(img + 128, direct, sizeof direct), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_get(gs, 0, 0, g, NULL), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(g, direct, sizeof direct), 0);
  CU_ASSERT_EQUAL(ganfw_dataset_get(gs, 1, 0, g, NULL), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(g[5], (0.299 * 200 + 0.587 * 100) / 255, 1e-6);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 2, 0, img, NULL), GANFW_OK);
  CU_ASSERT(img[0] == 0.0f && img[64] == 0.0f && img[128] == 1.0f);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 3, 0, img, NULL), GANFW_OK);
  CU_ASSERT(img[7] == img[64 + 7] && img[7] == img[128 + 7]);
  CU_ASSERT_DOUBLE_EQUAL(img[7] * 255, 77, 1e-4);
  ganfw_dataset_destroy(ds);
  ganfw_dataset_destroy(gs);
  /* another size: the message names the file and data.crop */
  smooth_jpeg("mixed/e.jpg", 8, 12, 3, NULL);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(at(p, "mixed"), 1, &rgb_tf, &ds), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_dataset_get(ds, 4, 0, img, NULL), GANFW_ERR_IO);
  CU_ASSERT(msg_has(at(p, "mixed/e.jpg")) && msg_has("data.crop"));
  CU_ASSERT_PTR_NULL(strstr(ganfw_error_message(), "resize_h"));
  ganfw_dataset_destroy(ds);
  ganfw_error_clear();
}

/* --- JPEG scaling through the transforms ---------------------------------------------------- */
/* With data.resize a JPEG is decoded at 1/2, 1/4 or 1/8 when its shorter side stays >= the
 * resize, then resized to the size its full decode would have been resized to (not the one
 * the scaled size would give: 72 x 100 at 1/8 is 9 x 13, whose Resize(9) would be 9 x 13,
 * but the full image's is 9 x 12). The result is close to the full decode's (data.jpeg_dct_
 * scale: false) on a smooth picture. */
static void test_dct_scale_through_transforms(void) {
  make_dirs("scaled");
  char p[PATH_CAP];
  smooth_jpeg("scaled/a.jpg", 240, 320, 3, &(gt_jpeg_opts){.quality = 95});
  smooth_jpeg("scaled/b.jpg", 240, 320, 3, &(gt_jpeg_opts){.quality = 95, .progressive = 1});
  const ganfw_transform fast = {.resize = 60, .unit_range = 1},
                        full = {.resize = 60, .unit_range = 1, .jpeg_full_size = 1};
  ganfw_dataset *a = NULL, *b = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(at(p, "scaled"), 1, &fast, &a), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(at(p, "scaled"), 1, &full, &b), GANFW_OK);
  int32_t c, h, w, c2, h2, w2;
  ganfw_dataset_shape(a, &c, &h, &w);
  ganfw_dataset_shape(b, &c2, &h2, &w2);
  CU_ASSERT(c == 3 && h == 60 && w == 80 && c2 == c && h2 == h && w2 == w);
  float *x = malloc(sizeof(float) * 3 * 60 * 80), *y = malloc(sizeof(float) * 3 * 60 * 80);
  double worst = 0;
  for (int i = 0; i < 2; i++) {
    CU_ASSERT_EQUAL_FATAL(ganfw_dataset_get(a, i, 0, x, NULL), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_dataset_get(b, i, 0, y, NULL), GANFW_OK);
    double sum = 0;
    for (int k = 0; k < 3 * 60 * 80; k++) {
      const double d = fabs((double)x[k] - y[k]) * 255;
      sum += d;
      worst = d > worst ? d : worst;
    }
    CU_ASSERT(sum / (3 * 60 * 80) < 1.0);
  }
  CU_ASSERT(worst < 5.0);
  printf("\n  resize 60 from 1/4 vs from full size: worst %.1f levels ", worst);
  /* the decoded size: 80 x 60 exactly, so the transform has nothing left to resize */
  float *px = NULL;
  int32_t sh, sw, fh, fw;
  CU_ASSERT_EQUAL(
      ganfw_jpeg_read_scaled(at(p, "scaled/a.jpg"), 60, 60, &px, &c, &sh, &sw, &fh, &fw), GANFW_OK);
  CU_ASSERT(sh == 60 && sw == 80 && fh == 240 && fw == 320);
  CU_ASSERT_EQUAL(ganfw_dataset_get(a, 0, 0, y, NULL), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(px, y, sizeof(float) * 3 * 60 * 80), 0);
  free(px);
  ganfw_dataset_destroy(a);
  ganfw_dataset_destroy(b);
  free(x);
  free(y);

  make_dirs("aspect");
  smooth_jpeg("aspect/a.jpg", 72, 100, 3, NULL);
  const ganfw_transform nine = {.resize = 9};
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(at(p, "aspect"), 1, &nine, &a), GANFW_OK);
  ganfw_dataset_shape(a, &c, &h, &w);
  CU_ASSERT(h == 9 && w == 12);
  float small[3 * 9 * 12];
  CU_ASSERT_EQUAL(ganfw_dataset_get(a, 0, 0, small, NULL), GANFW_OK);
  ganfw_dataset_destroy(a);
}

/* A folder of JPEGs through the loader with worker threads: the batches of one thread. */
static void test_loader_workers(void) {
  make_dirs("loader/x");
  make_dirs("loader/y");
  for (int i = 0; i < 12; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "loader/%s/%02d.jpg", i % 2 ? "y" : "x", i);
    smooth_jpeg(rel, 40 + i, 48, i % 3 ? 3 : 1,
                &(gt_jpeg_opts){.progressive = i % 4 == 1, .arithmetic = i % 5 == 2});
  }
  char p[PATH_CAP];
  const ganfw_transform tf = {.resize = 16, .crop_h = 16, .crop_w = 16, .hflip = 1};
  ganfw_dataset *ds = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_dataset_open_folder(at(p, "loader"), 1, &tf, &ds), GANFW_OK);
  enum { B = 4, BATCHES = 9, PER = 3 * 16 * 16 };
  static float want[BATCHES][B * PER], got[BATCHES][B * PER];
  static int32_t want_l[BATCHES][B], got_l[BATCHES][B];
  ganfw_loader_config cfg = {.batch_size = B, .seed = 7, .shuffle = 1, .drop_last = 1};
  for (int pass = 0; pass < 2; pass++) {
    if (pass) cfg.prefetch = 1, cfg.workers = 3;
    ganfw_loader *l = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_loader_create(ds, &cfg, &l), GANFW_OK);
    for (int b = 0; b < BATCHES; b++)
      CU_ASSERT_EQUAL_FATAL(
          ganfw_loader_next(l, pass ? got[b] : want[b], pass ? got_l[b] : want_l[b], NULL),
          GANFW_OK);
    ganfw_loader_destroy(l);
  }
  CU_ASSERT_EQUAL(memcmp(want, got, sizeof want), 0);
  CU_ASSERT_EQUAL(memcmp(want_l, got_l, sizeof want_l), 0);
  ganfw_dataset_destroy(ds);
}

/* --- a trainer that evaluates ---------------------------------------------------------------- */
/* The autoencoder trainer (plugins/trainers/autoencoder) on `rel`, one epoch, into the run
 * folder `run`; its log into err. */
static ganfw_status train_autoencoder(const char *rel, const char *run, char *err, size_t cap) {
  char dir[PATH_CAP], out[PATH_CAP], config[64], path[PATH_CAP], text[4 * PATH_CAP];
  snprintf(text, sizeof text,
           "seed: 1\ndevice: {type: cpu, threads: 1}\ndata: {dataset: folder, path: %s}\n"
           "model: {plugin: convae, latent: 4, channels: 4}\ntrainer: {plugin: autoencoder}\n"
           "optim: {plugin: adam}\ntrain: {batch_size: 4, epochs: 1}\nrun: {out_dir: %s}\n",
           at(dir, rel), at(out, run));
  snprintf(config, sizeof config, "%s.yaml", run);
  write_text(config, text);
  const int saved = capture_begin();
  const ganfw_status st = gt_train(at(path, config), NULL, 0);
  capture_end(saved, err, cap);
  if (st != GANFW_OK) printf("\n  %s: %s\n", config, ganfw_error_message());
  return st;
}

/* A trainer plugin that evaluates (the autoencoder) trains on a folder without train/ and
 * test/, saying it does not evaluate, and `ganfw sample` draws its grid from the training
 * images; with train/ and test/ it evaluates on test/ (eval.csv). */
static void test_trainer_without_test_split(void) {
  make_dirs("ae_flat");
  make_dirs("ae_split/train");
  make_dirs("ae_split/test");
  for (int i = 0; i < 8; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "ae_flat/%d.jpg", i);
    smooth_jpeg(rel, 16, 16, 3, NULL);
    snprintf(rel, sizeof rel, "ae_split/%s/%d.jpg", i % 2 ? "test" : "train", i);
    smooth_jpeg(rel, 16, 16, 3, NULL);
  }
  char err[8192], p[PATH_CAP], q[PATH_CAP];
  CU_ASSERT_EQUAL_FATAL(train_autoencoder("ae_flat", "run_flat", err, sizeof err), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "has no test split"));
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "trains without evaluating"));
  CU_ASSERT_NOT_EQUAL(access(at(p, "run_flat/eval.csv"), F_OK), 0);
  ganfw_sample_args a = {
      .source = at(p, "run_flat"), .output = at(q, "ae_flat.png"), .n = 4, .nrow = 2};
  const int saved = capture_begin();
  const ganfw_status st = ganfw_sample(&a);
  capture_end(saved, err, sizeof err);
  if (st != GANFW_OK) printf("\n  sample: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(err, "4 training images"));
  CU_ASSERT_EQUAL(access(q, F_OK), 0);
  CU_ASSERT_EQUAL_FATAL(train_autoencoder("ae_split", "run_split", err, sizeof err), GANFW_OK);
  CU_ASSERT_PTR_NULL(strstr(err, "has no test split"));
  double steps[4];
  CU_ASSERT_EQUAL(gt_csv_column(at(p, "run_split/eval.csv"), 0, steps, 4), 1); /* one epoch */
  ganfw_error_clear();
}

static CU_TestInfo tests[] = {
    {"classes_and_order", test_classes_and_order},
    {"skipped_files", test_skipped_files},
    {"layout_errors", test_layout_errors},
    {"train_test", test_train_test},
    {"background", test_background},
    {"background_config", test_background_config},
    {"mixed_channels_and_sizes", test_mixed_channels_and_sizes},
    {"dct_scale_through_transforms", test_dct_scale_through_transforms},
    {"loader_workers", test_loader_workers},
    {"trainer_without_test_split", test_trainer_without_test_split},
    CU_TEST_INFO_NULL,
};

GT_MAIN("image folder", tests)
