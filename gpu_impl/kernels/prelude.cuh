// Shared by every logitcheck kernel. Compiled by NVRTC (CuPy RawModule) and by `nvcc -ptx` in CI
// from the same text, so it includes no header: the CUDA built-ins are all it uses.
//
// Layout conventions: logits are a contiguous float32 [B, V] array; blockIdx.y is the row. A
// "chunk" is LC_CHUNK consecutive columns handled by one block; it is fixed (not derived from
// the batch) so that a row's partial sums, hence its rounding, never depend on which rows share
// its batch (the suite checks batch invariance bit for bit).

#define LC_NEG_INF __int_as_float(0xff800000)
#define LC_THREADS 256
#define LC_CHUNK 4096
#define LC_ITEMS (LC_CHUNK / LC_THREADS)
#define LC_WIN 1024  // the chain's window (window.cu); also the threads per block of lc_window_cut

typedef unsigned int lc_u32;
typedef unsigned long long lc_u64;
typedef long long lc_i64;

__device__ __forceinline__ lc_i64 lc_min64(lc_i64 a, lc_i64 b) { return a < b ? a : b; }
__device__ __forceinline__ lc_i64 lc_max64(lc_i64 a, lc_i64 b) { return a > b ? a : b; }

// Sort key in *descending* value order: a smaller key is a larger float. -0.0 and +0.0 compare
// equal as floats, so they share the key of +0.0; NaN never reaches a kernel (refused on the host).
__device__ __forceinline__ lc_u32 lc_desc_key(float v) {
    lc_u32 b = __float_as_uint(v);
    if (b == 0x80000000u) b = 0u;
    const lc_u32 asc = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    return ~asc;
}

// Ascending image of a float's total order (-0.0 below +0.0; NaN excluded by the callers): an
// integer max over it is the float max, exactly and in any order of combination.
__device__ __forceinline__ lc_u32 lc_asc_key(float v) {
    const lc_u32 b = __float_as_uint(v);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

__device__ __forceinline__ float lc_asc_value(lc_u32 key) {
    return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

__device__ __forceinline__ float lc_key_value(lc_u32 key) {
    const lc_u32 asc = ~key;
    return __uint_as_float((asc & 0x80000000u) ? (asc & 0x7fffffffu) : ~asc);
}

// The first n elements of a row in (descending value, ascending id) order are exactly those with
// v > c, plus those with v == c and id <= cut: (c, cut) is the n-th element itself. Every filter
// reduces to finding that element, so every mask is one elementwise pass.
__device__ __forceinline__ bool lc_in_prefix(float v, lc_i64 id, float c, lc_i64 cut) {
    return v > c || (v == c && id <= cut);
}

template <typename T> __device__ __forceinline__ T lc_warp_sum(T v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float lc_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide sum; every thread gets the result. blockDim.x is a multiple of 32; scratch holds 32.
// The tree's shape depends only on blockDim, so the rounding is the same on every run.
template <typename T> __device__ T lc_block_sum(T v, T* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = lc_warp_sum(v);
    __syncthreads();  // a previous call's readers are done with scratch
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T w = lane < n_warps ? scratch[lane] : T(0);
        w = lc_warp_sum(w);
        if (lane == 0) scratch[0] = w;
    }
    __syncthreads();
    return scratch[0];
}

__device__ float lc_block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    v = lc_warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        float w = lane < n_warps ? scratch[lane] : LC_NEG_INF;
        w = lc_warp_max(w);
        if (lane == 0) scratch[0] = w;
    }
    __syncthreads();
    return scratch[0];
}

// The "last block of a row" hand-off: every block of the row calls it after its global writes
// (atomics included); it returns true, in all threads of exactly one block, once all the row's
// gridDim.x blocks have arrived, and that block then sees their writes (read them with __ldcg, which
// bypasses the non-coherent L1). The counter is reset for the next launch that shares it.
__device__ __forceinline__ bool lc_last_of_row(unsigned int* done, int* flag) {
    __syncthreads();  // this block's writes are issued
    if (threadIdx.x == 0) {
        __threadfence();  // ... and visible device-wide before the ticket
        const unsigned int ticket = atomicAdd(done, 1u);
        *flag = ticket == gridDim.x - 1;
        if (*flag) {
            *done = 0u;
            __threadfence();
        }
    }
    __syncthreads();
    return *flag;
}

__device__ __forceinline__ lc_u32 lc_block_max_u32(lc_u32 v, lc_u32* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        const lc_u32 u = __shfl_xor_sync(0xffffffffu, v, o);
        v = u > v ? u : v;
    }
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        lc_u32 w = lane < n_warps ? scratch[lane] : 0u;
        for (int o = 16; o > 0; o >>= 1) {
            const lc_u32 u = __shfl_xor_sync(0xffffffffu, w, o);
            w = u > w ? u : w;
        }
        if (lane == 0) scratch[0] = w;
    }
    __syncthreads();
    return scratch[0];
}

// Block-wide inclusive scan in thread order (scratch holds 33). Sums are formed by additions
// only (no "inclusive - own value"), so a float scan is a true running sum of some tree shape.
template <typename T> __device__ T lc_block_inclusive_scan(T v, T* scratch, T* total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    T incl = v;
    for (int o = 1; o < 32; o <<= 1) {
        const T n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
    }
    __syncthreads();
    if (lane == 31) scratch[warp] = incl;
    __syncthreads();
    if (warp == 0) {
        const T w = lane < n_warps ? scratch[lane] : T(0);
        T wi = w;
        for (int o = 1; o < 32; o <<= 1) {
            const T n = __shfl_up_sync(0xffffffffu, wi, o);
            if (lane >= o) wi += n;
        }
        T before = __shfl_up_sync(0xffffffffu, wi, 1);
        if (lane == 0) before = T(0);
        if (lane < n_warps) scratch[lane] = before;
        if (lane == n_warps - 1) scratch[32] = wi;
    }
    __syncthreads();
    const T out = warp == 0 ? incl : scratch[warp] + incl;
    *total = scratch[32];
    __syncthreads();  // scratch is free again when this returns
    return out;
}

// Appends `count` items for this thread to a per-row list through one atomic per warp; returns
// the thread's first slot. All 32 lanes must call it.
__device__ __forceinline__ int lc_warp_append(int count, int* fill) {
    const int lane = threadIdx.x & 31;
    int incl = count;
    for (int o = 1; o < 32; o <<= 1) {
        const int n = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += n;
    }
    const int total = __shfl_sync(0xffffffffu, incl, 31);
    int base = 0;
    if (lane == 31 && total > 0) base = atomicAdd(fill, total);
    base = __shfl_sync(0xffffffffu, base, 31);
    return base + incl - count;
}

// One chunk of a row into registers, LC_ITEMS values per thread, -inf past the row's end. With
// 16-byte aligned rows whose length is a multiple of 4 the loads are float4 (coalesced, 16 B per
// thread); item i of thread t is then column lo + 4 * ((i / 4) * LC_THREADS + t) + i % 4.
__device__ __forceinline__ bool lc_vec_ok(const float* xr, lc_i64 V) {
    return (V & 3) == 0 && (((lc_u64)xr) & 15) == 0;
}

__device__ __forceinline__ lc_i64 lc_item_col(bool vec, lc_i64 lo, int i) {
    return vec ? lo + 4 * ((lc_i64)(i >> 2) * LC_THREADS + threadIdx.x) + (i & 3)
               : lo + (lc_i64)i * LC_THREADS + threadIdx.x;
}

__device__ __forceinline__ void lc_load_chunk(const float* __restrict__ xr, bool vec, lc_i64 lo, lc_i64 hi,
                                              float v[LC_ITEMS]) {
    if (vec) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
#pragma unroll
        for (int i = 0; i < LC_ITEMS; i += 4) {
            const lc_i64 col = lc_item_col(true, lo, i);
            float4 q = make_float4(LC_NEG_INF, LC_NEG_INF, LC_NEG_INF, LC_NEG_INF);
            if (col < hi) q = x4[col >> 2];  // hi is a multiple of 4 here, so all four are in the row
            v[i] = q.x; v[i + 1] = q.y; v[i + 2] = q.z; v[i + 3] = q.w;
        }
    } else {
#pragma unroll
        for (int i = 0; i < LC_ITEMS; ++i) {
            const lc_i64 col = lc_item_col(false, lo, i);
            v[i] = col < hi ? xr[col] : LC_NEG_INF;
        }
    }
}

__device__ __forceinline__ void lc_store_chunk(float* __restrict__ yr, bool vec, lc_i64 lo, lc_i64 hi,
                                               const float v[LC_ITEMS]) {
    if (vec) {
        float4* y4 = reinterpret_cast<float4*>(yr);
#pragma unroll
        for (int i = 0; i < LC_ITEMS; i += 4) {
            const lc_i64 col = lc_item_col(true, lo, i);
            if (col < hi) y4[col >> 2] = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
        }
    } else {
#pragma unroll
        for (int i = 0; i < LC_ITEMS; ++i) {
            const lc_i64 col = lc_item_col(false, lo, i);
            if (col < hi) yr[col] = v[i];
        }
    }
}

// Row max and normaliser from the per-chunk partials (m_c, s_c = sum exp(x - m_c)) written by
// lc_row_stats: m = max m_c, s = sum s_c * exp(m_c - m), in a fixed order (lane-strided, then a
// warp tree). Called by warp 0 only.
__device__ void lc_combine_partials(const float2* __restrict__ part, int n_chunks, float* m_out, float* s_out) {
    const int lane = threadIdx.x & 31;
    float m = LC_NEG_INF;
    for (int c = lane; c < n_chunks; c += 32) m = fmaxf(m, part[c].x);
    m = lc_warp_max(m);
    float s = 0.0f;
    if (m != LC_NEG_INF)
        for (int c = lane; c < n_chunks; c += 32) {
            const float2 q = part[c];
            if (q.x != LC_NEG_INF) s += q.y * expf(q.x - m);
        }
    s = lc_warp_sum(s);
    if (lane == 0) { *m_out = m; *s_out = s; }
}

// Appends (desc key << 32 | id) of the elements of columns [lo, hi) that lie in the row's prefix
// (c, cut) to the row's window w (LC_WIN slots, arbitrary order; the window kernel sorts) through
// the row's fill counter. Every thread of the block calls it (warp appends), with the same range;
// vec: float4 loads (16-byte aligned row, V and lo multiples of 4).
__device__ void lc_gather_span(const float* __restrict__ xr, const lc_i64 lo, const lc_i64 hi, const bool vec,
                               const float cv, const lc_i64 ct, lc_u64* __restrict__ w, int* fill) {
    if (vec) {  // up to four appends per thread
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        for (lc_i64 base = lo >> 2; base < (hi >> 2); base += blockDim.x) {  // same trip count for every lane
            const lc_i64 q = base + threadIdx.x;
            const float4 f = q < (hi >> 2) ? x4[q] : make_float4(LC_NEG_INF, LC_NEG_INF, LC_NEG_INF, LC_NEG_INF);
            const float v[4] = {f.x, f.y, f.z, f.w};
            bool keep[4];
            int n = 0;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                keep[j] = q < (hi >> 2) && lc_in_prefix(v[j], 4 * q + j, cv, ct);
                n += keep[j];
            }
            int slot = lc_warp_append(n, fill);
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (keep[j]) {
                    if (slot < LC_WIN) w[slot] = ((lc_u64)lc_desc_key(v[j]) << 32) | (lc_u64)(4 * q + j);
                    ++slot;
                }
        }
        return;
    }
    for (lc_i64 base = lo; base < hi; base += blockDim.x) {  // same trip count for every lane
        const lc_i64 col = base + threadIdx.x;
        const float v = col < hi ? xr[col] : LC_NEG_INF;
        const bool keep = col < hi && lc_in_prefix(v, col, cv, ct);
        const int slot = lc_warp_append(keep ? 1 : 0, fill);
        if (keep && slot < LC_WIN) w[slot] = ((lc_u64)lc_desc_key(v) << 32) | (lc_u64)col;
    }
}
