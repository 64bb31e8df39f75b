// Online row softmax: one read of the logits gives every chunk's max and sum of exp (relative to
// that chunk's max); a consumer combines the partials (lc_combine_partials) and, for softmax,
// reads the chunk again to write p. Several blocks per row whatever the batch, float4 loads.

// grid (n_chunks, B), LC_THREADS threads. part[b * n_chunks + c] = (m_c, sum exp(x - m_c)).
extern "C" __global__ void lc_row_stats(const float* __restrict__ x, const lc_i64 V, const int n_chunks,
                                        float2* __restrict__ part) {
    __shared__ float scratch[32];
    const lc_i64 row = blockIdx.y, lo = (lc_i64)blockIdx.x * LC_CHUNK, hi = lc_min64(lo + LC_CHUNK, V);
    const float* xr = x + row * V;
    const bool vec = lc_vec_ok(xr, V);
    float v[LC_ITEMS];
    lc_load_chunk(xr, vec, lo, hi, v);
    float m = LC_NEG_INF;
#pragma unroll
    for (int i = 0; i < LC_ITEMS; ++i) m = fmaxf(m, v[i]);
    m = lc_block_max(m, scratch);
    float s = 0.0f;
    if (m != LC_NEG_INF) {  // uniform: m is the block's
#pragma unroll
        for (int i = 0; i < LC_ITEMS; ++i) s += expf(v[i] - m);  // -inf entries add exp(-inf) = 0
    }
    s = lc_block_sum(s, reinterpret_cast<float*>(scratch));
    if (threadIdx.x == 0) part[row * n_chunks + blockIdx.x] = make_float2(m, s);
}

// grid (n_chunks, B): p = exp(x - m) / s, divided (not multiplied by 1/s) as llama.cpp's
// softmax_impl; a row with no finite logit has no distribution and gets zeros.
extern "C" __global__ void lc_softmax_write(const float* __restrict__ x, const lc_i64 V, const int n_chunks,
                                            const float2* __restrict__ part, float* __restrict__ y) {
    __shared__ float ms[2];
    const lc_i64 row = blockIdx.y, lo = (lc_i64)blockIdx.x * LC_CHUNK, hi = lc_min64(lo + LC_CHUNK, V);
    if (threadIdx.x < 32) lc_combine_partials(part + row * n_chunks, n_chunks, &ms[0], &ms[1]);
    __syncthreads();
    const float m = ms[0], s = ms[1];
    const float* xr = x + row * V;
    const bool vec = lc_vec_ok(xr, V) && lc_vec_ok(y + row * V, V);
    float v[LC_ITEMS];
    lc_load_chunk(xr, vec, lo, hi, v);
#pragma unroll
    for (int i = 0; i < LC_ITEMS; ++i) v[i] = m == LC_NEG_INF ? 0.0f : expf(v[i] - m) / s;
    lc_store_chunk(y + row * V, vec, lo, hi, v);
}
