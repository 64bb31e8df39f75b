/* The functions the harness serves: one per FUNCTION line of the handshake. */
#ifndef LC_API_H
#define LC_API_H

#include "proto.h"

typedef int (*lc_fn)(const lc_call *call, lc_out *out);

/* samplers (api_samplers.c, api_select.c) */
int api_softmax(const lc_call *c, lc_out *o);
int api_greedy(const lc_call *c, lc_out *o);
int api_dist(const lc_call *c, lc_out *o);
int api_mirostat_v2(const lc_call *c, lc_out *o);
int api_temp(const lc_call *c, lc_out *o);
int api_temp_ext(const lc_call *c, lc_out *o);
int api_top_k(const lc_call *c, lc_out *o);
int api_top_p(const lc_call *c, lc_out *o);
int api_min_p(const lc_call *c, lc_out *o);
int api_typical(const lc_call *c, lc_out *o);
int api_top_n_sigma(const lc_call *c, lc_out *o);
int api_xtc(const lc_call *c, lc_out *o);
int api_penalties(const lc_call *c, lc_out *o);
int api_logit_bias(const lc_call *c, lc_out *o);
/* chain (chain.c) */
int api_llama_cpp_chain(const lc_call *c, lc_out *o);
int api_llama_cpp_chain_dist(const lc_call *c, lc_out *o);
/* ops (ops_softmax.c, ops_norm.c, ops_rope.c) */
int api_ops_softmax(const lc_call *c, lc_out *o);
int api_ops_rms_norm(const lc_call *c, lc_out *o);
int api_ops_rope(const lc_call *c, lc_out *o);

/* Shared by the sampler entry points (api_common.c). */
typedef struct {
    int64_t B, V;
    float *x;       /* validated float32 logits [B, V] */
    float *y;       /* the f32 [B, V] result, when there is one */
    void *scratch;  /* V candidates */
    void *tmp[16];  /* per-call allocations, freed by rows_end */
    int ntmp;
} lc_rows;

int rows_begin(const lc_call *c, lc_out *o, lc_rows *r, int with_result);
void rows_end(lc_rows *r);
/* Per-row parameter arrays that live until rows_end (NULL on failure, with the error set). */
float *rows_f32(lc_rows *r, const lc_call *c, const char *name, int has_def, float def);
double *rows_f64(lc_rows *r, const lc_call *c, const char *name, int has_def, double def);
int64_t *rows_i64(lc_rows *r, const lc_call *c, const char *name, int has_def, int64_t def);
/* Per-row history windows for penalties: the last last_n real tokens of each row. */
typedef struct {
    int64_t *ids;   /* [B, H] copy, -1 = padding */
    int64_t H;
} lc_history;
int history_load(const lc_call *c, const char *name, int64_t B, int64_t V, lc_history *h);
/* The window of row b into win (capacity H); returns its length, oldest first. */
size_t history_window(const lc_history *h, int64_t b, int64_t last_n, int64_t *win);
/* penalties parameters, validated as gpu_impl does */
typedef struct {
    int64_t *last_n;
    float *repeat, *freq, *present;
    lc_history hist;
} lc_penalty_args;
int penalty_args_load(const lc_call *c, int64_t B, int64_t V, lc_penalty_args *a);
int penalty_active(const lc_penalty_args *a, int64_t b);
void penalty_args_free(lc_penalty_args *a);

#endif
