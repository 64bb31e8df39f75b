// llama.cpp's dist on device: e = exp(x - max) in float, double sums, the first token in vocab
// order whose running sum reaches S * u (never a token with e == 0). Chunk sums first (one read,
// many blocks per row), then one block per row walks the chunks and scans only the one that
// holds the crossing. No host round trip.

// grid (n_chunks, B). part_sum[b, c] = double sum of e over chunk c; part_last[b, c] = last column
// of the chunk with e > 0 (-1 if none).
extern "C" __global__ void lc_dist_partials(const float* __restrict__ x, const lc_i64 V, const int n_chunks,
                                            const float* __restrict__ row_max, double* __restrict__ part_sum,
                                            lc_i64* __restrict__ part_last) {
    __shared__ double scratch[32];
    __shared__ lc_i64 last;
    const lc_i64 row = blockIdx.y, lo = (lc_i64)blockIdx.x * LC_CHUNK, hi = lc_min64(lo + LC_CHUNK, V);
    const float m = row_max[row];
    const float* xr = x + row * V;
    const bool vec = lc_vec_ok(xr, V);
    float v[LC_ITEMS];
    lc_load_chunk(xr, vec, lo, hi, v);
    if (threadIdx.x == 0) last = -1;
    double s = 0.0;
    lc_i64 my_last = -1;
#pragma unroll
    for (int i = 0; i < LC_ITEMS; ++i) {
        const float e = expf(v[i] - m);
        s += (double)e;
        if (e > 0.0f) my_last = lc_max64(my_last, lc_item_col(vec, lo, i));
    }
    s = lc_block_sum<double>(s, scratch);  // its barriers also order `last = -1` before the atomics
    if (my_last >= 0) atomicMax(&last, my_last);
    __syncthreads();
    if (threadIdx.x == 0) {
        part_sum[row * n_chunks + blockIdx.x] = s;
        part_last[row * n_chunks + blockIdx.x] = last;
    }
}

// One block (LC_THREADS) per row; u[b] in [0, 1] is validated on the host.
extern "C" __global__ void lc_dist_pick(const float* __restrict__ x, const lc_i64 V, const int n_chunks,
                                        const float* __restrict__ row_max, const double* __restrict__ part_sum,
                                        const lc_i64* __restrict__ part_last, const double* __restrict__ u,
                                        lc_i64* __restrict__ out) {
    __shared__ double scratch[33];
    __shared__ double base_sh, target_sh;
    __shared__ lc_i64 chunk_sh, found;
    const lc_i64 row = blockIdx.x;
    const double* ps = part_sum + row * n_chunks;
    if (threadIdx.x == 0) {
        double total = 0.0;
        for (int c = 0; c < n_chunks; ++c) total += ps[c];
        const double target = total * u[row];
        double run = 0.0;
        int c = 0;
        for (; c < n_chunks - 1; ++c) {  // the first chunk whose running sum reaches the target
            if (run + ps[c] >= target) break;
            run += ps[c];
        }
        base_sh = run; target_sh = target; chunk_sh = c; found = -1;
    }
    __syncthreads();
    const float m = row_max[row];
    const double target = target_sh;
    const float* xr = x + row * V;
    double base = base_sh;
    // scan from that chunk on: rounding may put the crossing a little later than the chunk sums say
    for (lc_i64 col0 = chunk_sh * LC_CHUNK; col0 < V; col0 += blockDim.x) {
        const lc_i64 col = col0 + threadIdx.x;
        const float e = col < V ? expf(xr[col] - m) : 0.0f;
        double tile_total;
        const double run = base + lc_block_inclusive_scan<double>((double)e, scratch, &tile_total);
        if (e > 0.0f && run >= target) atomicMin((unsigned long long*)&found, (unsigned long long)col);
        __syncthreads();
        if (found >= 0) break;  // uniform: read after the barrier
        base += tile_total;
    }
    if (threadIdx.x == 0) {
        lc_i64 pick = found;
        if (pick < 0) {  // never reached (rounding): the last token with weight, as llama.cpp
            for (int c = 0; c < n_chunks; ++c) pick = lc_max64(pick, part_last[row * n_chunks + c]);
        }
        out[row] = pick;
    }
}
