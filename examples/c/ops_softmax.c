/* ops.softmax: z = scale * x + mask along an axis, as ggml's soft_max: max-subtracted expf,
 * a double sum, one scaling by its reciprocal. A lane with NaN, +inf or no finite entry is NaN. */
#include <math.h>
#include <stdlib.h>

#include "args.h"
#include "ops.h"

/* Offset into the mask (broadcast to x's shape) of x's flat index i. */
static size_t mask_offset(const lc_array *x, const lc_array *m, size_t i) {
    size_t off = 0, stride = 1;
    for (int d = x->ndim - 1, e = m->ndim - 1; d >= 0; d--, e--) {
        const size_t idx = i % (size_t)x->dims[d];
        i /= (size_t)x->dims[d];
        if (e < 0) continue;
        if (m->dims[e] != 1) off += idx * stride;
        stride *= (size_t)m->dims[e];
    }
    return off;
}

static int check_mask(const lc_array *x, const lc_array *m, const float *mv) {
    for (size_t i = 0; i < m->count; i++)
        if (isnan(mv[i]) || mv[i] == INFINITY)
            return lc_refuse("mask entries must be finite or -inf (found NaN or +inf)");
    int ok = m->ndim <= x->ndim;
    for (int d = 0; ok && d < m->ndim; d++) {
        const int64_t md = m->dims[m->ndim - 1 - d], xd = x->dims[x->ndim - 1 - d];
        ok = md == 1 || md == xd;
    }
    return ok ? 0 : lc_refuse("mask does not broadcast to x's shape");
}

int api_ops_softmax(const lc_call *c, lc_out *o) {
    const lc_array *xa, *ma = NULL;
    float *x = ops_float(c, "x", &xa), *mv = NULL, *y = NULL;
    double scale;
    int64_t axis;
    int rc = -1;
    if (!x) goto done;
    if (xa->ndim == 0) {
        lc_refuse("x must have at least one axis");
        goto done;
    }
    if (scalar_i64(c, "axis", 1, -1, &axis) || scalar_f64(c, "scale", 1, 1.0, &scale)) goto done;
    if (axis < -xa->ndim || axis >= xa->ndim) {
        lc_refuse("axis %lld is out of range for x with %d axes", (long long)axis, xa->ndim);
        goto done;
    }
    if (axis < 0) axis += xa->ndim;
    if (xa->dims[axis] == 0) {
        lc_refuse("softmax over an empty axis");
        goto done;
    }
    if (!isfinite(scale) || !(scale > 0)) {
        lc_refuse("scale must be finite and > 0, got %g", scale);
        goto done;
    }
    if (arg_find(c, "mask")) {
        mv = ops_float(c, "mask", &ma);
        if (!mv || check_mask(xa, ma, mv)) goto done;
    }
    if (!(y = ops_result_like(o, xa))) goto done;
    size_t n = (size_t)xa->dims[axis], inner = 1, outer = 1;
    for (int d = 0; d < xa->ndim; d++) {
        if (d < axis) outer *= (size_t)xa->dims[d];
        if (d > axis) inner *= (size_t)xa->dims[d];
    }
    const float s = (float)scale;
    for (size_t i = 0; i < xa->count; i++) { /* z, in place */
        if (s != 1.0f) x[i] *= s;
        if (mv) x[i] += mv[mask_offset(xa, ma, i)];
    }
    for (size_t a = 0; a < outer; a++) {
        for (size_t b = 0; b < inner; b++) {
            const size_t base = a * n * inner + b;
            float max = -INFINITY;
            int broken = 0;
            for (size_t j = 0; j < n; j++) {
                const float z = x[base + j * inner];
                if (isnan(z) || z == INFINITY) broken = 1;
                else if (z > max) max = z;
            }
            if (broken || max == -INFINITY) {
                for (size_t j = 0; j < n; j++) y[base + j * inner] = NAN;
                continue;
            }
            double sum = 0.0;
            for (size_t j = 0; j < n; j++) {
                const float e = expf(x[base + j * inner] - max);
                y[base + j * inner] = e;
                sum += e;
            }
            const float inv = (float)(1.0 / sum);
            for (size_t j = 0; j < n; j++) y[base + j * inner] *= inv;
        }
    }
    rc = 0;
done:
    free(x);
    free(mv);
    return rc;
}
