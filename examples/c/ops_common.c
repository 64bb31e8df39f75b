#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "ops.h"

float *ops_float(const lc_call *c, const char *name, const lc_array **out) {
    const lc_array *a = arg_need(c, name);
    *out = a;
    if (!a) return NULL;
    if (!arg_is_float(a)) {
        lc_refuse("%s must be float16, bfloat16 or float32, got %s", name, lc_dtype_name(a->dtype));
        return NULL;
    }
    return arg_floats(a);
}

float *ops_result_like(lc_out *o, const lc_array *a) {
    float *y = lc_result_alloc(&o->r[0], LC_F32, a->ndim, a->dims);
    if (!y) lc_failed("out of memory");
    else o->n = 1;
    return y;
}
