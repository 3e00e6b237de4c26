/* memory.html (see report.h): a page of plain HTML and CSS with inline SVG, written in one
 * pass; every text from a config or a layer name is escaped. */
#include "tools/report.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/file.h"
#include "tools/timeline.h"
#include "runtime/alloc.h"
#include "tools/plan.h"

#define MIB (1024.0 * 1024.0)

typedef struct page {
  const char *title;
  const ganfw_report_part *parts;
  int n_parts;
  const ganfw_compare_row *rows;
  int n_rows;
} page;

const char *ganfw_compare_row_layout(const ganfw_compare_row *row) {
  return row->r.planned ? "planned" : "caching";
}

/* The timeline's SVG without an XML prolog, inline. */
static ganfw_status timeline(FILE *f, const ganfw_report_part *p) {
  char *svg = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&svg, &len);
  if (!m) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory for the report's picture");
  char title[1024];
  snprintf(title, sizeof title, "%s, %s", p->name, p->caption ? p->caption : "");
  /* the config's device.memory_limit, when the part has its plan: a line there */
  ganfw_timeline_options opt = {.title = title,
                                .memory_limit = p->plan ? p->plan->config_memory_limit : 0};
  ganfw_status st = ganfw_timeline_write_svg(m, p->ev, p->n, &opt);
  fclose(m);
  if (st == GANFW_OK) {
    const char *at = svg ? strstr(svg, "<svg") : NULL;
    fputs(at ? at : "", f);
  }
  free(svg);
  return st;
}

static void layer_table(FILE *f, const ganfw_probe_result *p) {
  fprintf(f,
          "<table class=\"layers\"><caption>Who holds the bytes at the planned peak (%.2f "
          "MiB allocated, in the %s), MiB</caption>\n<tr><th>layer</th>",
          (double)p->peak_allocated / MIB, ganfw_probe_phase_name(p, p->peak_phase));
  for (int c = 0; c < GANFW_MEM_COUNT; c++) fprintf(f, "<th>%s</th>", ganfw_mem_category_name(c));
  fputs("<th>total</th></tr>\n", f);
  for (int32_t i = 0; i < p->n_layers; i++) {
    const ganfw_probe_layer *l = &p->layers[i];
    fputs("<tr><td>", f);
    ganfw_xml_fputs(f, l->name);
    fputs("</td>", f);
    for (int c = 0; c < GANFW_MEM_COUNT; c++)
      if (l->bytes[c])
        fprintf(f, "<td>%.3f</td>", (double)l->bytes[c] / MIB);
      else
        fputs("<td>-</td>", f);
    fprintf(f, "<td>%.3f</td></tr>\n", (double)l->total / MIB);
  }
  fputs("<tr class=\"total\"><td>total</td>", f);
  for (int c = 0; c < GANFW_MEM_COUNT; c++)
    fprintf(f, "<td>%.3f</td>", (double)p->at_peak[c] / MIB);
  int64_t sum = 0;
  for (int c = 0; c < GANFW_MEM_COUNT; c++) sum += p->at_peak[c];
  fprintf(f, "<td>%.3f</td></tr>\n</table>\n", (double)sum / MIB);
}

static void compare_table(FILE *f, const ganfw_compare_row *rows, int n) {
  fputs("<table class=\"compare\"><caption>Side by side (ganfw compare)</caption>\n<tr><th>config"
        "</th><th>layout</th><th>batch</th><th>peak allocated MiB</th><th>peak reserved MiB</th>",
        f);
  for (int c = 0; c < GANFW_MEM_COUNT; c++) fprintf(f, "<th>%s</th>", ganfw_mem_category_name(c));
  fputs("<th>step s</th><th>images/s</th><th>OOM</th><th>plan - measured</th></tr>\n", f);
  for (int i = 0; i < n; i++) {
    const ganfw_compare_row *row = &rows[i];
    const ganfw_probe_result *r = &row->r;
    fputs("<tr><td>", f);
    ganfw_xml_fputs(f, row->config);
    fputs("</td>", f);
    if (row->status != GANFW_OK) {
      fputs("<td colspan=\"15\">error: ", f);
      ganfw_xml_fputs(f, row->error);
      fputs("</td></tr>\n", f);
      continue;
    }
    fprintf(f, "<td>%s</td><td>%lld</td><td>%.2f</td><td>%.2f</td>", ganfw_compare_row_layout(row),
            (long long)r->batch_size, (double)r->peak_allocated / MIB,
            (double)r->peak_reserved / MIB);
    for (int c = 0; c < GANFW_MEM_COUNT; c++)
      fprintf(f, "<td>%.2f</td>", (double)r->peak_category[c] / MIB);
    if (r->steps_done > 0)
      fprintf(f, "<td>%.3f</td><td>%.1f</td>", r->step_seconds, r->images_per_s);
    else
      fputs("<td>-</td><td>-</td>", f);
    fprintf(f, "<td>%s</td>", r->oom ? "yes" : "no");
    if (row->planned && !r->oom)
      fprintf(f, "<td>%+.2f%%</td></tr>\n",
              ganfw_plan_diff_percent(row->plan_allocated, r->peak_allocated));
    else
      fputs("<td>-</td></tr>\n", f);
  }
  fputs("</table>\n", f);
}

static ganfw_status write_page(FILE *f, void *ud) {
  const page *pg = ud;
  ganfw_timeline_summary first;
  int have_peak = pg->n_parts > 0 && pg->parts[0].ev &&
                  ganfw_timeline_summarize(pg->parts[0].ev, pg->parts[0].n, &first) == GANFW_OK;
  ganfw_error_clear();
  fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>", f);
  ganfw_xml_fputs(f, pg->title);
  if (have_peak) fprintf(f, ": peak %.2f MiB allocated", (double)first.peak_allocated / MIB);
  fputs("</title>\n<style>\n"
        "body{font-family:sans-serif;margin:16px;color:#111;background:#fff}\n"
        "h1{font-size:20px}h2{font-size:16px;margin-top:28px}\n"
        "table{border-collapse:collapse;font-size:12px;margin:8px 0}\n"
        "th,td{border:1px solid #bbb;padding:2px 6px;text-align:right}\n"
        "td:first-child,th:first-child{text-align:left}\n"
        "caption{text-align:left;font-weight:bold;padding:4px 0}\n"
        "tr.total td{font-weight:bold}\n"
        "svg{max-width:100%;height:auto;border:1px solid #ddd}\n"
        "</style></head>\n<body>\n<h1>",
        f);
  ganfw_xml_fputs(f, pg->title);
  fputs("</h1>\n", f);
  if (pg->rows && pg->n_rows > 0) compare_table(f, pg->rows, pg->n_rows);
  for (int i = 0; i < pg->n_parts; i++) {
    const ganfw_report_part *p = &pg->parts[i];
    fputs("<section class=\"part\"><h2>", f);
    ganfw_xml_fputs(f, p->name);
    if (p->caption) {
      fputs(": ", f);
      ganfw_xml_fputs(f, p->caption);
    }
    fputs("</h2>\n", f);
    if (p->html) fputs(p->html, f);
    if (p->ev) {
      ganfw_status st = timeline(f, p);
      if (st != GANFW_OK) return st;
      fputc('\n', f);
    }
    if (p->plan && p->plan->n_layers > 0) layer_table(f, p->plan);
    fputs("</section>\n", f);
  }
  fputs("<p>Made by ganfw from the allocator's own events: the picture's x axis is the step's "
        "allocator events in order; categories are stacked with param at the bottom.</p>\n"
        "</body></html>\n",
        f);
  return GANFW_OK;
}

ganfw_status ganfw_report_write_html(const char *path, const char *title,
                                     const ganfw_report_part *parts, int n_parts,
                                     const ganfw_compare_row *rows, int n_rows) {
  page pg = {title ? title : "ganfw memory report", parts, n_parts, rows, n_rows};
  return ganfw_file_write_atomic(path, write_page, &pg);
}

ganfw_status ganfw_report_plan(const ganfw_run_config *config, ganfw_probe_result *out) {
  ganfw_probe_options opt = {.meta = 1,
                             .warmup = 1,
                             .steps = 1,
                             .layers = 1,
                             .limit_mode = GANFW_PROBE_LIMIT_CONFIG,
                             .trace = 1};
  return ganfw_probe_run(config, &opt, out);
}
