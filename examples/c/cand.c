#include "cand.h"
#include "sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void cands_from_row(lc_cands *c, lc_token *buf, const float *row, size_t V, int finite_only) {
    size_t n = 0;
    for (size_t i = 0; i < V; i++) {
        if (finite_only && !isfinite(row[i])) continue;
        buf[n].id = (int32_t)i;
        buf[n].logit = row[i];
        buf[n].p = 0.0f;
        n++;
    }
    c->data = buf;
    c->size = n;
    c->sorted = 0;
}

void cands_to_row(const lc_cands *c, float *out, size_t V) {
    for (size_t i = 0; i < V; i++) out[i] = -INFINITY;
    for (size_t i = 0; i < c->size; i++) out[c->data[i].id] = c->data[i].logit;
}

int cands_before(const lc_token *a, const lc_token *b) {
    if (a->logit != b->logit) return a->logit > b->logit;
    return a->id < b->id;
}

static int cmp_tokens(const void *pa, const void *pb) {
    const lc_token *a = pa, *b = pb;
    if (a->logit > b->logit) return -1;
    if (a->logit < b->logit) return 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* Radix: by id first (skipped when the ids already ascend), then stably by logit. */
static int radix_sort_tokens(lc_token *d, size_t n) {
    uint32_t *key = malloc(n * sizeof *key), *idx = malloc(n * sizeof *idx);
    lc_token *copy = malloc(n * sizeof *copy);
    int ok = key && idx && copy, ascending = 1;
    for (size_t i = 0; ok && i < n; i++) {
        idx[i] = (uint32_t)i;
        key[i] = (uint32_t)d[i].id;
        if (i && d[i].id < d[i - 1].id) ascending = 0;
    }
    if (ok && !ascending) ok = radix_argsort(idx, key, n) == 0;
    for (size_t i = 0; ok && i < n; i++) key[i] = key_descending(d[i].logit);
    if (ok) ok = radix_argsort(idx, key, n) == 0;
    if (ok) {
        memcpy(copy, d, n * sizeof *d);
        for (size_t i = 0; i < n; i++) d[i] = copy[idx[i]];
    }
    free(key);
    free(idx);
    free(copy);
    return ok ? 0 : -1;
}

void cands_sort(lc_cands *c) {
    if (!c->sorted && (c->size < 256 || radix_sort_tokens(c->data, c->size) != 0))
        qsort(c->data, c->size, sizeof(lc_token), cmp_tokens);
    c->sorted = 1;
}

static void swap_tokens(lc_token *a, lc_token *b) {
    lc_token t = *a;
    *a = *b;
    *b = t;
}

/* Quickselect: afterwards d[0..n) holds the first n tokens of the order (unordered). The order
 * is total (ids are unique), so the set is exactly a full sort's prefix. */
static void select_first(lc_token *d, size_t size, size_t n) {
    size_t lo = 0, hi = size; /* the n-th boundary lies in [lo, hi) */
    while (hi - lo > 16) {
        size_t mid = lo + (hi - lo) / 2;
        /* median of three into d[lo] as the pivot */
        if (cands_before(&d[mid], &d[lo])) swap_tokens(&d[mid], &d[lo]);
        if (cands_before(&d[hi - 1], &d[lo])) swap_tokens(&d[hi - 1], &d[lo]);
        if (cands_before(&d[hi - 1], &d[mid])) swap_tokens(&d[hi - 1], &d[mid]);
        swap_tokens(&d[lo], &d[mid]);
        lc_token pivot = d[lo];
        size_t store = lo + 1;
        for (size_t i = lo + 1; i < hi; i++)
            if (cands_before(&d[i], &pivot)) swap_tokens(&d[i], &d[store++]);
        swap_tokens(&d[lo], &d[store - 1]); /* pivot at its final place store - 1 */
        size_t at = store - 1;
        if (at == n || at + 1 == n) return;
        if (at > n) hi = at;
        else lo = at + 1;
    }
    qsort(d + lo, hi - lo, sizeof(lc_token), cmp_tokens);
}

void cands_partial_sort(lc_cands *c, size_t n) {
    if (c->sorted) return;
    if (n >= c->size || n * 4 >= c->size) {
        cands_sort(c);
        return;
    }
    select_first(c->data, c->size, n);
    qsort(c->data, n, sizeof(lc_token), cmp_tokens);
}

void cands_keep_top(lc_cands *c, size_t k) {
    if (k >= c->size) return;
    if (c->sorted) { /* already in order: the prefix is the set */
        c->size = k;
        return;
    }
    /* quickselect: the k first tokens of the order, as a set; the dense row they go back to has
     * no order, and a later sampler that needs one sorts what is left (fewer tokens) */
    select_first(c->data, c->size, k);
    c->size = k;
}

float cands_max_logit(const lc_cands *c) {
    if (c->sorted && c->size) return c->data[0].logit;
    float m = -INFINITY;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].logit > m) m = c->data[i].logit;
    return m;
}

size_t cands_count_finite(const lc_cands *c) {
    size_t n = 0;
    for (size_t i = 0; i < c->size; i++) n += isfinite(c->data[i].logit) != 0;
    return n;
}

void cands_softmax(lc_cands *c, int do_sort) {
    if (do_sort) cands_sort(c);
    const float max_l = cands_max_logit(c);
    size_t nsum = c->size;
#ifdef BUG_SOFTMAX_TOP1000
    if (c->sorted && nsum > 1000) nsum = 1000; /* founding bug: normalise over the top 1,000 only */
#endif
    float sum = 0.0f;
    for (size_t i = 0; i < c->size; i++) {
        float e = expf(c->data[i].logit - max_l);
        c->data[i].p = e;
        if (i < nsum) sum += e;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].p /= sum;
}
