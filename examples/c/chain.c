/* llama.cpp's default chain on one candidate array per row:
 * penalties -> top_k -> top_p -> min_p -> temperature (last), min_keep 0;
 * chain_dist then samples the result with dist and the row's uniform u. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "args.h"
#include "samplers.h"

typedef struct {
    lc_penalty_args pen;
    int64_t *k;
    float *p, *m, *t;
    int64_t *window;
} chain_args;

static int chain_load(const lc_call *c, lc_rows *r, chain_args *a) {
    memset(a, 0, sizeof *a);
    if (penalty_args_load(c, r->B, r->V, &a->pen)) return -1;
    a->k = rows_i64(r, c, "k", 0, 0);
    a->p = a->k ? rows_f32(r, c, "p", 0, 0) : NULL;
    a->m = a->p ? rows_f32(r, c, "m", 0, 0) : NULL;
    a->t = a->m ? rows_f32(r, c, "t", 0, 0) : NULL;
    if (!a->t) return -1;
    a->window = malloc(((size_t)a->pen.hist.H + 1) * sizeof(int64_t));
    return a->window ? 0 : lc_failed("out of memory");
}

static void chain_free(chain_args *a) {
    penalty_args_free(&a->pen);
    free(a->window);
}

/* One row: x [V] in, y [V] out. */
static void chain_row(lc_rows *r, chain_args *a, int64_t b, float *y) {
    lc_cands cur;
    cands_from_row(&cur, r->scratch, r->x + b * r->V, (size_t)r->V, 0);
    /* the array arrives with p from the model's softmax, as from llama.cpp's backend probs */
    if (cands_count_finite(&cur)) cands_softmax(&cur, 0);
    if (penalty_active(&a->pen, b)) {
        size_t n = history_window(&a->pen.hist, b, a->pen.last_n[b], a->window);
        smp_penalties(&cur, a->window, n, a->pen.repeat[b], a->pen.freq[b], a->pen.present[b]);
    }
#ifdef BUG_TEMP_MISPLACED
    if (a->t[b] != 1.0f) smp_temp(&cur, a->t[b]); /* founding bug: temperature before truncation */
#endif
    if (a->k[b] > 0 && a->k[b] < r->V) smp_top_k(&cur, a->k[b]);
#ifdef BUG_TOP_P_STALE_SOFTMAX
    if (a->p[b] < 1.0f) smp_top_p(&cur, a->p[b], 0, 0); /* founding bug: stale p from the start */
#else
    if (a->p[b] < 1.0f) smp_top_p(&cur, a->p[b], 0, 1);
#endif
    if (a->m[b] > 0.0f) smp_min_p(&cur, a->m[b], 0);
#ifndef BUG_TEMP_MISPLACED
    if (a->t[b] != 1.0f) smp_temp(&cur, a->t[b]);
#endif
    cands_to_row(&cur, y, (size_t)r->V);
}

int api_llama_cpp_chain(const lc_call *c, lc_out *o) {
    lc_rows r;
    chain_args a;
    int rc = -1;
    memset(&a, 0, sizeof a);
    if (rows_begin(c, o, &r, 1) == 0 && chain_load(c, &r, &a) == 0) {
        for (int64_t b = 0; b < r.B; b++) chain_row(&r, &a, b, r.y + b * r.V);
        rc = 0;
    }
    chain_free(&a);
    rows_end(&r);
    return rc;
}

int api_llama_cpp_chain_dist(const lc_call *c, lc_out *o) {
    lc_rows r;
    chain_args a;
    int rc = -1;
    float *row = NULL;
    double *u = NULL;
    memset(&a, 0, sizeof a);
    if (rows_begin(c, o, &r, 0) == 0 && chain_load(c, &r, &a) == 0 &&
        (u = rows_f64(&r, c, "u", 0, 0)) != NULL && check_unit("u", u, r.B) == 0) {
        int64_t dims[1] = {r.B};
        int64_t *ids = lc_result_alloc(&o->r[0], LC_I64, 1, dims);
        row = malloc((size_t)r.V * sizeof(float));
        o->n = 1;
        rc = ids && row ? 0 : lc_failed("out of memory");
        for (int64_t b = 0; rc == 0 && b < r.B; b++) {
            chain_row(&r, &a, b, row);
            lc_cands cur; /* dist over the chain's output, in vocab order */
            cands_from_row(&cur, r.scratch, row, (size_t)r.V, 0);
            if (cands_count_finite(&cur) == 0)
                rc = lc_refuse("llama_cpp_chain_dist: row %lld has no finite logit to select", (long long)b);
            else ids[b] = cur.data[smp_dist(&cur, u[b])].id;
        }
    }
    chain_free(&a);
    free(row);
    rows_end(&r);
    return rc;
}
