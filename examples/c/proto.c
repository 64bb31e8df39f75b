/* Framing: header lines, ARG arrays in, OK/RESULT or ERROR out. */
#include "proto.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static char err_kind[16];
static char err_msg[512];
static int version = 1;
/* The id of the call being answered: the answer functions echo it (version 2), so a late or
 * repeated answer can never be taken for another call's. */
static char call_id[24];

int lc_greeting(const char *line) {
    char *end;
    if (strncmp(line, "LOGITCHECK ", 11) != 0) return -1;
    long n = strtol(line + 11, &end, 10);
    if (*end != 0 || n < 1) return -1;
    version = n < LC_VERSION ? (int)n : LC_VERSION;
    return version;
}

int lc_version(void) { return version; }

int lc_error(const char *kind, const char *fmt, ...) {
    va_list ap;
    if (err_kind[0]) return -1; /* keep the first (innermost) reason */
    snprintf(err_kind, sizeof err_kind, "%s", kind);
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof err_msg, fmt, ap);
    va_end(ap);
    for (char *c = err_msg; *c; c++) /* one printable line */
        if (*c < 32 || *c > 126) *c = ' ';
    return -1;
}

const char *lc_error_kind(void) { return err_kind[0] ? err_kind : "failed"; }
const char *lc_error_message(void) { return err_msg[0] ? err_msg : "unknown error"; }
void lc_error_clear(void) { err_kind[0] = 0; err_msg[0] = 0; }

static const char *const DT_NAMES[] = {"f32", "f64", "i64", "i32", "u8", "str"};
static const size_t DT_SIZES[] = {4, 8, 8, 4, 1, 1};

size_t lc_dtype_size(int dtype) { return DT_SIZES[dtype]; }
const char *lc_dtype_name(int dtype) { return DT_NAMES[dtype]; }

static int dtype_from_name(const char *s) {
    for (int i = 0; i < 6; i++)
        if (strcmp(s, DT_NAMES[i]) == 0) return i;
    return -1;
}

int lc_read_line(FILE *in, char *buf, size_t cap) {
    size_t n = 0;
    int c;
    while ((c = getc(in)) != EOF) {
        if (c == '\n') {
            buf[n] = 0;
            return 0;
        }
        if (n + 1 >= cap) return -2;
        buf[n++] = (char)c;
    }
    return n ? -2 : -1;
}

/* Splits a header in place at single spaces; returns the number of fields. */
static int split(char *line, char **fields, int max) {
    int n = 0;
    char *s = line;
    while (n < max) {
        fields[n++] = s;
        char *sp = strchr(s, ' ');
        if (!sp) break;
        *sp = 0;
        s = sp + 1;
    }
    return n;
}

static int read_array(FILE *in, lc_array *a) {
    char line[LC_MAX_HEADER + 2];
    char *f[4 + LC_MAX_DIMS];
    if (lc_read_line(in, line, sizeof line) != 0) return lc_failed("cannot read an ARG header");
    int nf = split(line, f, 4 + LC_MAX_DIMS);
    if (nf < 4 || strcmp(f[0], "ARG") != 0) return lc_failed("expected an ARG header");
    snprintf(a->name, sizeof a->name, "%s", f[1]);
    a->dtype = dtype_from_name(f[2]);
    a->ndim = atoi(f[3]);
    if (a->dtype < 0 || a->ndim < 0 || a->ndim > LC_MAX_DIMS || nf != 4 + a->ndim)
        return lc_failed("bad ARG header for %s", a->name);
    a->count = 1;
    for (int d = 0; d < a->ndim; d++) {
        a->dims[d] = strtoll(f[4 + d], NULL, 10);
        if (a->dims[d] < 0) return lc_failed("negative dimension in ARG %s", a->name);
        a->count *= (size_t)a->dims[d];
    }
    size_t bytes = a->count * lc_dtype_size(a->dtype);
    a->data = malloc(bytes + 8); /* +8: room for a NUL, never zero-sized */
    if (!a->data) return lc_failed("out of memory reading ARG %s", a->name);
    if (bytes && fread(a->data, 1, bytes, in) != bytes) return lc_failed("short ARG %s", a->name);
    if (a->dtype == LC_STR) ((char *)a->data)[bytes] = 0;
    return 0;
}

int lc_read_call(FILE *in, char *header, lc_call *call) {
    char *f[4];
    int nf = version >= 2 ? 4 : 3, k = nf - 3; /* k: the id's field, 1 in version 2 */
    memset(call, 0, sizeof *call);
    call_id[0] = 0;
    if (split(header, f, nf) != nf) return lc_failed("bad CALL header");
    if (k) {
        snprintf(call->id, sizeof call->id, "%s", f[1]);
        snprintf(call_id, sizeof call_id, "%s", f[1]);
    }
    snprintf(call->function, sizeof call->function, "%s", f[1 + k]);
    int n = atoi(f[2 + k]);
    if (n < 0 || n > LC_MAX_ARGS) return lc_failed("too many arguments (%d)", n);
    for (int i = 0; i < n; i++) {
        call->nargs = i + 1;
        if (read_array(in, &call->args[i]) != 0) return -1;
    }
    return 0;
}

void lc_free_call(lc_call *call) {
    for (int i = 0; i < call->nargs; i++) free(call->args[i].data);
    call->nargs = 0;
}

void *lc_result_alloc(lc_result *r, int dtype, int ndim, const int64_t *dims) {
    size_t count = 1;
    r->dtype = dtype;
    r->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        r->dims[d] = dims[d];
        count *= (size_t)dims[d];
    }
    r->data = malloc(count * lc_dtype_size(dtype) + 8);
    return r->data;
}

void lc_free_out(lc_out *out) {
    for (int i = 0; i < out->n; i++) free(out->r[i].data);
    out->n = 0;
}

void lc_write_out(FILE *out, const lc_out *o) {
    if (version >= 2) fprintf(out, "OK %s %d\n", call_id, o->n);
    else fprintf(out, "OK %d\n", o->n);
    for (int i = 0; i < o->n; i++) {
        const lc_result *r = &o->r[i];
        size_t count = 1;
        fprintf(out, "RESULT %s %d", lc_dtype_name(r->dtype), r->ndim);
        for (int d = 0; d < r->ndim; d++) {
            fprintf(out, " %lld", (long long)r->dims[d]);
            count *= (size_t)r->dims[d];
        }
        fputc('\n', out);
        fwrite(r->data, lc_dtype_size(r->dtype), count, out);
    }
    fflush(out);
}

void lc_write_error(FILE *out) {
    if (version >= 2) fprintf(out, "ERROR %s %s %s\n", call_id[0] ? call_id : "0", lc_error_kind(), lc_error_message());
    else fprintf(out, "ERROR %s %s\n", lc_error_kind(), lc_error_message());
    fflush(out);
}
