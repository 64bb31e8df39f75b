/* Stable radix argsort on 32-bit keys: llama.cpp sorts its candidates with a bucket sort for the
 * same reason (a comparison sort of 262,144 candidates costs tens of milliseconds). */
#ifndef LC_SORT_H
#define LC_SORT_H

#include <stddef.h>
#include <stdint.h>

/* Reorders idx[0..n) stably by key[idx[i]] ascending. 0, or -1 when out of memory. */
int radix_argsort(uint32_t *idx, const uint32_t *key, size_t n);
/* An ascending uint32 key for a descending float order (-0.0 and +0.0 equal). */
uint32_t key_descending(float x);
/* An ascending uint32 key for an ascending order of floats >= 0 (or +inf). */
uint32_t key_ascending_nonneg(float x);

#endif
