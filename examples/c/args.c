#include "args.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const lc_array *arg_find(const lc_call *c, const char *name) {
    for (int i = 0; i < c->nargs; i++)
        if (strcmp(c->args[i].name, name) == 0) return &c->args[i];
    return NULL;
}

const lc_array *arg_need(const lc_call *c, const char *name) {
    const lc_array *a = arg_find(c, name);
    if (!a) lc_refuse("%s: missing argument %s", c->function, name);
    return a;
}

double arg_num(const lc_array *a, size_t i) {
    switch (a->dtype) {
    case LC_F32: return ((const float *)a->data)[i];
    case LC_F64: return ((const double *)a->data)[i];
    case LC_I64: return (double)((const int64_t *)a->data)[i];
    case LC_I32: return ((const int32_t *)a->data)[i];
    default: return NAN;
    }
}

int arg_is_float(const lc_array *a) { return a->dtype == LC_F32 || a->dtype == LC_F64; }
int arg_is_int(const lc_array *a) { return a->dtype == LC_I64 || a->dtype == LC_I32; }

float *arg_floats(const lc_array *a) {
    float *x = malloc(a->count * sizeof(float) + 8); /* + 8: a zero-size array still gets a pointer */
    if (!x) {
        lc_failed("out of memory");
        return NULL;
    }
    if (a->dtype == LC_F32) memcpy(x, a->data, a->count * sizeof(float));
    else
        for (size_t i = 0; i < a->count; i++) x[i] = (float)((const double *)a->data)[i];
    return x;
}

float *arg_logits(const lc_call *c, const char *name, int64_t *B, int64_t *V) {
    const lc_array *a = arg_need(c, name);
    if (!a) return NULL;
    if (!arg_is_float(a)) {
        lc_refuse("%s must be floating point, got %s", name, lc_dtype_name(a->dtype));
        return NULL;
    }
    if (a->ndim != 2) {
        lc_refuse("%s must be 2-D [batch, vocab], got %d dimensions", name, a->ndim);
        return NULL;
    }
    if (a->dims[0] < 1 || a->dims[1] < 1) {
        lc_refuse("%s must have batch >= 1 and vocab >= 1, got [%lld, %lld]", name,
                  (long long)a->dims[0], (long long)a->dims[1]);
        return NULL;
    }
    *B = a->dims[0];
    *V = a->dims[1];
    float *x = arg_floats(a);
    if (!x) return NULL;
    for (int64_t b = 0; b < *B; b++) {
        const float *row = x + b * *V;
        for (int64_t j = 0; j < *V; j++) {
            if (!(row[j] < INFINITY)) { /* NaN or +inf */
                lc_refuse("%s row %lld contains NaN or +inf at token %lld", name, (long long)b,
                          (long long)j);
                free(x);
                return NULL;
            }
        }
    }
    return x;
}

/* The parameter array: a scalar or [B], numeric. */
static int per_row(const lc_call *c, const char *name, int64_t B, const lc_array **out) {
    const lc_array *a = arg_find(c, name);
    *out = a;
    if (!a) return 0;
    if (!arg_is_float(a) && !arg_is_int(a))
        return lc_refuse("parameter %s must be numeric, got %s", name, lc_dtype_name(a->dtype));
    if (!(a->ndim == 0 || (a->ndim == 1 && a->dims[0] == B)))
        return lc_refuse("parameter %s has %d dimensions / %lld values but batch is %lld", name, a->ndim,
                         a->ndim ? (long long)a->dims[0] : 1LL, (long long)B);
    return 0;
}

/* The parameter's array (per-row or scalar), or NULL where it is absent and has a default;
 * -1 on a refusal (wrong shape, missing without a default). */
static int param_array(const lc_call *c, const char *name, int64_t B, int has_def, const lc_array **a) {
    if (per_row(c, name, B, a) != 0) return -1;
    if (!*a && !has_def) return lc_refuse("missing parameter %s", name);
    return 0;
}

int param_f64(const lc_call *c, const char *name, int64_t B, int has_def, double def, double *out) {
    const lc_array *a;
    if (param_array(c, name, B, has_def, &a) != 0) return -1;
    if (!a) {
        for (int64_t b = 0; b < B; b++) out[b] = def;
        return 0;
    }
    for (int64_t b = 0; b < B; b++) {
        out[b] = arg_num(a, a->ndim ? (size_t)b : 0);
        if (!isfinite(out[b])) return lc_refuse("parameter %s must be finite, got %g", name, out[b]);
    }
    return 0;
}

int param_f32(const lc_call *c, const char *name, int64_t B, int has_def, float def, float *out) {
    double *d = malloc((size_t)B * sizeof(double));
    if (!d) return lc_failed("out of memory");
    int rc = param_f64(c, name, B, has_def, def, d);
    for (int64_t b = 0; rc == 0 && b < B; b++) {
        out[b] = (float)d[b]; /* llama.cpp takes float parameters */
        if (!isfinite(out[b])) rc = lc_refuse("parameter %s must be finite in float32, got %g", name, d[b]);
    }
    free(d);
    return rc;
}

int param_i64(const lc_call *c, const char *name, int64_t B, int has_def, int64_t def, int64_t *out) {
    const lc_array *a;
    if (param_array(c, name, B, has_def, &a) != 0) return -1;
    if (!a) {
        for (int64_t b = 0; b < B; b++) out[b] = def;
        return 0;
    }
    for (int64_t b = 0; b < B; b++) {
        size_t i = a->ndim ? (size_t)b : 0;
        if (a->dtype == LC_I64) out[b] = ((const int64_t *)a->data)[i];
        else if (a->dtype == LC_I32) out[b] = ((const int32_t *)a->data)[i];
        else {
            double v = arg_num(a, i);
            if (!isfinite(v) || v != floor(v) || fabs(v) > 9e18)
                return lc_refuse("parameter %s must be a finite integer, got %g", name, v);
            out[b] = (int64_t)v;
        }
    }
    return 0;
}

int check_nonneg(const char *name, const int64_t *v, int64_t B) {
    for (int64_t b = 0; b < B; b++)
        if (v[b] < 0) return lc_refuse("parameter %s must be >= 0, got %lld", name, (long long)v[b]);
    return 0;
}

int check_unit(const char *name, const double *v, int64_t B) {
    for (int64_t b = 0; b < B; b++)
        if (!(v[b] >= 0 && v[b] <= 1)) return lc_refuse("parameter %s must lie in [0, 1], got %g", name, v[b]);
    return 0;
}

int scalar_f64(const lc_call *c, const char *name, int has_def, double def, double *out) {
    const lc_array *a = arg_find(c, name);
    if (!a) {
        if (!has_def) return lc_refuse("missing argument %s", name);
        *out = def;
        return 0;
    }
    if ((!arg_is_float(a) && !arg_is_int(a)) || a->count != 1)
        return lc_refuse("argument %s must be a number", name);
    *out = arg_num(a, 0);
    return 0;
}

int scalar_i64(const lc_call *c, const char *name, int has_def, int64_t def, int64_t *out) {
    double v;
    const lc_array *a = arg_find(c, name);
    if (a && arg_is_int(a) && a->count == 1) {
        *out = a->dtype == LC_I64 ? *(const int64_t *)a->data : *(const int32_t *)a->data;
        return 0;
    }
    if (scalar_f64(c, name, has_def, (double)def, &v) != 0) return -1;
    if (!isfinite(v) || v != floor(v)) return lc_refuse("argument %s must be an integer, got %g", name, v);
    *out = (int64_t)v;
    return 0;
}
