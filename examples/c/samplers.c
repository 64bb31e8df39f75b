#include "samplers.h"
#include "sort.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void smp_top_k(lc_cands *c, int64_t k) {
    if (k <= 0) return;
    cands_keep_top(c, (size_t)k);
}

void smp_top_p(lc_cands *c, float p, size_t min_keep, int fresh_softmax) {
    if (p >= 1.0f || c->size == 0 || cands_count_finite(c) == 0) return;
    if (fresh_softmax) cands_softmax(c, 0);
    /* sort a window first, the whole array only when the window does not reach p */
    size_t window = c->size;
    if (!c->sorted && c->size > 1024) {
        window = 256 > min_keep ? 256 : min_keep;
        if (window > c->size) window = c->size;
    }
    cands_partial_sort(c, window);
    if (c->sorted) window = c->size;
    float cum = 0.0f;
    for (size_t i = 0; i < c->size; i++) {
        if (i == window) { /* the window is used up: sort everything, go on */
            c->sorted = 0;
            cands_sort(c);
            window = c->size;
        }
#ifdef BUG_TOP_P_ON_LOGITS
        cum += c->data[i].logit; /* founding bug: accumulates logits, not probabilities */
#else
        cum += c->data[i].p;
#endif
        if (cum >= p && i + 1 >= min_keep) {
            c->size = i + 1;
            c->sorted = 1;
            return;
        }
    }
    cands_sort(c); /* never reached (rounding): keep all */
}

void smp_min_p(lc_cands *c, float p, size_t min_keep) {
    if (p <= 0.0f || c->size == 0) return;
    if (!c->sorted) {
        float max_l = -3.40282347e+38f; /* -FLT_MAX, as llama.cpp starts its scan */
        for (size_t i = 0; i < c->size; i++)
            if (c->data[i].logit > max_l) max_l = c->data[i].logit;
        const float thr = max_l + logf(p);
        size_t n = 0;
        for (size_t i = 0; i < c->size; i++) n += c->data[i].logit >= thr;
        if (n > 0 && n >= min_keep) {
            size_t j = 0; /* compact in place, the order is kept */
            for (size_t i = 0; i < c->size; i++)
                if (c->data[i].logit >= thr) c->data[j++] = c->data[i];
            c->size = j;
            return;
        }
    }
    cands_sort(c);
    const float thr = c->data[0].logit + logf(p);
    size_t i = 1;
    for (; i < c->size; i++)
        if (c->data[i].logit < thr && i >= min_keep) break;
    c->size = i;
}

/* typical: ascending score, then descending logit, then lower id */
typedef struct {
    float score;
    lc_token tok;
} scored;

static int cmp_scored(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    if (a->score < b->score) return -1;
    if (a->score > b->score) return 1;
    return cands_before(&a->tok, &b->tok) ? -1 : 1;
}

/* The array is in (descending logit, lower id) order already, so a stable sort by score alone
 * settles the ties as cmp_scored does. */
static void sort_scored(scored *s, size_t n) {
    uint32_t *key = malloc(n * sizeof *key), *idx = malloc(n * sizeof *idx);
    scored *copy = malloc(n * sizeof *copy);
    int ok = n >= 256 && key && idx && copy;
    for (size_t i = 0; ok && i < n; i++) {
        idx[i] = (uint32_t)i;
        key[i] = key_ascending_nonneg(s[i].score);
    }
    if (ok && radix_argsort(idx, key, n) == 0) {
        memcpy(copy, s, n * sizeof *s);
        for (size_t i = 0; i < n; i++) s[i] = copy[idx[i]];
    } else {
        qsort(s, n, sizeof *s, cmp_scored);
    }
    free(key);
    free(idx);
    free(copy);
}

void smp_typical(lc_cands *c, float p, size_t min_keep) {
    if (p >= 1.0f || c->size == 0 || cands_count_finite(c) == 0) return;
    cands_softmax(c, 1);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].p > 0.0f) entropy += -c->data[i].p * logf(c->data[i].p);
    scored *s = malloc(c->size * sizeof *s);
    if (!s) return;
    for (size_t i = 0; i < c->size; i++) {
        const float pi = c->data[i].p;
        s[i].score = pi > 0.0f ? fabsf(-logf(pi) - entropy) : INFINITY;
        s[i].tok = c->data[i];
    }
    sort_scored(s, c->size);
    float cum = 0.0f;
    size_t last = c->size;
    for (size_t i = 0; i < c->size; i++) {
        cum += s[i].tok.p;
        if (cum > p && (min_keep == 0 || i + 1 >= min_keep)) {
            last = i + 1;
            break;
        }
    }
    for (size_t i = 0; i < last; i++) c->data[i] = s[i].tok;
    c->size = last;
    c->sorted = 0;
    free(s);
}

void smp_temp(lc_cands *c, float t) {
    if (c->size == 0) return;
    if (t <= 0.0f) { /* keep the first maximal logit only */
        size_t best = 0;
        for (size_t i = 1; i < c->size; i++) {
            if (c->data[i].logit > c->data[best].logit) {
                c->data[best].logit = -INFINITY;
                best = i;
            } else {
                c->data[i].logit = -INFINITY;
            }
        }
        return;
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].logit /= t;
}

void smp_temp_ext(lc_cands *c, float t, float delta, float exponent) {
    if (delta <= 0.0f) {
        smp_temp(c, t);
        return;
    }
    if (c->size <= 1) return;
    const float min_t = t - delta > 0.0f ? t - delta : 0.0f;
    const float max_t = t + delta;
    const float max_entropy = -logf(1.0f / (float)c->size);
    cands_softmax(c, 1);
    float entropy = 0.0f;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].p > 0.0f) entropy -= c->data[i].p * logf(c->data[i].p);
    const float norm = entropy / max_entropy;
    const float dyn_t = min_t + (max_t - min_t) * powf(norm, exponent);
    smp_temp(c, dyn_t);
}

void smp_top_n_sigma(lc_cands *c, float n) {
    if (n <= 0.0f || c->size <= 1) return;
    float max_l = -INFINITY;
    double sum = 0.0;
    size_t count = 0;
    for (size_t i = 0; i < c->size; i++) {
        const float l = c->data[i].logit;
        if (!isfinite(l)) continue;
        if (l > max_l) max_l = l;
        sum += l;
        count++;
    }
    if (count == 0) return;
    const double mean = sum / (double)count;
    double acc = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        const float l = c->data[i].logit;
        if (isfinite(l)) acc += ((double)l - mean) * ((double)l - mean);
    }
    const float sigma = (float)sqrt(acc / (double)count);
    const float thr = max_l - n * sigma;
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].logit < thr) c->data[i].logit = -INFINITY;
}

void smp_xtc_cut(lc_cands *c, float threshold, size_t min_keep) {
    if (c->size < 2) return;
    cands_softmax(c, 1);
    size_t pos_last = 0;
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].p >= threshold) pos_last = i;
        else break;
    }
    if (c->size - pos_last >= min_keep && pos_last > 0) {
        c->data += pos_last;
        c->size -= pos_last;
    }
}

static int cmp_i64(const void *pa, const void *pb) {
    const int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    return (a > b) - (a < b);
}

static lc_token *find_token(lc_cands *c, int64_t id) {
    if (id < (int64_t)c->size && c->data[id].id == id) return &c->data[id]; /* vocab order */
    for (size_t i = 0; i < c->size; i++)
        if (c->data[i].id == id) return &c->data[i];
    return NULL;
}

void smp_penalties(lc_cands *c, const int64_t *window, size_t n_window, float repeat, float freq,
                   float present) {
    if (n_window == 0) return;
    int64_t *ids = malloc(n_window * sizeof *ids);
    if (!ids) return;
    for (size_t i = 0; i < n_window; i++) ids[i] = window[i];
    qsort(ids, n_window, sizeof *ids, cmp_i64);
    for (size_t i = 0; i < n_window;) {
        size_t j = i;
        while (j < n_window && ids[j] == ids[i]) j++;
        const int count = (int)(j - i);
        lc_token *tok = find_token(c, ids[i]);
        if (tok) {
            if (tok->logit <= 0.0f) tok->logit *= repeat;
            else tok->logit /= repeat;
            tok->logit -= (float)count * freq + (float)(count > 0) * present;
        }
        i = j;
    }
    c->sorted = 0;
    free(ids);
}

size_t smp_greedy(const lc_cands *c) {
    size_t best = 0;
    for (size_t i = 1; i < c->size; i++)
        if (c->data[i].logit > c->data[best].logit) best = i;
    return best;
}

size_t smp_dist(lc_cands *c, double u) {
    const float max_l = cands_max_logit(c);
    double sum = 0.0;
    for (size_t i = 0; i < c->size; i++) {
        c->data[i].p = expf(c->data[i].logit - max_l);
        sum += c->data[i].p;
    }
    const double target = sum * u;
    double run = 0.0;
    size_t picked = c->size, last_weighted = 0;
    for (size_t i = 0; i < c->size; i++) {
        run += c->data[i].p;
        if (c->data[i].p > 0.0f) {
            last_weighted = i;
            if (picked == c->size && run >= target) picked = i;
        }
    }
    for (size_t i = 0; i < c->size; i++) c->data[i].p = (float)(c->data[i].p / sum);
    return picked == c->size ? last_weighted : picked;
}

size_t smp_mirostat_v2(lc_cands *c, double u, float tau, float eta, float *mu) {
    cands_softmax(c, 1);
    size_t keep = 0;
    while (keep < c->size && !(-log2f(c->data[keep].p) > *mu)) keep++;
    c->size = keep > 0 ? keep : 1;
    cands_softmax(c, 1);
    /* std::discrete_distribution: double cumulative probabilities, the last forced to 1 */
    double total = 0.0;
    for (size_t i = 0; i < c->size; i++) total += c->data[i].p;
    double cum = 0.0;
    size_t idx = c->size - 1;
    for (size_t i = 0; i + 1 < c->size; i++) {
        cum += c->data[i].p / total;
        if (cum >= u) {
            idx = i;
            break;
        }
    }
    *mu -= eta * (-log2f(c->data[idx].p) - tau);
    return idx;
}
