/* Helpers shared by the ops (ops_*.c). */
#ifndef LC_OPS_H
#define LC_OPS_H

#include "proto.h"

/* A float argument as a malloc'd float32 copy (NULL with a refusal if not floating point). */
float *ops_float(const lc_call *c, const char *name, const lc_array **a);
/* A result shaped like a. */
float *ops_result_like(lc_out *o, const lc_array *a);

#endif
