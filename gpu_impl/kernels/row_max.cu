// Row max in one read, several blocks per row whatever the batch: each block reduces its span to
// the integer image of the float order (lc_asc_key), the row's blocks combine by atomicMax, and
// the row's last block writes the float. The result is the exact max in any split; NaN rows give
// NaN and, with +inf rows, are counted in n_bad (what the host's validation reads, one word).

// grid (blocks_per_row, B), LC_THREADS threads. ws, zeroed by the host: u32 key[B], u32 nan_seen[B],
// u32 done[B], u32 n_bad.
extern "C" __global__ void lc_row_max(const float* __restrict__ x, const lc_i64 V, const lc_i64 span,
                                      unsigned int* __restrict__ ws, float* __restrict__ out) {
    __shared__ lc_u32 scratch[32];
    __shared__ int last;
    const lc_i64 row = blockIdx.y, B = gridDim.y;
    unsigned int* key = ws;
    unsigned int* nan_seen = ws + B;
    unsigned int* done = ws + 2 * B;
    unsigned int* n_bad = ws + 3 * B;
    const lc_i64 lo = (lc_i64)blockIdx.x * span, hi = lc_min64(lo + span, V);
    const float* xr = x + row * V;
    lc_u32 best = 0u, seen_nan = 0u;  // 0 is below every non-NaN key (-inf's is 0x007fffff)
    if (lc_vec_ok(xr, V) && (span & 3) == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const lc_i64 q_lo = lo >> 2, q_hi = hi >> 2;
        for (lc_i64 base = q_lo + threadIdx.x; base < q_hi; base += 4 * blockDim.x) {
            float4 buf[4];  // four 16-byte loads in flight per thread before the first use
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const lc_i64 q = base + (lc_i64)u * blockDim.x;
                buf[u] = q < q_hi ? x4[q] : make_float4(LC_NEG_INF, LC_NEG_INF, LC_NEG_INF, LC_NEG_INF);
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const float e[4] = {buf[u].x, buf[u].y, buf[u].z, buf[u].w};
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (e[j] != e[j]) seen_nan = 1u;
                    else { const lc_u32 k = lc_asc_key(e[j]); best = k > best ? k : best; }
                }
            }
        }
    } else {
        for (lc_i64 col = lo + threadIdx.x; col < hi; col += blockDim.x) {
            const float e = xr[col];
            if (e != e) seen_nan = 1u;
            else { const lc_u32 k = lc_asc_key(e); best = k > best ? k : best; }
        }
    }
    best = lc_block_max_u32(best, scratch);
    seen_nan = lc_block_max_u32(seen_nan, scratch);
    if (threadIdx.x == 0) {
        if (best) atomicMax(&key[row], best);
        if (seen_nan) atomicOr(&nan_seen[row], 1u);
    }
    if (!lc_last_of_row(&done[row], &last)) return;
    if (threadIdx.x == 0) {
        const bool has_nan = __ldcg(&nan_seen[row]) != 0u;
        const float m = has_nan ? __int_as_float(0x7fc00000) : lc_asc_value(__ldcg(&key[row]));
        out[row] = m;
        if (has_nan || m == -LC_NEG_INF) atomicAdd(n_bad, 1u);
    }
}
