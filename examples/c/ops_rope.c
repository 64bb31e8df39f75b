/* ops.rope as ggml's rope_ext: x [tokens, heads, head_dim], one integer position per token.
 * The first n_dims entries of each head rotate in pairs (normal: 2i, 2i+1; neox: i, i + n_dims/2)
 * by theta_i = p * freq_base^(-2i/n_dims) / freq_factors[i], the table built by repeated
 * multiplication in float as ggml does; YaRN (ext_factor != 0) mixes interpolated and
 * extrapolated angles over the correction range. The rest of each head passes through. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "ops.h"

static double corr_dim(int n_dims, int64_t n_ctx_orig, double beta, double base) {
    return n_dims * log((double)n_ctx_orig / (beta * 2 * 3.14159265358979323846)) / (2 * log(base));
}

typedef struct {
    int64_t n_dims, n_ctx_orig;
    int neox;
    double base, fscale, ext, attn, beta_fast, beta_slow;
    float *factors;
} rope_args;

static int rope_load(const lc_call *c, const lc_array *xa, rope_args *a, const lc_array **pos) {
    const lc_array *mode = arg_find(c, "mode"), *ff;
    memset(a, 0, sizeof *a);
    if (xa->ndim != 3) return lc_refuse("x must be 3-D [tokens, heads, head_dim]");
    const int64_t head_dim = xa->dims[2];
    if (scalar_i64(c, "n_dims", 1, head_dim, &a->n_dims)) return -1;
    if (a->n_dims % 2 || a->n_dims < 2 || a->n_dims > head_dim)
        return lc_refuse("n_dims must be even and in [2, head_dim=%lld], got %lld", (long long)head_dim,
                         (long long)a->n_dims);
    *pos = arg_need(c, "positions");
    if (!*pos) return -1;
    if (!arg_is_int(*pos)) return lc_refuse("positions must be an integer array");
    if ((*pos)->ndim != 1 || (*pos)->dims[0] != xa->dims[0])
        return lc_refuse("positions must hold one entry per token (%lld)", (long long)xa->dims[0]);
    if (mode && (mode->dtype != LC_STR || (strcmp(mode->data, "normal") && strcmp(mode->data, "neox"))))
        return lc_refuse("mode must be 'normal' or 'neox'");
    a->neox = mode && strcmp(mode->data, "neox") == 0;
    if (scalar_f64(c, "freq_base", 1, 10000.0, &a->base) || scalar_f64(c, "freq_scale", 1, 1.0, &a->fscale) ||
        scalar_f64(c, "ext_factor", 1, 0.0, &a->ext) || scalar_f64(c, "attn_factor", 1, 1.0, &a->attn) ||
        scalar_f64(c, "beta_fast", 1, 32.0, &a->beta_fast) || scalar_f64(c, "beta_slow", 1, 1.0, &a->beta_slow) ||
        scalar_i64(c, "n_ctx_orig", 1, 0, &a->n_ctx_orig))
        return -1;
    if (!isfinite(a->base) || !(a->base > 1)) return lc_refuse("freq_base must be finite and > 1");
    if (!isfinite(a->fscale) || !(a->fscale > 0)) return lc_refuse("freq_scale must be finite and > 0");
    if (!isfinite(a->ext)) return lc_refuse("ext_factor must be finite");
    if (!isfinite(a->attn)) return lc_refuse("attn_factor must be finite");
    if (a->ext != 0 && !(a->n_ctx_orig > 0 && a->beta_fast > 0 && a->beta_slow > 0 && isfinite(a->beta_fast) &&
                         isfinite(a->beta_slow)))
        return lc_refuse("YaRN (ext_factor != 0) needs n_ctx_orig > 0 and beta_fast, beta_slow > 0");
    if (arg_find(c, "freq_factors")) {
        a->factors = ops_float(c, "freq_factors", &ff);
        if (!a->factors) return -1;
        if (ff->ndim != 1 || ff->dims[0] < a->n_dims / 2)
            return lc_refuse("freq_factors must hold >= %lld values", (long long)(a->n_dims / 2));
        for (int64_t i = 0; i < a->n_dims / 2; i++)
            if (!isfinite(a->factors[i]) || !(a->factors[i] > 0))
                return lc_refuse("freq_factors must be finite and > 0");
    }
    return 0;
}

int api_ops_rope(const lc_call *c, lc_out *o) {
    const lc_array *xa, *pa = NULL;
    rope_args a;
    float *x = ops_float(c, "x", &xa), *y, *cs = NULL;
    int rc = -1;
    memset(&a, 0, sizeof a);
    if (!x || rope_load(c, xa, &a, &pa) || !(y = ops_result_like(o, xa))) goto done;
    const int64_t T = xa->dims[0], H = xa->dims[1], D = xa->dims[2], half = a.n_dims / 2;
    float lo = 0.0f, hi = 0.0f;
    if (a.ext != 0.0) {
        lo = (float)fmax(0.0, floor(corr_dim((int)a.n_dims, a.n_ctx_orig, a.beta_fast, a.base)));
        hi = (float)fmin((double)(a.n_dims - 1), ceil(corr_dim((int)a.n_dims, a.n_ctx_orig, a.beta_slow, a.base)));
    }
    const float theta_scale = powf((float)a.base, -2.0f / (float)a.n_dims);
    const float fscale = (float)a.fscale, ext = (float)a.ext;
    float mscale = (float)a.attn;
    if (ext != 0.0f) mscale *= 1.0f + 0.1f * logf(1.0f / fscale);
    if (!(cs = malloc((size_t)(2 * half) * sizeof(float)))) {
        lc_failed("out of memory");
        goto done;
    }
    memcpy(y, x, xa->count * sizeof(float));
    for (int64_t t = 0; t < T; t++) {
#ifdef BUG_ROPE_RESTART
        const float p = (float)t; /* founding bug: the row index, not the position */
#else
        const float p = (float)(pa->dtype == LC_I64 ? ((const int64_t *)pa->data)[t] : ((const int32_t *)pa->data)[t]);
#endif
        float theta_base = p;
        for (int64_t i = 0; i < half; i++) {
            const float extrap = theta_base / (a.factors ? a.factors[i] : 1.0f);
            float theta = fscale * extrap;
            if (ext != 0.0f) {
                const float ramp = 1.0f - fminf(1.0f, fmaxf(0.0f, ((float)i - lo) / fmaxf(0.001f, hi - lo)));
                const float mix = ramp * ext;
                theta = theta * (1.0f - mix) + extrap * mix;
            }
            cs[2 * i] = cosf(theta) * mscale;
            cs[2 * i + 1] = sinf(theta) * mscale;
            theta_base *= theta_scale;
        }
        for (int64_t h = 0; h < H; h++) {
            const float *src = x + (t * H + h) * D;
            float *dst = y + (t * H + h) * D;
            for (int64_t i = 0; i < half; i++) {
                const int64_t i0 = a.neox ? i : 2 * i, i1 = a.neox ? i + half : 2 * i + 1;
                const float x0 = src[i0], x1 = src[i1], co = cs[2 * i], si = cs[2 * i + 1];
                dst[i0] = x0 * co - x1 * si;
                dst[i1] = x0 * si + x1 * co;
            }
        }
    }
    rc = 0;
done:
    free(x);
    free(cs);
    free(a.factors);
    return rc;
}
