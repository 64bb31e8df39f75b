// The n-th element of each row in (descending value, ascending id) order, without sorting: a
// radix select on the float bits (lc_desc_key), 11 + 11 + 10 bits in three passes, then the id of
// the last tie the prefix keeps. Two goals: by count (top_k's k-th largest) or by mass (top_p's
// crossing: the first prefix whose probability mass reaches p). Histograms are integer (counts,
// and masses in fixed point), so the result is exact and independent of the blocks per row.
//
// Launch order per row state: lc_select_init, then for pass 0..2 lc_radix_hist + lc_radix_scan,
// then lc_tie_count + lc_tie_cut. A row with active == 0 returns at once in every kernel, so the
// sequence can be launched for a whole batch with no host decision (no synchronisation).

#define LC_BINS 2048
#define LC_FX_ONE 1099511627776.0  // 2^40: fixed-point unit of exp(x - max) in [0, 1]; V < 2^24

struct LcSelect {
    lc_i64 kk;          // count goal: rank (1-based) still to find inside the current bin
    lc_i64 above;       // elements strictly before the current bin
    lc_i64 eq;          // after pass 2: elements equal to the selected value (within the restriction)
    lc_i64 need;        // after pass 2: how many of those ties the prefix takes
    lc_u64 mass_above;  // mass goal: fixed-point mass strictly before the current bin
    lc_u64 mass_total;
    double target;      // mass goal: p until pass 0 scans, then p * total (fixed point)
    lc_i64 lo_cut;      // restriction to an earlier prefix (lo_value, lo_cut); (-inf, V) = none
    lc_u32 prefix, mask;
    int active, mode;   // mode 0: by count, 1: by mass
    float value, row_max, lo_value;
    int pad;
};
static_assert(sizeof(LcSelect) == 96, "the host allocates 96 bytes per row");

__device__ __forceinline__ int lc_shift(int pass) { return pass == 0 ? 21 : (pass == 1 ? 10 : 0); }
__device__ __forceinline__ lc_u32 lc_digits(int pass) { return pass == 2 ? 0x3ffu : 0x7ffu; }

extern "C" __global__ void lc_select_init(LcSelect* __restrict__ st, const int B, const lc_i64 V,
                                          const lc_i64* __restrict__ n, const float* __restrict__ p,
                                          const float* __restrict__ row_max, const int* __restrict__ active,
                                          const float* __restrict__ lo_value, const lc_i64* __restrict__ lo_cut,
                                          const int mode) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    LcSelect s;
    s.kk = lc_min64(lc_max64(n[b], 1), V);
    s.above = 0; s.eq = 0; s.need = 0; s.mass_above = 0; s.mass_total = 0;
    s.target = mode ? (double)p[b] : 0.0;
    s.lo_cut = lo_cut[b];
    s.prefix = 0u; s.mask = 0u;
    s.mode = mode;
    s.row_max = row_max[b];
    s.active = active[b] && (mode == 0 || s.row_max > LC_NEG_INF);  // no finite logit: no mass
    s.value = LC_NEG_INF; s.lo_value = lo_value[b]; s.pad = 0;
    st[b] = s;
}

#define LC_UNROLL 4

__device__ __forceinline__ void lc_hist_add(float v, lc_i64 col, const LcSelect& s, int shift, lc_u32 digits,
                                            lc_u32* cnt, lc_u64* mass) {
    if (!lc_in_prefix(v, col, s.lo_value, s.lo_cut)) return;
    const lc_u32 key = lc_desc_key(v);
    if ((key & s.mask) != s.prefix) return;
    const lc_u32 d = (key >> shift) & digits;
    atomicAdd(&cnt[d], 1u);
    if (s.mode) {
        const lc_u64 fx = __double2ull_rn((double)expf(v - s.row_max) * LC_FX_ONE);
        if (fx) atomicAdd(&mass[d], fx);
    }
}

// grid (blocks_per_row, B), LC_THREADS threads; block x covers columns [x * span, (x + 1) * span).
extern "C" __global__ void lc_radix_hist(const float* __restrict__ x, const lc_i64 V, const LcSelect* __restrict__ st,
                                         const int pass, const lc_i64 span, lc_u32* __restrict__ hist_count,
                                         lc_u64* __restrict__ hist_mass) {
    __shared__ lc_u32 cnt[LC_BINS];
    __shared__ lc_u64 mass[LC_BINS];
    const lc_i64 row = blockIdx.y;
    const LcSelect s = st[row];
    if (!s.active) return;  // uniform for the block
    for (int i = threadIdx.x; i < LC_BINS; i += blockDim.x) { cnt[i] = 0u; mass[i] = 0ull; }
    __syncthreads();
    const int shift = lc_shift(pass);
    const lc_u32 digits = lc_digits(pass);
    const lc_i64 lo = (lc_i64)blockIdx.x * span, hi = lc_min64(lo + span, V);
    const float* xr = x + row * V;
    if (lc_vec_ok(xr, V) && (span & 3) == 0) {
        // float4 loads, LC_UNROLL of them in flight per thread before the first use: the pass is
        // a stream over the row and must keep enough bytes in flight to run at bandwidth
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        const lc_i64 q_lo = lo >> 2, q_hi = hi >> 2;
        for (lc_i64 base = q_lo + threadIdx.x; base < q_hi; base += LC_UNROLL * blockDim.x) {
            float4 buf[LC_UNROLL];
#pragma unroll
            for (int u = 0; u < LC_UNROLL; ++u) {
                const lc_i64 q = base + (lc_i64)u * blockDim.x;
                buf[u] = q < q_hi ? x4[q] : make_float4(LC_NEG_INF, LC_NEG_INF, LC_NEG_INF, LC_NEG_INF);
            }
#pragma unroll
            for (int u = 0; u < LC_UNROLL; ++u) {
                const lc_i64 col = 4 * (base + (lc_i64)u * blockDim.x);
                if (col >= hi) continue;
                lc_hist_add(buf[u].x, col, s, shift, digits, cnt, mass);
                lc_hist_add(buf[u].y, col + 1, s, shift, digits, cnt, mass);
                lc_hist_add(buf[u].z, col + 2, s, shift, digits, cnt, mass);
                lc_hist_add(buf[u].w, col + 3, s, shift, digits, cnt, mass);
            }
        }
    } else {
        for (lc_i64 col = lo + threadIdx.x; col < hi; col += blockDim.x)
            lc_hist_add(xr[col], col, s, shift, digits, cnt, mass);
    }
    __syncthreads();
    lc_u32* hc = hist_count + row * LC_BINS;
    lc_u64* hm = hist_mass + row * LC_BINS;
    for (int i = threadIdx.x; i < LC_BINS; i += blockDim.x) {
        if (cnt[i]) atomicAdd(&hc[i], cnt[i]);
        if (mass[i]) atomicAdd(&hm[i], mass[i]);
    }
}

// One block of 1024 threads per row; thread t owns bins 2t and 2t + 1. Picks the first bin (in
// descending value order) where the running count reaches kk, or the running mass reaches the
// target, narrows the row state to it, and zeroes the histogram for the next pass.
extern "C" __global__ void lc_radix_scan(LcSelect* __restrict__ st, const int pass, lc_u32* __restrict__ hist_count,
                                         lc_u64* __restrict__ hist_mass) {
    __shared__ lc_u64 scratch[33];
    __shared__ int chosen, last_nonempty;
    const lc_i64 row = blockIdx.x;
    LcSelect s = st[row];
    if (!s.active) return;
    const int t = threadIdx.x;
    lc_u32* hc = hist_count + row * LC_BINS;
    lc_u64* hm = hist_mass + row * LC_BINS;
    const lc_u64 c0 = hc[2 * t], c1 = hc[2 * t + 1];
    const lc_u64 m0 = s.mode ? hm[2 * t] : 0ull, m1 = s.mode ? hm[2 * t + 1] : 0ull;
    hc[2 * t] = 0u; hc[2 * t + 1] = 0u;  // each thread clears only the bins it has read
    if (s.mode) { hm[2 * t] = 0ull; hm[2 * t + 1] = 0ull; }
    if (t == 0) { chosen = 0x7fffffff; last_nonempty = -1; }
    lc_u64 c_total, m_total = 0ull;
    const lc_u64 c_incl = lc_block_inclusive_scan<lc_u64>(c0 + c1, scratch, &c_total);
    lc_u64 m_incl = 0ull;
    if (s.mode) m_incl = lc_block_inclusive_scan<lc_u64>(m0 + m1, scratch, &m_total);  // uniform branch
    const lc_u64 c_before = c_incl - (c0 + c1), m_before = m_incl - (m0 + m1);  // integers: exact
    double target = s.target;
    if (s.mode && pass == 0) target = s.target * (double)m_total;  // p * (fixed-point row mass)
    int mine = 0x7fffffff;
    if (s.mode) {
        if (c0 > 0 && (double)(s.mass_above + m_before + m0) >= target) mine = 2 * t;
        else if (c1 > 0 && (double)(s.mass_above + m_before + m0 + m1) >= target) mine = 2 * t + 1;
    } else {
        if ((lc_i64)(c_before + c0) >= s.kk && c0 > 0) mine = 2 * t;
        else if ((lc_i64)(c_before + c0 + c1) >= s.kk && c1 > 0) mine = 2 * t + 1;
    }
    if (c0 + c1 > 0) atomicMax(&last_nonempty, c1 > 0 ? 2 * t + 1 : 2 * t);
    if (mine != 0x7fffffff) atomicMin(&chosen, mine);
    __syncthreads();
    int bin = chosen;
    if (bin == 0x7fffffff) bin = last_nonempty;  // only through rounding of the goal: keep the last bin
    if (bin < 0 || (bin >> 1) != t) return;      // an empty row has nothing to select
    const bool second = bin & 1;
    const lc_u64 cnt_before = c_before + (second ? c0 : 0ull), mass_before = m_before + (second ? m0 : 0ull);
    const lc_u64 cnt_bin = second ? c1 : c0, mass_bin = second ? m1 : m0;
    const int shift = lc_shift(pass);
    s.above += (lc_i64)cnt_before;
    s.kk -= (lc_i64)cnt_before;
    s.mass_above += mass_before;
    if (s.mode && pass == 0) { s.mass_total = m_total; s.target = target; }
    s.prefix |= (lc_u32)bin << shift;
    s.mask |= lc_digits(pass) << shift;
    if (pass == 2) {
        s.value = lc_key_value(s.prefix);
        s.eq = (lc_i64)cnt_bin;
        if (s.mode) {  // equal values have equal masses: the crossing is inside the ties
            const lc_u64 each = mass_bin / cnt_bin;
            const double rest = s.target - (double)s.mass_above;
            lc_i64 k = each ? (lc_i64)ceil(rest / (double)each) : 1;
            s.need = lc_min64(lc_max64(k, 1), s.eq);
        } else {
            s.need = lc_min64(lc_max64(s.kk, 1), s.eq);
        }
    }
    st[row] = s;
}

// grid (ceil(V / LC_CHUNK), B): per-chunk count of the ties at the selected value, only for rows
// whose prefix takes some but not all of them (the only case that needs their ids).
extern "C" __global__ void lc_tie_count(const float* __restrict__ x, const lc_i64 V, const LcSelect* __restrict__ st,
                                        const int n_chunks, lc_u32* __restrict__ chunk_count) {
    __shared__ lc_u32 scratch[32];
    const lc_i64 row = blockIdx.y;
    const LcSelect s = st[row];
    if (!s.active || s.need >= s.eq) return;
    const lc_i64 lo = (lc_i64)blockIdx.x * LC_CHUNK, hi = lc_min64(lo + LC_CHUNK, V);
    const float* xr = x + row * V;
    lc_u32 c = 0u;
    for (lc_i64 col = lo + threadIdx.x; col < hi; col += blockDim.x) c += xr[col] == s.value;
    c = lc_block_sum<lc_u32>(c, scratch);
    if (threadIdx.x == 0) chunk_count[row * n_chunks + blockIdx.x] = c;
}

// One block (LC_THREADS) per row: writes value[b], cut[b] (id of the last kept tie) and n[b]
// (prefix length) for active rows; inactive rows keep what the caller put there.
extern "C" __global__ void lc_tie_cut(const float* __restrict__ x, const lc_i64 V, const LcSelect* __restrict__ st,
                                      const int n_chunks, const lc_u32* __restrict__ chunk_count,
                                      float* __restrict__ value, lc_i64* __restrict__ cut, lc_i64* __restrict__ n) {
    __shared__ lc_i64 chunk, rank, found;
    __shared__ int warp_count[LC_THREADS / 32];
    const lc_i64 row = blockIdx.x;
    const LcSelect s = st[row];
    if (!s.active) return;
    if (s.need >= s.eq) {  // every tie is kept: no id needed beyond the restriction's own
        if (threadIdx.x == 0) {
            value[row] = s.value;
            cut[row] = s.value == s.lo_value ? s.lo_cut : V;
            n[row] = s.above + s.need;
        }
        return;
    }
    if (threadIdx.x == 0) {  // the chunk holding the need-th tie, in id order
        lc_i64 acc = 0, c = 0;
        for (; c < n_chunks - 1; ++c) {
            const lc_i64 k = chunk_count[row * n_chunks + c];
            if (acc + k >= s.need) break;
            acc += k;
        }
        chunk = c; rank = s.need - acc; found = V;
    }
    __syncthreads();
    const lc_i64 lo = chunk * LC_CHUNK, hi = lc_min64(lo + LC_CHUNK, V);
    const float* xr = x + row * V;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    lc_i64 before = 0;  // ties in earlier tiles of this chunk
    for (lc_i64 tile = lo; tile < hi; tile += blockDim.x) {
        const lc_i64 col = tile + threadIdx.x;
        const bool tie = col < hi && xr[col] == s.value;
        const lc_u32 ballot = __ballot_sync(0xffffffffu, tie);
        if (lane == 0) warp_count[warp] = __popc(ballot);
        __syncthreads();
        lc_i64 r = before, tile_total = 0;
        for (int w = 0; w < (int)(blockDim.x >> 5); ++w) {
            if (w < warp) r += warp_count[w];
            tile_total += warp_count[w];
        }
        r += __popc(ballot & ((2u << lane) - 1u));  // 1-based rank of this tie (lanes <= mine)
        if (tie && r == rank) found = col;
        __syncthreads();
        before += tile_total;
        if (found < V || before >= rank) break;  // uniform: shared and block-wide values
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        value[row] = s.value;
        cut[row] = found;
        n[row] = s.above + s.need;
    }
}
