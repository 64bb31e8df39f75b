/* softmax and the selectors: greedy, dist, mirostat_v2. */
#include <math.h>
#include <string.h>

#include "api.h"
#include "args.h"
#include "samplers.h"

static int finish(lc_rows *r, int rc) {
    rows_end(r);
    return rc;
}

int api_softmax(const lc_call *c, lc_out *o) {
    lc_rows r;
    if (rows_begin(c, o, &r, 1)) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++) {
        float *y = r.y + b * r.V;
        lc_cands cur;
        cands_from_row(&cur, r.scratch, r.x + b * r.V, (size_t)r.V, 0);
        if (cands_count_finite(&cur) == 0) { /* no distribution: all zeros */
            memset(y, 0, (size_t)r.V * sizeof(float));
            continue;
        }
        cands_softmax(&cur, 1);
        for (size_t i = 0; i < cur.size; i++) y[cur.data[i].id] = cur.data[i].p;
    }
    return finish(&r, 0);
}

/* ids [B] as the first result; refuses rows without a finite logit. */
static int64_t *select_begin(const lc_call *c, lc_out *o, lc_rows *r, const char *fn) {
    if (rows_begin(c, o, r, 0)) return NULL;
    for (int64_t b = 0; b < r->B; b++) {
        const float *x = r->x + b * r->V;
        int64_t j = 0;
        while (j < r->V && x[j] == -INFINITY) j++;
        if (j == r->V) {
            lc_refuse("%s: row %lld has no finite logit to select", fn, (long long)b);
            return NULL;
        }
    }
    int64_t dims[1] = {r->B};
    int64_t *ids = lc_result_alloc(&o->r[0], LC_I64, 1, dims);
    if (!ids) lc_failed("out of memory");
    o->n = 1;
    return ids;
}

int api_greedy(const lc_call *c, lc_out *o) {
    lc_rows r;
    int64_t *ids = select_begin(c, o, &r, "greedy");
    if (!ids) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++) {
        lc_cands cur;
        cands_from_row(&cur, r.scratch, r.x + b * r.V, (size_t)r.V, 0);
        ids[b] = cur.data[smp_greedy(&cur)].id;
    }
    return finish(&r, 0);
}

int api_dist(const lc_call *c, lc_out *o) {
    lc_rows r;
    int64_t *ids = select_begin(c, o, &r, "dist");
    double *u = ids ? rows_f64(&r, c, "u", 0, 0) : NULL;
    if (!u || check_unit("u", u, r.B)) return finish(&r, -1);
    for (int64_t b = 0; b < r.B; b++) {
        lc_cands cur;
        cands_from_row(&cur, r.scratch, r.x + b * r.V, (size_t)r.V, 0);
        ids[b] = cur.data[smp_dist(&cur, u[b])].id;
    }
    return finish(&r, 0);
}

int api_mirostat_v2(const lc_call *c, lc_out *o) {
    lc_rows r;
    int64_t *ids = select_begin(c, o, &r, "mirostat_v2");
    float *mu = ids ? rows_f32(&r, c, "mu", 0, 0) : NULL;
    double *u = mu ? rows_f64(&r, c, "u", 0, 0) : NULL;
    float *tau = u ? rows_f32(&r, c, "tau", 0, 0) : NULL;
    float *eta = tau ? rows_f32(&r, c, "eta", 0, 0) : NULL;
    if (!eta || check_unit("u", u, r.B)) return finish(&r, -1);
    int64_t dims[1] = {r.B};
    float *new_mu = lc_result_alloc(&o->r[1], LC_F32, 1, dims);
    if (!new_mu) return finish(&r, lc_failed("out of memory"));
    o->n = 2;
    for (int64_t b = 0; b < r.B; b++) {
        lc_cands cur;
        cands_from_row(&cur, r.scratch, r.x + b * r.V, (size_t)r.V, 0);
        float m = mu[b];
        ids[b] = cur.data[smp_mirostat_v2(&cur, u[b], tau[b], eta[b], &m)].id;
        new_mu[b] = m;
    }
    return finish(&r, 0);
}
