/* llama.cpp-style candidate arrays: {id, logit, p}, a size and a "sorted" flag.
 * "Sorted" means descending logit, ties broken by the lower id first. */
#ifndef LC_CAND_H
#define LC_CAND_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int32_t id;
    float logit;
    float p;
} lc_token;

typedef struct {
    lc_token *data;
    size_t size;
    int sorted;
} lc_cands;

/* All V tokens in vocab order (p = 0); finite_only keeps only finite logits. */
void cands_from_row(lc_cands *c, lc_token *buf, const float *row, size_t V, int finite_only);
/* Dense row: -inf everywhere, then each candidate's logit at its id (bit-identical). */
void cands_to_row(const lc_cands *c, float *out, size_t V);

int cands_before(const lc_token *a, const lc_token *b); /* a comes first in the order */
void cands_sort(lc_cands *c);
/* Puts the first n (in order) at the front, sorted; the rest stay behind, unordered. */
void cands_partial_sort(lc_cands *c, size_t n);
/* top_k's truncation: keep the first min(k, size), sorted. */
void cands_keep_top(lc_cands *c, size_t k);

float cands_max_logit(const lc_cands *c);
size_t cands_count_finite(const lc_cands *c);
/* llama.cpp's softmax_impl: p = expf(l - max) / (float sum); logits untouched. */
void cands_softmax(lc_cands *c, int do_sort);

#endif
