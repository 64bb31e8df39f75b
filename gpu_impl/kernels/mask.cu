// The one elementwise pass every filter and the fused chain end with: keep the row's prefix
// (c, cut) (see lc_in_prefix), divide the kept logits by t, write -inf elsewhere; and min_p's
// threshold pass, which also counts its survivors.

#define LC_MASK_DIVIDE 1  // divide the kept logits by t[b]
#define LC_MASK_ONLY 2    // write only rows with only[b] != 0 (the others keep what y holds)

// grid (n_chunks, B), LC_THREADS threads. t and only are read only where flags say.
extern "C" __global__ void lc_mask_prefix(const float* __restrict__ x, const lc_i64 V, const float* __restrict__ c,
                                          const lc_i64* __restrict__ cut, const float* __restrict__ t,
                                          const int* __restrict__ only, const int flags, float* __restrict__ y) {
    const lc_i64 row = blockIdx.y, lo = (lc_i64)blockIdx.x * LC_CHUNK, hi = lc_min64(lo + LC_CHUNK, V);
    if ((flags & LC_MASK_ONLY) && !only[row]) return;
    const float cv = c[row];
    const lc_i64 ct = cut[row];
    const bool divide = flags & LC_MASK_DIVIDE;
    const float tv = divide ? t[row] : 1.0f;
    const float* xr = x + row * V;
    const bool vec = lc_vec_ok(xr, V) && lc_vec_ok(y + row * V, V);
    float v[LC_ITEMS];
    lc_load_chunk(xr, vec, lo, hi, v);
#pragma unroll
    for (int i = 0; i < LC_ITEMS; ++i) {
        const bool keep = lc_in_prefix(v[i], lc_item_col(vec, lo, i), cv, ct);
        v[i] = keep ? (divide ? v[i] / tv : v[i]) : LC_NEG_INF;
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

// min_p in one pass: y = x where x >= max + ln p (float32, ln p rounded from a double log of the
// exact p, subnormal p included: this module is compiled without flush-to-zero), -inf elsewhere;
// rows with p <= 0 are copied. Each row's survivors are counted; the row's last block marks it
// short (fewer than max(min_keep, 1)) for the fallback, which keeps the first that many instead.
// grid (n_chunks, B). ws, zeroed by the host: u32 count[B], u32 done[B], int short_row[B], u32 n_short.
extern "C" __global__ void lc_min_p_mask(const float* __restrict__ x, const lc_i64 V, const float* __restrict__ row_max,
                                         const float* __restrict__ p, const lc_i64* __restrict__ min_keep,
                                         unsigned int* __restrict__ ws, float* __restrict__ y) {
    __shared__ lc_u32 scratch[32];
    __shared__ int last;
    const lc_i64 row = blockIdx.y, B = gridDim.y, lo = (lc_i64)blockIdx.x * LC_CHUNK, hi = lc_min64(lo + LC_CHUNK, V);
    unsigned int* count = ws;
    unsigned int* done = ws + B;
    int* short_row = reinterpret_cast<int*>(ws + 2 * B);
    unsigned int* n_short = ws + 3 * B;
    const float pv = p[row];
    const bool on = __float_as_int(pv) > 0;  // p > 0 by its bits: exact for subnormal p
    const float th = on ? row_max[row] + (float)log((double)pv) : LC_NEG_INF;  // -inf keeps every logit
    const float* xr = x + row * V;
    const bool vec = lc_vec_ok(xr, V) && lc_vec_ok(y + row * V, V);
    float v[LC_ITEMS];
    lc_load_chunk(xr, vec, lo, hi, v);
    lc_u32 k = 0u;
#pragma unroll
    for (int i = 0; i < LC_ITEMS; ++i) {
        const bool keep = v[i] >= th;
        k += keep && lc_item_col(vec, lo, i) < hi;  // the padding past the row's end is not a logit
        v[i] = keep ? v[i] : LC_NEG_INF;
    }
    lc_store_chunk(y + row * V, vec, lo, hi, v);
    if (!on) return;  // uniform for the row: no count, no fallback
    k = lc_block_sum<lc_u32>(k, scratch);
    if (threadIdx.x == 0 && k) atomicAdd(&count[row], k);
    if (!lc_last_of_row(&done[row], &last)) return;
    if (threadIdx.x == 0) {
        const lc_i64 need = lc_min64(lc_max64(min_keep[row], 1), V);
        if ((lc_i64)__ldcg(&count[row]) < need) {
            short_row[row] = 1;
            atomicAdd(n_short, 1u);
        }
    }
}
