/* Arguments of a call: lookup by name, the logits rows, per-row parameters
 * (a scalar or one value per row), with gpu_impl's refusals. */
#ifndef LC_ARGS_H
#define LC_ARGS_H

#include "proto.h"

const lc_array *arg_find(const lc_call *c, const char *name);
/* A required argument, or a refusal naming it. */
const lc_array *arg_need(const lc_call *c, const char *name);

/* Element i of a numeric array as double (f32, f64, i64, i32). */
double arg_num(const lc_array *a, size_t i);
int arg_is_float(const lc_array *a);
int arg_is_int(const lc_array *a);

/* logits: 2-D float [B, V], B, V >= 1, no NaN / +inf. Returns a malloc'd float32 copy. */
/* A float argument (f32, or f64 rounded) as a new float32 array (free it); NULL after an error. */
float *arg_floats(const lc_array *a);
float *arg_logits(const lc_call *c, const char *name, int64_t *B, int64_t *V);

/* Per-row parameters into out[B]. A missing argument takes def when has_def, else refuses. */
int param_f32(const lc_call *c, const char *name, int64_t B, int has_def, float def, float *out);
int param_f64(const lc_call *c, const char *name, int64_t B, int has_def, double def, double *out);
int param_i64(const lc_call *c, const char *name, int64_t B, int has_def, int64_t def, int64_t *out);
/* Checks on per-row values. */
int check_nonneg(const char *name, const int64_t *v, int64_t B);
int check_unit(const char *name, const double *v, int64_t B); /* each in [0, 1] */

/* A scalar argument (ops). */
int scalar_f64(const lc_call *c, const char *name, int has_def, double def, double *out);
int scalar_i64(const lc_call *c, const char *name, int has_def, int64_t def, int64_t *out);

#endif
