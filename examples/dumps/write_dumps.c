/* Dump a forward pass's tensors for `logitcheck layers` / `logitcheck parity`, standard C only.
 *
 * dump() writes DIR/NAME.f32 (the values as little-endian float32, row-major: the first dimension
 * outermost, the token first) and appends "NAME d0 d1 ..." to DIR/shapes.txt. NAME is llama.cpp's
 * graph name (l_out-3, result_norm, logits) or an HF-style one (`logitcheck names`).
 * Build and run: cc -std=c11 -O2 write_dumps.c -o write_dumps && mkdir -p out && ./write_dumps out
 */
#include <stdio.h>

static int dump(const char *dir, const char *name, const float *x, int ndim, const long *dims) {
    char path[4096];
    long n = 1;
    for (int i = 0; i < ndim; i++) n *= dims[i];
    snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t wrote = fwrite(x, sizeof(float), (size_t)n, f);  /* x86-64 and ARM are little-endian */
    if (fclose(f) != 0 || wrote != (size_t)n) return -1;
    snprintf(path, sizeof path, "%s/shapes.txt", dir);
    if (!(f = fopen(path, "a"))) return -1;
    fprintf(f, "%s", name);
    for (int i = 0; i < ndim; i++) fprintf(f, " %ld", dims[i]);
    fprintf(f, "\n");
    return fclose(f);
}

/* A stand-in for an engine's activations: value(t, j) = ((t*31 + j*7 + salt) % 97) / 97 - 0.5 in float32. */
enum { T = 4, HIDDEN = 8, VOCAB = 16 };

static void fill(float *x, long cols, int salt) {
    for (long t = 0; t < T; t++)
        for (long j = 0; j < cols; j++) x[t * cols + j] = (float)((t * 31 + j * 7 + salt) % 97) / 97.0f - 0.5f;
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: %s DIR (an existing folder)\n", argv[0]); return 2; }
    static const char *names[] = {"embd", "l_out-0", "l_out-1", "result_norm"};
    float hidden[T * HIDDEN], logits[T * VOCAB];
    long dims_h[2] = {T, HIDDEN}, dims_v[2] = {T, VOCAB};
    for (int i = 0; i < 4; i++) {
        fill(hidden, HIDDEN, i);
        if (dump(argv[1], names[i], hidden, 2, dims_h) != 0) { perror(names[i]); return 1; }
    }
    fill(logits, VOCAB, 4);
    if (dump(argv[1], "logits", logits, 2, dims_v) != 0) { perror("logits"); return 1; }
    char path[4096];
    snprintf(path, sizeof path, "%s/tokens.txt", argv[1]);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return 1; }
    fprintf(f, "1 5 9 13\n");  /* the token ids the pass ran on: parity's Δp reads the next token */
    return fclose(f) == 0 ? 0 : 1;
}
