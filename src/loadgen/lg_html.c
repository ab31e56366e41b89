// The HTML report: one self-contained page, charts as inline SVG.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loadgen/lg_report.h"
#include "loadgen/lg_model.h"

typedef struct series {
    char label[96];
    const double *x, *y; // (n,)
    size_t n;
    int markers;
} series;

static const char *const COLORS[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                     "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

static void esc(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

// A "nice" tick step for a range.
static double tick_step(double range) {
    if (!(range > 0)) return 1;
    double e = pow(10, floor(log10(range / 5))), m = range / 5 / e;
    return e * (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10);
}

static void chart(FILE *f, const char *title, const char *xl, const char *yl, const series *s, size_t ns) {
    const double W = 560, H = 340, L = 64, R = 16, T = 30, B = 46;
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (size_t i = 0; i < ns; i++)
        for (size_t k = 0; k < s[i].n; k++) {
            if (!isfinite(s[i].x[k]) || !isfinite(s[i].y[k])) continue;
            x0 = fmin(x0, s[i].x[k]), x1 = fmax(x1, s[i].x[k]);
            y0 = fmin(y0, s[i].y[k]), y1 = fmax(y1, s[i].y[k]);
        }
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%g' height='%g' class='chart'>\n", W, H);
    fprintf(f, "<text x='%g' y='18' font-weight='bold'>", L);
    esc(f, title);
    fputs("</text>\n", f);
    if (!(x1 >= x0)) {
        fprintf(f, "<text x='%g' y='%g'>no data</text></svg>\n", W / 2 - 30, H / 2);
        return;
    }
    if (x0 > 0 && x0 < (x1 - x0) * 0.5) x0 = 0;
    if (y0 > 0) y0 = 0;
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) y1 = y0 + 1;
    double pw = W - L - R, ph = H - T - B;
#define PX(v) (L + ((v) - x0) / (x1 - x0) * pw)
#define PY(v) (T + ph - ((v) - y0) / (y1 - y0) * ph)
    fprintf(f, "<rect x='%g' y='%g' width='%g' height='%g' fill='none' stroke='#999'/>\n", L, T, pw, ph);
    double st = tick_step(x1 - x0);
    for (double v = ceil(x0 / st) * st; v <= x1 + 1e-9; v += st)
        fprintf(f, "<line x1='%.1f' x2='%.1f' y1='%g' y2='%g' stroke='#eee'/><text x='%.1f' y='%g' font-size='11' "
                   "text-anchor='middle'>%g</text>\n",
                PX(v), PX(v), T, T + ph, PX(v), T + ph + 14, v);
    st = tick_step(y1 - y0);
    for (double v = ceil(y0 / st) * st; v <= y1 + 1e-9; v += st)
        fprintf(f, "<line x1='%g' x2='%g' y1='%.1f' y2='%.1f' stroke='#eee'/><text x='%g' y='%.1f' font-size='11' "
                   "text-anchor='end'>%g</text>\n",
                L, L + pw, PY(v), PY(v), L - 4, PY(v) + 4, v);
    fprintf(f, "<text x='%g' y='%g' font-size='12' text-anchor='middle'>", L + pw / 2, H - 8);
    esc(f, xl);
    fprintf(f, "</text><text font-size='12' text-anchor='middle' transform='translate(14,%g) rotate(-90)'>", T + ph / 2);
    esc(f, yl);
    fputs("</text>\n", f);
    for (size_t i = 0; i < ns; i++) {
        const char *c = COLORS[i % (sizeof COLORS / sizeof COLORS[0])];
        fprintf(f, "<polyline fill='none' stroke='%s' stroke-width='1.6' points='", c);
        size_t step = s[i].n > 600 ? s[i].n / 600 : 1;
        for (size_t k = 0; k < s[i].n; k += step)
            if (isfinite(s[i].x[k]) && isfinite(s[i].y[k])) fprintf(f, "%.1f,%.1f ", PX(s[i].x[k]), PY(s[i].y[k]));
        if (s[i].n && (s[i].n - 1) % step) fprintf(f, "%.1f,%.1f", PX(s[i].x[s[i].n - 1]), PY(s[i].y[s[i].n - 1]));
        fputs("'/>\n", f);
        if (s[i].markers)
            for (size_t k = 0; k < s[i].n; k++)
                if (isfinite(s[i].x[k]) && isfinite(s[i].y[k]))
                    fprintf(f, "<circle cx='%.1f' cy='%.1f' r='3' fill='%s'/>\n", PX(s[i].x[k]), PY(s[i].y[k]), c);
        fprintf(f, "<rect x='%g' y='%g' width='10' height='10' fill='%s'/><text x='%g' y='%g' font-size='11'>",
                L + pw - 170, T + 6 + 14.0 * (double)i, c, L + pw - 156, T + 15 + 14.0 * (double)i);
        esc(f, s[i].label);
        fputs("</text>\n", f);
    }
#undef PX
#undef PY
    fputs("</svg>\n", f);
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Latency samples (ms, sorted) of one metric over a result's measured, completed requests. which: 0 ttft,
// 1 tpot, 2 itl, 3 e2e. Returns the count; *xs and *ys (cumulative fraction) are malloc'd.
static size_t cdf(const lg_result *r, int which, double **xs, double **ys) {
    size_t n = 0;
    for (size_t i = 0; i < r->run.n; i++) {
        const lg_record *q = &r->run.recs[i];
        if (q->index < 0 || !q->ok) continue;
        n += which == 2 ? q->n_itl : (which == 1 ? q->output_tokens > 1 : 1);
    }
    *xs = malloc((n + 1) * sizeof **xs);
    *ys = malloc((n + 1) * sizeof **ys);
    if (!*xs || !*ys) return 0;
    size_t k = 0;
    for (size_t i = 0; i < r->run.n; i++) {
        const lg_record *q = &r->run.recs[i];
        if (q->index < 0 || !q->ok) continue;
        if (which == 0) (*xs)[k++] = q->ttft * 1e3;
        else if (which == 1 && q->output_tokens > 1) (*xs)[k++] = q->tpot * 1e3;
        else if (which == 2)
            for (size_t j = 0; j < q->n_itl; j++) (*xs)[k++] = q->itl[j] * 1e3;
        else if (which == 3) (*xs)[k++] = q->e2e * 1e3;
    }
    qsort(*xs, n, sizeof **xs, cmpd);
    for (size_t i = 0; i < n; i++) (*ys)[i] = (double)(i + 1) / (double)n;
    return n;
}

static void label_of(const lg_result *r, char *buf, size_t cap) {
    snprintf(buf, cap, "%s%s%s", r->label[0] ? r->label : "run", r->server[0] ? " " : "", r->server);
}

// Per-class table of every result (priority / length classes).
static void class_tables(FILE *f, const lg_result *res, size_t n) {
    int any = 0;
    for (size_t i = 0; i < n; i++) any |= res[i].cls.n > 0;
    if (!any) return;
    fputs("<h2>Per class</h2>\n<table><tr><th>run</th><th>class</th><th>ok</th><th>failed / refused</th><th>good</th>"
          "<th>goodput req/s</th><th>TTFT p50</th><th>TTFT p99</th></tr>\n", f);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < res[i].cls.n; k++) {
            const lg_class_sum *c = &res[i].cls.c[k];
            char lb[128];
            label_of(&res[i], lb, sizeof lb);
            fputs("<tr><td>", f);
            esc(f, lb);
            fputs("</td><td>", f);
            esc(f, c->name);
            fprintf(f, "</td><td>%zu</td><td>%zu</td><td>%zu</td><td>%.3f</td><td>%.2f</td><td>%.2f</td></tr>\n",
                    c->completed, c->failed, c->good, c->goodput, c->ttft.median, c->ttft.p99);
        }
    fputs("</table>\n", f);
}

// Sweeps: goodput (all requests and per class) and p99 TTFT per class against the sweep value, one series per
// (server, class). Returns 0 or TC_ERR_NOMEM.
static int class_sweep_charts(FILE *f, const lg_result *res, size_t n, int sweep) {
    const char *names[LG_MAX_CLASSES + 1];
    int nn = 0;
    names[nn++] = "all";
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < res[i].cls.n; k++) {
            int seen = 0;
            for (int j = 0; j < nn; j++) seen |= !strcmp(names[j], res[i].cls.c[k].name);
            if (!seen && nn < LG_MAX_CLASSES + 1) names[nn++] = res[i].cls.c[k].name;
        }
    int has_slo = 0;
    for (size_t i = 0; i < n; i++) has_slo |= res[i].sum.has_slo;
    if (!has_slo && nn == 1) return 0;
    const char *servers[2] = {"", "B"};
    int n_servers = 1;
    for (size_t i = 0; i < n; i++)
        if (!strcmp(res[i].server, "B")) n_servers = 2;
    if (n_servers == 2) servers[0] = "A";
    size_t ns_max = (size_t)(nn * n_servers);
    series *ss = calloc(ns_max, sizeof *ss);
    double *buf = calloc(ns_max * 2 * (n + 1), sizeof *buf);
    if (!ss || !buf) {
        free(ss);
        free(buf);
        return TC_ERR_NOMEM;
    }
    const char *xl = sweep == 2 ? "offered load (x measured capacity)" : "sweep value (request rate or concurrency)";
    fputs(sweep == 2 ? "<h2>Overload sweep (Poisson arrivals)</h2>\n" : "<h2>Goodput per class</h2>\n", f);
    for (int metric = 0; metric < 2; metric++) {
        size_t ns = 0;
        for (int sv = 0; sv < n_servers; sv++)
            for (int j = 0; j < nn; j++) {
                if (metric == 1 && j == 0) continue; // p99 TTFT of all requests is in the throughput chart
                double *x = buf + ns * 2 * (n + 1), *y = x + n + 1;
                size_t m = 0;
                for (size_t i = 0; i < n; i++) {
                    if (strcmp(res[i].server, servers[sv])) continue;
                    double v = NAN;
                    if (j == 0) v = res[i].sum.goodput;
                    for (int k = 0; j > 0 && k < res[i].cls.n; k++)
                        if (!strcmp(res[i].cls.c[k].name, names[j]))
                            v = metric == 0 ? res[i].cls.c[k].goodput : res[i].cls.c[k].ttft.p99;
                    if (isnan(v)) continue;
                    x[m] = res[i].x, y[m++] = v;
                }
                series *s = &ss[ns++];
                snprintf(s->label, sizeof s->label, "%s%s%s", names[j], servers[sv][0] ? " server " : "", servers[sv]);
                s->x = x, s->y = y, s->n = m, s->markers = 1;
            }
        chart(f, metric == 0 ? "goodput (requests meeting the SLOs per second)" : "p99 TTFT per class", xl,
              metric == 0 ? "req/s" : "ms", ss, ns);
    }
    free(ss);
    free(buf);
    return 0;
}

int lg_write_html(const char *path, const char *title, const lg_result *res, size_t n, int sweep,
                  tc_err *err) {
    FILE *f = fopen(path, "w");
    if (!f) return tc_err_set(err, TC_ERR_IO, "cannot write '%s'", path);
    fputs("<!doctype html><html><head><meta charset='utf-8'><title>", f);
    esc(f, title);
    fputs("</title><style>body{font-family:sans-serif;margin:20px}table{border-collapse:collapse}"
          "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}.chart{margin:6px}</style></head><body>\n<h1>",
          f);
    esc(f, title);
    fputs("</h1>\n<table><tr><th>run</th><th>url</th><th>ok</th><th>failed</th><th>req/s</th><th>out tok/s</th>"
          "<th>TTFT p50</th><th>TTFT p99</th><th>TPOT p50</th><th>TPOT p99</th><th>ITL p99</th><th>E2E p99</th></tr>\n",
          f);
    for (size_t i = 0; i < n; i++) {
        const lg_summary *s = &res[i].sum;
        char lb[128];
        label_of(&res[i], lb, sizeof lb);
        fputs("<tr><td>", f);
        esc(f, lb);
        fputs("</td><td>", f);
        esc(f, res[i].url ? res[i].url : "");
        fprintf(f, "</td><td>%zu</td><td>%zu</td><td>%.2f</td><td>%.1f</td><td>%.2f</td><td>%.2f</td><td>%.2f</td>"
                   "<td>%.2f</td><td>%.2f</td><td>%.2f</td></tr>\n",
                s->completed, s->failed, s->req_throughput, s->output_throughput, s->ttft.median, s->ttft.p99,
                s->tpot.median, s->tpot.p99, s->itl.p99, s->e2e.p99);
    }
    fputs("</table><p>Latencies in ms. All times measured by the client on a monotonic clock.</p>\n", f);
    class_tables(f, res, n);
    for (size_t i = 0; i < n; i++) { // several models or a router: which model answered (lg_model.c)
        char lb[128];
        label_of(&res[i], lb, sizeof lb);
        lg_model_html(f, lb, res[i].run.recs, res[i].run.n, res[i].run.duration);
    }
    int rc = 0;
    series *ss = calloc(n * 2 + 1, sizeof *ss);
    double **bufs = calloc(n * 8 + 1, sizeof *bufs);
    if (!ss || !bufs) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (sweep && class_sweep_charts(f, res, n, sweep)) {
        rc = tc_err_set(err, TC_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (sweep) { // throughput vs latency: one series per (server, percentile)
        fputs("<h2>Latency vs output throughput</h2>\n", f);
        const char *servers[2] = {"", "B"};
        int n_servers = 1;
        for (size_t i = 0; i < n; i++)
            if (!strcmp(res[i].server, "B")) n_servers = 2;
        if (n_servers == 2) servers[0] = "A";
        for (int metric = 0; metric < 2; metric++) {
            size_t ns = 0, nb = 0;
            for (int sv = 0; sv < n_servers; sv++)
                for (int pc = 0; pc < 2; pc++) {
                    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
                    bufs[nb++] = x, bufs[nb++] = y;
                    if (!x || !y) continue;
                    size_t k = 0;
                    for (size_t i = 0; i < n; i++) {
                        if (strcmp(res[i].server, servers[sv])) continue;
                        const lg_dist *d = metric == 0 ? &res[i].sum.ttft : &res[i].sum.tpot;
                        x[k] = res[i].sum.output_throughput;
                        y[k++] = pc == 0 ? d->median : d->p99;
                    }
                    series *s = &ss[ns++];
                    snprintf(s->label, sizeof s->label, "%s %s%s%s", pc == 0 ? "p50" : "p99",
                             metric == 0 ? "TTFT" : "TPOT", servers[sv][0] ? " server " : "", servers[sv]);
                    s->x = x, s->y = y, s->n = k, s->markers = 1;
                }
            chart(f, metric == 0 ? "TTFT vs output throughput" : "TPOT vs output throughput", "output tokens/s",
                  "ms", ss, ns);
            for (size_t i = 0; i < nb; i++) free(bufs[i]), bufs[i] = NULL;
        }
    }
    fputs("<h2>Latency CDFs</h2>\n", f);
    static const char *const names[4] = {"TTFT", "TPOT", "ITL", "E2E latency"};
    for (int which = 0; which < 4; which++) {
        size_t nb = 0;
        for (size_t i = 0; i < n; i++) {
            double *x = NULL, *y = NULL;
            size_t m = cdf(&res[i], which, &x, &y);
            bufs[nb++] = x, bufs[nb++] = y;
            ss[i] = (series){.x = x, .y = y, .n = x && y ? m : 0};
            label_of(&res[i], ss[i].label, sizeof ss[i].label);
        }
        char t[64];
        snprintf(t, sizeof t, "%s CDF", names[which]);
        chart(f, t, "ms", "fraction of samples", ss, n);
        for (size_t i = 0; i < nb; i++) free(bufs[i]), bufs[i] = NULL;
    }
    fputs("</body></html>\n", f);
done:
    free(ss);
    free(bufs);
    if (fclose(f) && !rc) rc = tc_err_set(err, TC_ERR_IO, "cannot write '%s'", path);
    return rc;
}
