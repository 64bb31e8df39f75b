/* logitcheck harness (protocol version 2, or 1 when greeted with it) for a llama.cpp-style C sampler engine.
 *
 *   harness [--no-claim] [--claim NAME]...
 *
 * The handshake claims refuses_bad_input (every refusal of gpu_impl is made here too) unless
 * --no-claim is given; --claim NAME adds a claim (e.g. overflow_safe).
 *
 * Reads requests on stdin, answers on stdout; see docs/protocol.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "proto.h"

static const struct {
    const char *name;
    lc_fn fn;
} FUNCTIONS[] = {
    {"softmax", api_softmax},
    {"greedy", api_greedy},
    {"dist", api_dist},
    {"temp", api_temp},
    {"top_k", api_top_k},
    {"top_p", api_top_p},
    {"min_p", api_min_p},
    {"typical", api_typical},
    {"penalties", api_penalties},
    {"logit_bias", api_logit_bias},
    {"top_n_sigma", api_top_n_sigma},
    {"xtc", api_xtc},
    {"temp_ext", api_temp_ext},
    {"mirostat_v2", api_mirostat_v2},
    {"engines.llama_cpp_chain", api_llama_cpp_chain},
    {"engines.llama_cpp_chain_dist", api_llama_cpp_chain_dist},
    {"ops.softmax", api_ops_softmax},
    {"ops.rms_norm", api_ops_rms_norm},
    {"ops.rope", api_ops_rope},
};
#define N_FUNCTIONS (sizeof FUNCTIONS / sizeof FUNCTIONS[0])

#ifdef BUG_TOP_P_ON_LOGITS
#define BUILD "llama-style-c (BUG_TOP_P_ON_LOGITS)"
#elif defined(BUG_SOFTMAX_TOP1000)
#define BUILD "llama-style-c (BUG_SOFTMAX_TOP1000)"
#elif defined(BUG_TEMP_MISPLACED)
#define BUILD "llama-style-c (BUG_TEMP_MISPLACED)"
#elif defined(BUG_TOP_P_STALE_SOFTMAX)
#define BUILD "llama-style-c (BUG_TOP_P_STALE_SOFTMAX)"
#elif defined(BUG_ROPE_RESTART)
#define BUILD "llama-style-c (BUG_ROPE_RESTART)"
#else
#define BUILD "llama-style-c"
#endif

static lc_fn lookup(const char *name) {
    for (size_t i = 0; i < N_FUNCTIONS; i++)
        if (strcmp(FUNCTIONS[i].name, name) == 0) return FUNCTIONS[i].fn;
    return NULL;
}

static void handshake(FILE *out, int argc, char **argv) {
    fprintf(out, "LOGITCHECK %d %s\n", lc_version(), BUILD);
    for (size_t i = 0; i < N_FUNCTIONS; i++) fprintf(out, "FUNCTION %s\n", FUNCTIONS[i].name);
    int claim_refusals = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--no-claim") == 0) claim_refusals = 0;
        else if (strcmp(argv[i], "--claim") == 0 && i + 1 < argc) fprintf(out, "CLAIM %s\n", argv[++i]);
    }
    if (claim_refusals) fprintf(out, "CLAIM refuses_bad_input\n");
    fprintf(out, "END\n");
    fflush(out);
}

int main(int argc, char **argv) {
    static char line[LC_MAX_HEADER + 2];
    static lc_call call;
    FILE *in = stdin, *out = stdout;
    setvbuf(in, NULL, _IOFBF, 1 << 20);
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    if (lc_read_line(in, line, sizeof line) != 0 || lc_greeting(line) < 0) {
        fprintf(stderr, "harness: expected 'LOGITCHECK <version>', got '%s'\n", line);
        return 2;
    }
    handshake(out, argc, argv);
    for (;;) {
        int got = lc_read_line(in, line, sizeof line);
        if (got == -1 || strcmp(line, "QUIT") == 0) return 0;
        if (got != 0 || strncmp(line, "CALL ", 5) != 0) {
            fprintf(stderr, "harness: unexpected request line\n");
            return 3;
        }
        lc_out result = {0};
        lc_error_clear();
        if (lc_read_call(in, line, &call) != 0) { /* the stream is lost: say why, then stop */
            lc_write_error(out);
            fprintf(stderr, "harness: %s\n", lc_error_message());
            return 3;
        }
        lc_fn fn = lookup(call.function);
        int rc = fn ? fn(&call, &result) : lc_unsupported("%s is not implemented", call.function);
        if (rc == 0) lc_write_out(out, &result);
        else lc_write_error(out);
        lc_free_out(&result);
        lc_free_call(&call);
    }
}
