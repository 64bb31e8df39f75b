/* Filters and transforms over dense rows: each row becomes a candidate array, the sampler runs,
 * the survivors go back to their ids (-inf elsewhere). No-op parameters copy the row. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "args.h"
#include "samplers.h"

#define ROW_IN(r, b) ((r).x + (b) * (r).V)
#define ROW_OUT(r, b) ((r).y + (b) * (r).V)

static void copy_row(lc_rows *r, int64_t b) {
    memcpy(ROW_OUT(*r, b), ROW_IN(*r, b), (size_t)r->V * sizeof(float));
}

static void load_row(lc_rows *r, int64_t b, lc_cands *cur, int finite_only) {
    cands_from_row(cur, r->scratch, ROW_IN(*r, b), (size_t)r->V, finite_only);
}

static int finish(lc_rows *r, int rc) {
    rows_end(r);
    return rc;
}

int api_top_k(const lc_call *c, lc_out *o) {
    lc_rows r;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    int64_t *k = rows_i64(&r, c, "k", 0, 0);
    if (!k) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++) {
        if (k[b] <= 0 || k[b] >= r.V) {
            copy_row(&r, b);
            continue;
        }
        lc_cands cur;
        load_row(&r, b, &cur, 0);
        smp_top_k(&cur, k[b]);
        cands_to_row(&cur, ROW_OUT(r, b), (size_t)r.V);
    }
    return finish(&r, 0);
}

/* top_p, min_p, typical: (p, min_keep) */
static int mass_filter(const lc_call *c, lc_out *o, int which) {
    lc_rows r;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    float *p = rows_f32(&r, c, "p", 0, 0);
    int64_t *mk = p ? rows_i64(&r, c, "min_keep", 1, 0) : NULL;
    if (!mk || check_nonneg("min_keep", mk, r.B)) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++) {
        const int noop = which == 1 ? p[b] <= 0.0f : p[b] >= 1.0f;
        if (noop) {
            copy_row(&r, b);
            continue;
        }
        lc_cands cur;
        load_row(&r, b, &cur, 0);
        if (which == 0) smp_top_p(&cur, p[b], (size_t)mk[b], 1);
        else if (which == 1) smp_min_p(&cur, p[b], (size_t)mk[b]);
        else smp_typical(&cur, p[b], (size_t)mk[b]);
        cands_to_row(&cur, ROW_OUT(r, b), (size_t)r.V);
    }
    return finish(&r, 0);
}

int api_top_p(const lc_call *c, lc_out *o) { return mass_filter(c, o, 0); }
int api_min_p(const lc_call *c, lc_out *o) { return mass_filter(c, o, 1); }
int api_typical(const lc_call *c, lc_out *o) { return mass_filter(c, o, 2); }

int api_top_n_sigma(const lc_call *c, lc_out *o) {
    lc_rows r;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    float *n = rows_f32(&r, c, "n", 0, 0);
    if (!n) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++) {
        if (n[b] <= 0.0f || r.V < 2) {
            copy_row(&r, b);
            continue;
        }
        lc_cands cur;
        load_row(&r, b, &cur, 0);
        smp_top_n_sigma(&cur, n[b]);
        cands_to_row(&cur, ROW_OUT(r, b), (size_t)r.V);
    }
    return finish(&r, 0);
}

int api_xtc(const lc_call *c, lc_out *o) {
    lc_rows r;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    float *chance = rows_f32(&r, c, "chance", 0, 0);
    float *prob = chance ? rows_f32(&r, c, "probability", 0, 0) : NULL;
    float *thr = prob ? rows_f32(&r, c, "threshold", 0, 0) : NULL;
    int64_t *mk = thr ? rows_i64(&r, c, "min_keep", 1, 0) : NULL;
    if (!mk || check_nonneg("min_keep", mk, r.B)) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++)
        if (!(chance[b] >= 0.0f && chance[b] <= 1.0f))
            return finish(&r, lc_refuse("parameter chance must lie in [0, 1], got %g", chance[b]));
    for (int64_t b = 0; b < r.B; b++) {
        lc_cands cur;
        load_row(&r, b, &cur, 1); /* the -inf tokens are no candidates */
        if (prob[b] <= 0.0f || thr[b] > 0.5f || cur.size < 2 || chance[b] > prob[b]) {
            copy_row(&r, b);
            continue;
        }
        smp_xtc_cut(&cur, thr[b], (size_t)mk[b]);
        cands_to_row(&cur, ROW_OUT(r, b), (size_t)r.V);
    }
    return finish(&r, 0);
}

int api_temp(const lc_call *c, lc_out *o) {
    lc_rows r;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    float *t = rows_f32(&r, c, "t", 0, 0);
    if (!t) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++) {
        if (t[b] == 1.0f) {
            copy_row(&r, b);
            continue;
        }
        lc_cands cur;
        load_row(&r, b, &cur, 0);
        smp_temp(&cur, t[b]);
        cands_to_row(&cur, ROW_OUT(r, b), (size_t)r.V);
    }
    return finish(&r, 0);
}

int api_temp_ext(const lc_call *c, lc_out *o) {
    lc_rows r;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    float *t = rows_f32(&r, c, "t", 0, 0);
    float *delta = t ? rows_f32(&r, c, "delta", 0, 0) : NULL;
    float *expo = delta ? rows_f32(&r, c, "exponent", 0, 0) : NULL;
    if (!expo) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++) {
        if (t[b] == 1.0f && delta[b] <= 0.0f) {
            copy_row(&r, b);
            continue;
        }
        lc_cands cur; /* dynamic: over the finite candidates (ln n counts those only) */
        load_row(&r, b, &cur, delta[b] > 0.0f);
        smp_temp_ext(&cur, t[b], delta[b], expo[b]);
        cands_to_row(&cur, ROW_OUT(r, b), (size_t)r.V);
    }
    return finish(&r, 0);
}

int api_penalties(const lc_call *c, lc_out *o) {
    lc_rows r;
    lc_penalty_args pa;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    if (penalty_args_load(c, r.B, r.V, &pa)) {
        penalty_args_free(&pa);
        return finish(&r, -1);
    }
    int64_t *window = malloc(((size_t)pa.hist.H + 1) * sizeof(int64_t));
    for (int64_t b = 0; window && b < r.B; b++) {
        if (!penalty_active(&pa, b)) {
            copy_row(&r, b);
            continue;
        }
        lc_cands cur;
        load_row(&r, b, &cur, 0);
        size_t n = history_window(&pa.hist, b, pa.last_n[b], window);
        smp_penalties(&cur, window, n, pa.repeat[b], pa.freq[b], pa.present[b]);
        cands_to_row(&cur, ROW_OUT(r, b), (size_t)r.V);
    }
    int rc = window ? 0 : lc_failed("out of memory");
    free(window);
    penalty_args_free(&pa);
    return finish(&r, rc);
}

int api_logit_bias(const lc_call *c, lc_out *o) {
    lc_rows r;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    const lc_array *bias = arg_need(c, "bias");
    if (!bias) return finish(&r, -1);
    if (!arg_is_float(bias) && !arg_is_int(bias))
        return finish(&r, lc_refuse("bias must be numeric, got %s", lc_dtype_name(bias->dtype)));
    const int shared = bias->ndim == 1 && bias->dims[0] == r.V;
    if (!shared && !(bias->ndim == 2 && bias->dims[0] == r.B && bias->dims[1] == r.V))
        return finish(&r, lc_refuse("bias must be [%lld] or [%lld, %lld]", (long long)r.V,
                                    (long long)r.B, (long long)r.V));
    for (size_t i = 0; i < bias->count; i++)
        if (!((float)arg_num(bias, i) < INFINITY))
            return finish(&r, lc_refuse("bias contains NaN or +inf (entry %zu)", i));
    for (int64_t b = 0; b < r.B; b++) {
        const float *x = ROW_IN(r, b);
        float *y = ROW_OUT(r, b);
        const size_t off = shared ? 0 : (size_t)(b * r.V);
        for (int64_t j = 0; j < r.V; j++) y[j] = x[j] + (float)arg_num(bias, off + (size_t)j);
    }
    return finish(&r, 0);
}
