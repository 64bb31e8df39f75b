/* Framing of the logitcheck harness protocol, version 2 (docs/protocol.md):
 * header lines of ASCII fields, arrays as raw little-endian bytes; each answer echoes its
 * call's id. Version 1 (no ids) is spoken when logitcheck greets with it. */
#ifndef LC_PROTO_H
#define LC_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LC_MAX_HEADER 4096
#define LC_MAX_DIMS 8
#define LC_MAX_ARGS 32

enum lc_dtype { LC_F32, LC_F64, LC_I64, LC_I32, LC_U8, LC_STR };

typedef struct {
    char name[64];
    int dtype;
    int ndim;
    int64_t dims[LC_MAX_DIMS];
    size_t count; /* number of elements (bytes for str) */
    void *data;   /* malloc'd; str data is NUL-terminated */
} lc_array;

typedef struct {
    char id[24]; /* the call id (version 2), echoed by lc_write_out / lc_write_error */
    char function[128];
    int nargs;
    lc_array args[LC_MAX_ARGS];
} lc_call;

/* A result array the harness owns until it is written. */
typedef struct {
    int dtype;
    int ndim;
    int64_t dims[LC_MAX_DIMS];
    void *data;
} lc_result;

typedef struct {
    int n;
    lc_result r[2];
} lc_out;

/* The error of the current call: kind is "refused", "unsupported" or "failed". */
int lc_error(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define lc_refuse(...) lc_error("refused", __VA_ARGS__)
#define lc_unsupported(...) lc_error("unsupported", __VA_ARGS__)
#define lc_failed(...) lc_error("failed", __VA_ARGS__)
const char *lc_error_kind(void);
const char *lc_error_message(void);
void lc_error_clear(void);

size_t lc_dtype_size(int dtype);
const char *lc_dtype_name(int dtype);

#define LC_VERSION 2
/* The greeting "LOGITCHECK <n>": the version spoken from now on (the lower of n and
 * LC_VERSION), or -1 if the line is no greeting. */
int lc_greeting(const char *line);
int lc_version(void);

/* 0: a line in buf (no newline); -1: end of file; -2: overlong or broken line. */
int lc_read_line(FILE *in, char *buf, size_t cap);
/* Reads one CALL with its ARG arrays after its line ("CALL <id> <fn> <n>", version 1:
 * "CALL <fn> <n>") was read into header. 0 or -1. */
int lc_read_call(FILE *in, char *header, lc_call *call);
void lc_free_call(lc_call *call);

/* Result helpers. */
void *lc_result_alloc(lc_result *r, int dtype, int ndim, const int64_t *dims);
void lc_free_out(lc_out *out);
void lc_write_out(FILE *out, const lc_out *o);
void lc_write_error(FILE *out);

#endif
