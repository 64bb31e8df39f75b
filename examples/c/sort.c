#include "sort.h"

#include <stdlib.h>
#include <string.h>

#define DIGIT_BITS 11
#define BUCKETS (1u << DIGIT_BITS)

uint32_t key_descending(float x) {
    uint32_t u;
    const float z = x + 0.0f; /* -0.0 -> +0.0 */
    memcpy(&u, &z, sizeof u);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u); /* ascending in x */
    return ~u;
}

uint32_t key_ascending_nonneg(float x) {
    uint32_t u;
    const float z = x + 0.0f;
    memcpy(&u, &z, sizeof u);
    return u;
}

int radix_argsort(uint32_t *idx, const uint32_t *key, size_t n) {
    uint32_t *tmp = malloc(n * sizeof *tmp + 4);
    static size_t count[BUCKETS];
    if (!tmp) return -1;
    uint32_t *src = idx, *dst = tmp;
    for (int shift = 0; shift < 32; shift += DIGIT_BITS) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++) count[(key[src[i]] >> shift) & (BUCKETS - 1)]++;
        if (count[(key[src[0]] >> shift) & (BUCKETS - 1)] == n) continue; /* one bucket: no-op */
        size_t sum = 0;
        for (size_t b = 0; b < BUCKETS; b++) {
            const size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[count[(key[src[i]] >> shift) & (BUCKETS - 1)]++] = src[i];
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != idx) memcpy(idx, src, n * sizeof *idx);
    free(tmp);
    return 0;
}
