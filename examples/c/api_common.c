/* Plumbing shared by the sampler entry points: logits rows, results, penalty arguments. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "args.h"
#include "cand.h"

int rows_begin(const lc_call *c, lc_out *o, lc_rows *r, int with_result) {
    memset(r, 0, sizeof *r);
    r->x = arg_logits(c, "logits", &r->B, &r->V);
    if (!r->x) return -1;
    r->scratch = malloc((size_t)r->V * sizeof(lc_token));
    if (!r->scratch) return lc_failed("out of memory");
    if (with_result) {
        int64_t dims[2] = {r->B, r->V};
        r->y = lc_result_alloc(&o->r[0], LC_F32, 2, dims);
        if (!r->y) return lc_failed("out of memory");
        o->n = 1;
    }
    return 0;
}

void rows_end(lc_rows *r) {
    free(r->x);
    free(r->scratch);
    for (int i = 0; i < r->ntmp; i++) free(r->tmp[i]);
    r->x = NULL;
    r->scratch = NULL;
    r->ntmp = 0;
}

static void *rows_tmp(lc_rows *r, size_t bytes) {
    void *p = r->ntmp < 16 ? malloc(bytes + 8) : NULL;
    if (!p) {
        lc_failed("out of memory");
        return NULL;
    }
    r->tmp[r->ntmp++] = p;
    return p;
}

float *rows_f32(lc_rows *r, const lc_call *c, const char *name, int has_def, float def) {
    float *v = rows_tmp(r, (size_t)r->B * sizeof(float));
    return v && param_f32(c, name, r->B, has_def, def, v) == 0 ? v : NULL;
}

double *rows_f64(lc_rows *r, const lc_call *c, const char *name, int has_def, double def) {
    double *v = rows_tmp(r, (size_t)r->B * sizeof(double));
    return v && param_f64(c, name, r->B, has_def, def, v) == 0 ? v : NULL;
}

int64_t *rows_i64(lc_rows *r, const lc_call *c, const char *name, int has_def, int64_t def) {
    int64_t *v = rows_tmp(r, (size_t)r->B * sizeof(int64_t));
    return v && param_i64(c, name, r->B, has_def, def, v) == 0 ? v : NULL;
}

int history_load(const lc_call *c, const char *name, int64_t B, int64_t V, lc_history *h) {
    const lc_array *a = arg_need(c, name);
    h->ids = NULL;
    h->H = 0;
    if (!a) return -1;
    if (a->ndim == 1) h->H = a->dims[0];
    else if (a->ndim == 2 && a->dims[0] == B) h->H = a->dims[1];
    else return lc_refuse("%s must be [H] or [batch=%lld, H]", name, (long long)B);
    if (a->count && !arg_is_int(a)) return lc_refuse("%s must hold integer token ids", name);
    h->ids = malloc(((size_t)(B * h->H) + 1) * sizeof(int64_t));
    if (!h->ids) return lc_failed("out of memory");
    for (int64_t b = 0; b < B; b++) {
        for (int64_t j = 0; j < h->H; j++) {
            size_t src = (size_t)((a->ndim == 1 ? 0 : b) * h->H + j);
            int64_t id = a->dtype == LC_I64 ? ((const int64_t *)a->data)[src]
                                            : (int64_t)((const int32_t *)a->data)[src];
            if (id < -1 || id >= V)
                return lc_refuse("%s row %lld holds id %lld outside [-1, %lld) (-1 is padding)", name,
                                 (long long)b, (long long)id, (long long)V);
            h->ids[b * h->H + j] = id;
        }
    }
    return 0;
}

size_t history_window(const lc_history *h, int64_t b, int64_t last_n, int64_t *win) {
    size_t n = 0;
    const int64_t *row = h->ids + b * h->H;
    int64_t start = h->H;
    while (start > 0 && (int64_t)n < last_n) { /* newest first, padding skipped */
        start--;
        if (row[start] >= 0) n++;
    }
    size_t k = 0;
    for (int64_t j = start; j < h->H; j++)
        if (row[j] >= 0) win[k++] = row[j];
    return k;
}

int penalty_args_load(const lc_call *c, int64_t B, int64_t V, lc_penalty_args *a) {
    memset(a, 0, sizeof *a);
    a->last_n = malloc((size_t)B * sizeof(int64_t));
    a->repeat = malloc((size_t)B * sizeof(float));
    a->freq = malloc((size_t)B * sizeof(float));
    a->present = malloc((size_t)B * sizeof(float));
    if (!a->last_n || !a->repeat || !a->freq || !a->present) return lc_failed("out of memory");
    if (history_load(c, "history", B, V, &a->hist) || param_i64(c, "last_n", B, 0, 0, a->last_n) ||
        param_f32(c, "repeat", B, 0, 0, a->repeat) || param_f32(c, "freq", B, 0, 0, a->freq) ||
        param_f32(c, "present", B, 0, 0, a->present))
        return -1;
    for (int64_t b = 0; b < B; b++)
        if (!(a->repeat[b] > 0.0f)) /* in float32: 1e-50 is 0 there */
            return lc_refuse("parameter repeat must be > 0, got %g", a->repeat[b]);
    return 0;
}

int penalty_active(const lc_penalty_args *a, int64_t b) {
    return a->last_n[b] > 0 && a->hist.H > 0 &&
           !(a->repeat[b] == 1.0f && a->freq[b] == 0.0f && a->present[b] == 0.0f);
}

void penalty_args_free(lc_penalty_args *a) {
    free(a->last_n);
    free(a->repeat);
    free(a->freq);
    free(a->present);
    free(a->hist.ids);
}
