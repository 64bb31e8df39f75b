// The one elementwise pass every filter and the fused chain end with: keep the row's prefix
// (c, cut) (see lc_in_prefix), divide the kept logits by t, write -inf elsewhere.

// grid (n_chunks, B), LC_THREADS threads. t == nullptr-equivalent: use_t == 0 keeps values exact.
extern "C" __global__ void lc_mask_prefix(const float* __restrict__ x, const lc_i64 V, const float* __restrict__ c,
                                          const lc_i64* __restrict__ cut, const float* __restrict__ t,
                                          const int use_t, float* __restrict__ y) {
    const lc_i64 row = blockIdx.y, lo = (lc_i64)blockIdx.x * LC_CHUNK, hi = lc_min64(lo + LC_CHUNK, V);
    const float cv = c[row];
    const lc_i64 ct = cut[row];
    const float tv = use_t ? t[row] : 1.0f;
    const float* xr = x + row * V;
    const bool vec = lc_vec_ok(xr, V) && lc_vec_ok(y + row * V, V);
    float v[LC_ITEMS];
    lc_load_chunk(xr, vec, lo, hi, v);
#pragma unroll
    for (int i = 0; i < LC_ITEMS; ++i) {
        const bool keep = lc_in_prefix(v[i], lc_item_col(vec, lo, i), cv, ct);
        v[i] = keep ? (use_t ? v[i] / tv : v[i]) : LC_NEG_INF;
    }
    lc_store_chunk(y + row * V, vec, lo, hi, v);
}

// grid (blocks_per_row, B): count[b] += #{x >= thr[b]} for active rows (min_p's survivors).
extern "C" __global__ void lc_count_ge(const float* __restrict__ x, const lc_i64 V, const float* __restrict__ thr,
                                       const int* __restrict__ active, const lc_i64 span,
                                       unsigned long long* __restrict__ count) {
    __shared__ lc_u64 scratch[32];
    const lc_i64 row = blockIdx.y;
    if (!active[row]) return;
    const float th = thr[row];
    const lc_i64 lo = (lc_i64)blockIdx.x * span, hi = lc_min64(lo + span, V);
    const float* xr = x + row * V;
    lc_u64 k = 0ull;
    if (lc_vec_ok(xr, V) && (span & 3) == 0) {  // float4 loads, two in flight per thread
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (lc_i64 q = (lo >> 2) + threadIdx.x; q < (hi >> 2); q += 2 * blockDim.x) {
            const float4 a = x4[q];
            const float4 b = q + blockDim.x < (hi >> 2) ? x4[q + blockDim.x] : make_float4(th, th, th, th);
            k += (a.x >= th) + (a.y >= th) + (a.z >= th) + (a.w >= th);
            if (q + blockDim.x < (hi >> 2)) k += (b.x >= th) + (b.y >= th) + (b.z >= th) + (b.w >= th);
        }
    } else {
        for (lc_i64 col = lo + threadIdx.x; col < hi; col += blockDim.x) k += xr[col] >= th;
    }
    k = lc_block_sum<lc_u64>(k, scratch);
    if (threadIdx.x == 0 && k) atomicAdd(&count[row], k);
}
