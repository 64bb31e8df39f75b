/* ops.rms_norm over the last axis, as ggml's rms_norm followed by the weight multiply:
 * the sum of squares in double (so squares of bf16-sized values cannot overflow), then
 * y = x / sqrt(mean + eps), times weight (or 1 + weight). A row holding NaN or inf is NaN. */
#include <math.h>
#include <stdlib.h>

#include "args.h"
#include "ops.h"

int api_ops_rms_norm(const lc_call *c, lc_out *o) {
    const lc_array *xa, *wa = NULL;
    float *x = ops_float(c, "x", &xa), *w = NULL, *y;
    double eps;
    int64_t unit_offset = 0;
    int rc = -1;
    if (!x) goto done;
    if (xa->ndim == 0 || xa->dims[xa->ndim - 1] == 0) {
        lc_refuse("x must have a non-empty last axis");
        goto done;
    }
    if (scalar_f64(c, "eps", 1, 1e-6, &eps)) goto done;
    if (!isfinite(eps) || eps < 0) {
        lc_refuse("eps must be finite and >= 0, got %g", eps);
        goto done;
    }
    const lc_array *uo = arg_find(c, "unit_offset");
    if (uo) {
        if (uo->count != 1 || uo->dtype == LC_STR) {
            lc_refuse("unit_offset must be a boolean");
            goto done;
        }
        unit_offset = uo->dtype == LC_U8 ? *(const uint8_t *)uo->data != 0 : arg_num(uo, 0) != 0;
    }
    const size_t n = (size_t)xa->dims[xa->ndim - 1];
    if (arg_find(c, "weight")) {
        w = ops_float(c, "weight", &wa);
        if (!w) goto done;
        if (wa->ndim != 1 || (size_t)wa->dims[0] != n) {
            lc_refuse("weight must have shape (%zu,) to match the last axis of x", n);
            goto done;
        }
    }
    if (!(y = ops_result_like(o, xa))) goto done;
    for (size_t r = 0; r < xa->count / n; r++) {
        const float *xr = x + r * n;
        float *yr = y + r * n;
        double sum = 0.0;
        int broken = 0;
        for (size_t i = 0; i < n; i++) {
            if (!isfinite(xr[i])) broken = 1;
            sum += (double)xr[i] * (double)xr[i];
        }
        const double scale = 1.0 / sqrt(sum / (double)n + eps);
        for (size_t i = 0; i < n; i++) {
            float v = broken ? NAN : (float)((double)xr[i] * scale);
            if (w) v *= unit_offset ? w[i] + 1.0f : w[i];
            else if (unit_offset) v *= 2.0f;
            yr[i] = v;
        }
    }
    rc = 0;
done:
    free(x);
    free(w);
    return rc;
}
