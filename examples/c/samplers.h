/* The samplers, on candidate arrays, as llama.cpp's CPU samplers run them. */
#ifndef LC_SAMPLERS_H
#define LC_SAMPLERS_H

#include "cand.h"

void smp_top_k(lc_cands *c, int64_t k);
/* fresh_softmax = 0 trusts the p already in the array (never right after a logit change). */
void smp_top_p(lc_cands *c, float p, size_t min_keep, int fresh_softmax);
void smp_min_p(lc_cands *c, float p, size_t min_keep);
void smp_typical(lc_cands *c, float p, size_t min_keep);
void smp_temp(lc_cands *c, float t);
void smp_temp_ext(lc_cands *c, float t, float delta, float exponent);
void smp_top_n_sigma(lc_cands *c, float n);
/* The cut of xtc, once the draw said "cut" (c holds finite candidates only). */
void smp_xtc_cut(lc_cands *c, float threshold, size_t min_keep);

/* Repetition penalties: window[] holds the last tokens (no padding), n_window of them. */
void smp_penalties(lc_cands *c, const int64_t *window, size_t n_window, float repeat, float freq,
                   float present);

/* Selectors return an index into c->data. */
size_t smp_greedy(const lc_cands *c);
size_t smp_dist(lc_cands *c, double u);
size_t smp_mirostat_v2(lc_cands *c, double u, float tau, float eta, float *mu);

#endif
