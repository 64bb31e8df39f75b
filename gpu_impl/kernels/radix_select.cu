// The n-th element of each row in (descending value, ascending id) order, without sorting: a
// radix select on the float bits (lc_desc_key), 11 + 11 + 10 bits in three passes, then the id of
// the last tie the prefix keeps. Two goals: by count (top_k's k-th largest) or by mass (top_p's
// crossing: the first prefix whose probability mass reaches p). Histograms are integer (counts,
// and masses in fixed point), so the result is exact and independent of the blocks per row.
//
// Four launches over the same grid (blocks_per_row, B): lc_radix_pass for pass 0, 1, 2, then
// lc_radix_finish. Each spreads a row over many blocks (the host picks the split, see span() in
// _build.py); the last block of a row to finish a pass chooses the bin for the whole row
// (lc_last_of_row), so no separate scan launch is needed. A row that does not run returns at once
// in every kernel, so the sequence is launched for a whole batch with no host decision.

#define LC_BINS 2048
#define LC_BINS_PER_THREAD (LC_BINS / LC_THREADS)
#define LC_FX_ONE_F 1099511627776.0f  // 2^40: fixed-point unit of exp(x - max) in [0, 1]; V < 2^24
#define LC_NONE 0x7fffffff

// flags of a select (mirrored in select.py)
#define LC_SEL_MASS 1       // the goal is a mass (p[b] of the row's mass, relative to row_max[b]), not a count n[b]
#define LC_SEL_ACTIVE 2     // only rows with active[b] != 0 run (else every row)
#define LC_SEL_LO 4         // count only inside the earlier prefix (lo_value[b], lo_cut[b])
#define LC_SEL_N_RANGE 8    // a row runs only if 0 < n[b] < V (top_k's k: else the filter is off)
#define LC_SEL_WRITE_ALL 16 // rows that do not run get the whole row as their prefix (else stay as they are)
#define LC_SEL_GATHER 32    // lc_radix_finish also gathers each row's prefix into its window (lc_gather_span)

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

// The workspace of a select over B rows split in `per_row` blocks, in this order (select.py's
// select_ws_bytes mirrors it): LcSelect st[B]; u64 hist_mass[B][BINS]; u32 hist_count[B][BINS];
// u32 done[B][4]; u32 ties[B][per_row]. The host zeroes it once; every select leaves histograms
// and counters zero again, so one workspace serves any number of selects in a stream.
struct LcSelectWs {
    LcSelect* st;
    lc_u64* hist_mass;
    lc_u32* hist_count;
    unsigned int* done;
    lc_u32* ties;
};

__device__ __forceinline__ LcSelectWs lc_select_ws(unsigned char* ws, lc_i64 B) {
    LcSelectWs w;
    w.st = reinterpret_cast<LcSelect*>(ws);
    w.hist_mass = reinterpret_cast<lc_u64*>(ws + B * sizeof(LcSelect));
    w.hist_count = reinterpret_cast<lc_u32*>(w.hist_mass + B * LC_BINS);
    w.done = reinterpret_cast<unsigned int*>(w.hist_count + B * LC_BINS);
    w.ties = reinterpret_cast<lc_u32*>(w.done + B * 4);
    return w;
}

__device__ __forceinline__ int lc_shift(int pass) { return pass == 0 ? 21 : (pass == 1 ? 10 : 0); }
__device__ __forceinline__ lc_u32 lc_digits(int pass) { return pass == 2 ? 0x3ffu : 0x7ffu; }

// A row's state before pass 0, from the call's per-row arguments (read only where flags say).
__device__ LcSelect lc_select_start(lc_i64 b, lc_i64 V, int flags, const lc_i64* n, const float* p,
                                    const float* row_max, const int* active, const float* lo_value,
                                    const lc_i64* lo_cut) {
    LcSelect s;
    const int mode = (flags & LC_SEL_MASS) ? 1 : 0;
    const lc_i64 nb = mode ? 1 : n[b];
    s.kk = lc_min64(lc_max64(nb, 1), V);
    s.above = 0; s.eq = 0; s.need = 0; s.mass_above = 0; s.mass_total = 0;
    s.target = mode ? (double)p[b] : 0.0;
    s.lo_cut = (flags & LC_SEL_LO) ? lo_cut[b] : V;
    s.prefix = 0u; s.mask = 0u;
    s.mode = mode;
    s.row_max = mode ? row_max[b] : 0.0f;
    int run = (flags & LC_SEL_ACTIVE) ? active[b] != 0 : 1;
    if (flags & LC_SEL_N_RANGE) run = run && nb > 0 && nb < V;
    s.active = run && (mode == 0 || s.row_max > LC_NEG_INF);  // no finite logit: no mass
    s.value = LC_NEG_INF;
    s.lo_value = (flags & LC_SEL_LO) ? lo_value[b] : LC_NEG_INF;
    s.pad = 0;
    return s;
}

#define LC_UNROLL 4

// One logit into the block's histogram. The fixed-point mass is e * 2^40 rounded (exact scaling
// in float, then one rounding to an integer < 2^40), added as two 32-bit words: a 64-bit shared
// atomicAdd is a compare-and-swap loop on this hardware, a 32-bit one is native. The low word's
// wrap is seen by the one add that causes it, which carries into the high word: the sum is exact.
__device__ __forceinline__ void lc_hist_add(float v, lc_i64 col, const LcSelect& s, int shift, lc_u32 digits,
                                            lc_u32* cnt, lc_u32* mass_lo, lc_u32* mass_hi) {
    if (!lc_in_prefix(v, col, s.lo_value, s.lo_cut)) return;
    const lc_u32 key = lc_desc_key(v);
    if ((key & s.mask) != s.prefix) return;
    const lc_u32 d = (key >> shift) & digits;
    atomicAdd(&cnt[d], 1u);
    if (s.mode) {
        const lc_u64 fx = __float2ull_rn(expf(v - s.row_max) * LC_FX_ONE_F);
        const lc_u32 lo = (lc_u32)fx, hi = (lc_u32)(fx >> 32);
        const lc_u32 before = lo ? atomicAdd(&mass_lo[d], lo) : 0u;
        const lc_u32 carry = hi + (before + lo < before ? 1u : 0u);
        if (carry) atomicAdd(&mass_hi[d], carry);
    }
}

// Run by the last block of a row after a pass (LC_THREADS threads, LC_BINS_PER_THREAD consecutive
// bins each) on the row's histogram, copied into the block's own shared arrays: picks the first
// bin, in descending value order, where the running count reaches kk or the running mass reaches
// the target, narrows the state to it and writes it to *out. Sums are integers, so every split of
// the row gives the same bin.
__device__ void lc_radix_choose(LcSelect s, const int pass, const lc_u32* cnt, const lc_u64* mass,
                                LcSelect* __restrict__ out) {
    __shared__ lc_u64 scratch[33];
    __shared__ int chosen, last_nonempty;
    const int t = threadIdx.x, first = t * LC_BINS_PER_THREAD;
    if (t == 0) { chosen = LC_NONE; last_nonempty = -1; }
    lc_u64 c_mine = 0ull, m_mine = 0ull;
    for (int j = first; j < first + LC_BINS_PER_THREAD; ++j) {
        c_mine += cnt[j];
        if (s.mode) m_mine += mass[j];
    }
    lc_u64 c_total, m_total = 0ull;
    const lc_u64 c_incl = lc_block_inclusive_scan<lc_u64>(c_mine, scratch, &c_total);
    lc_u64 m_incl = 0ull;
    if (s.mode) m_incl = lc_block_inclusive_scan<lc_u64>(m_mine, scratch, &m_total);  // uniform branch
    double target = s.target;
    if (s.mode && pass == 0) target = s.target * (double)m_total;  // p * (fixed-point row mass)
    int mine = LC_NONE, my_last = -1;
    lc_u64 c_run = c_incl - c_mine, m_run = m_incl - m_mine;  // integers: exact
    for (int j = first; j < first + LC_BINS_PER_THREAD; ++j) {
        const lc_u64 cj = cnt[j], mj = s.mode ? mass[j] : 0ull;
        if (cj > 0) {
            my_last = j;
            const bool hit = s.mode ? (double)(s.mass_above + m_run + mj) >= target : (lc_i64)(c_run + cj) >= s.kk;
            if (hit && mine == LC_NONE) mine = j;
        }
        c_run += cj;
        m_run += mj;
    }
    if (my_last >= 0) atomicMax(&last_nonempty, my_last);
    if (mine != LC_NONE) atomicMin(&chosen, mine);
    __syncthreads();
    int bin = chosen;
    if (bin == LC_NONE) bin = last_nonempty;  // only through rounding of the goal: keep the last bin
    if (bin < 0) {                            // an empty row has nothing to select
        if (t == 0) *out = s;
        return;
    }
    if (bin / LC_BINS_PER_THREAD != t) return;
    lc_u64 cnt_before = c_incl - c_mine, mass_before = m_incl - m_mine;
    for (int j = first; j < bin; ++j) {
        cnt_before += cnt[j];
        if (s.mode) mass_before += mass[j];
    }
    const lc_u64 cnt_bin = cnt[bin], mass_bin = s.mode ? mass[bin] : 0ull;
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
    *out = s;
}

// grid (blocks_per_row, B), LC_THREADS threads; block x covers columns [x * span, (x + 1) * span).
// One digit pass: the block's histogram in shared memory, added to the row's; the row's last
// block then chooses the bin. Pass 0 reads the call's arguments, later passes the row state.
// (launch bounds: 48 registers, 5 blocks per SM, no spills; 6 would spill)
extern "C" __global__ void __launch_bounds__(LC_THREADS, 5)
lc_radix_pass(const float* __restrict__ x, const lc_i64 V, const lc_i64 span, const int pass, const int flags,
              const lc_i64* __restrict__ n, const float* __restrict__ p, const float* __restrict__ row_max,
              const int* __restrict__ active, const float* __restrict__ lo_value, const lc_i64* __restrict__ lo_cut,
              unsigned char* __restrict__ ws) {
    __shared__ __align__(16) lc_u32 cnt[LC_BINS];  // 16-byte copies of the row's histogram land here
    __shared__ __align__(16) lc_u64 mass[LC_BINS];
    __shared__ int last;
    const lc_i64 row = blockIdx.y;
    const LcSelectWs w = lc_select_ws(ws, gridDim.y);
    const LcSelect s = pass == 0 ? lc_select_start(row, V, flags, n, p, row_max, active, lo_value, lo_cut) : w.st[row];
    if (!s.active) {  // uniform for the block
        if (pass == 0 && blockIdx.x == 0 && threadIdx.x == 0) w.st[row] = s;
        return;
    }
    lc_u32* mass_lo = reinterpret_cast<lc_u32*>(mass);  // the block's mass as two words per bin
    lc_u32* mass_hi = mass_lo + LC_BINS;
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
                lc_hist_add(buf[u].x, col, s, shift, digits, cnt, mass_lo, mass_hi);
                lc_hist_add(buf[u].y, col + 1, s, shift, digits, cnt, mass_lo, mass_hi);
                lc_hist_add(buf[u].z, col + 2, s, shift, digits, cnt, mass_lo, mass_hi);
                lc_hist_add(buf[u].w, col + 3, s, shift, digits, cnt, mass_lo, mass_hi);
            }
        }
    } else {
        for (lc_i64 col = lo + threadIdx.x; col < hi; col += blockDim.x)
            lc_hist_add(xr[col], col, s, shift, digits, cnt, mass_lo, mass_hi);
    }
    __syncthreads();
    lc_u32* hc = w.hist_count + row * LC_BINS;
    lc_u64* hm = w.hist_mass + row * LC_BINS;
    for (int i = threadIdx.x; i < LC_BINS; i += blockDim.x) {
        if (cnt[i]) atomicAdd(&hc[i], cnt[i]);
        const lc_u64 m = ((lc_u64)mass_hi[i] << 32) | mass_lo[i];
        if (m) atomicAdd(&hm[i], m);
    }
    if (!lc_last_of_row(&w.done[row * 4 + pass], &last)) return;
    // the last block: the row's histogram into this block's shared arrays and cleared for the next
    // pass, 16-byte loads all in flight before the first use (the row waits on this block alone)
    {
        uint4 c4[LC_BINS / 4 / LC_THREADS];
#pragma unroll
        for (int k = 0; k < LC_BINS / 4 / LC_THREADS; ++k)
            c4[k] = __ldcg(reinterpret_cast<const uint4*>(hc) + threadIdx.x + k * LC_THREADS);
        if (s.mode) {
            ulonglong2 m2[LC_BINS / 2 / LC_THREADS];
#pragma unroll
            for (int k = 0; k < LC_BINS / 2 / LC_THREADS; ++k)
                m2[k] = __ldcg(reinterpret_cast<const ulonglong2*>(hm) + threadIdx.x + k * LC_THREADS);
#pragma unroll
            for (int k = 0; k < LC_BINS / 2 / LC_THREADS; ++k) {
                reinterpret_cast<ulonglong2*>(mass)[threadIdx.x + k * LC_THREADS] = m2[k];
                reinterpret_cast<ulonglong2*>(hm)[threadIdx.x + k * LC_THREADS] = make_ulonglong2(0ull, 0ull);
            }
        }
#pragma unroll
        for (int k = 0; k < LC_BINS / 4 / LC_THREADS; ++k) {
            reinterpret_cast<uint4*>(cnt)[threadIdx.x + k * LC_THREADS] = c4[k];
            reinterpret_cast<uint4*>(hc)[threadIdx.x + k * LC_THREADS] = make_uint4(0u, 0u, 0u, 0u);
        }
    }
    __syncthreads();
    lc_radix_choose(s, pass, cnt, mass, &w.st[row]);
}

// Same grid: writes value[b], cut[b] (id of the last kept tie) and n[b] (prefix length) for rows
// that ran (and, with LC_SEL_WRITE_ALL, the whole row for those that did not). Only a row whose
// prefix takes some but not all of its ties needs their ids: each block counts the ties in its
// span, and the row's last block finds the span holding the need-th one and scans it.
// With LC_SEL_GATHER (the chain's window), the rows whose prefix is known here are also gathered
// into win/fill by every block of the row; pending[b] = 1 marks the others for lc_window_gather.
extern "C" __global__ void lc_radix_finish(const float* __restrict__ x, const lc_i64 V, const lc_i64 span,
                                           const int flags, unsigned char* __restrict__ ws, float* __restrict__ value,
                                           lc_i64* __restrict__ cut, lc_i64* __restrict__ n, lc_u64* __restrict__ win,
                                           int* __restrict__ fill, int* __restrict__ pending) {
    __shared__ lc_u32 scratch[32];
    __shared__ int last;
    __shared__ lc_i64 blk, rank, found;
    __shared__ int warp_count[LC_THREADS / 32];
    const lc_i64 row = blockIdx.y;
    const LcSelectWs w = lc_select_ws(ws, gridDim.y);
    const LcSelect s = w.st[row];
    const bool lead = blockIdx.x == 0 && threadIdx.x == 0, gather = flags & LC_SEL_GATHER;
    const float* xr = x + row * V;
    if (!s.active) {
        if ((flags & LC_SEL_WRITE_ALL) && lead) { value[row] = LC_NEG_INF; cut[row] = V; n[row] = V; }
        if (gather && lead) pending[row] = 1;
        return;
    }
    if (s.need >= s.eq) {  // every tie is kept: no id needed beyond the restriction's own
        const lc_i64 ct = s.value == s.lo_value ? s.lo_cut : V;
        if (lead) {
            value[row] = s.value;
            cut[row] = ct;
            n[row] = s.above + s.need;
            if (gather) pending[row] = 0;
        }
        if (gather) {
            const lc_i64 lo = (lc_i64)blockIdx.x * span, hi = lc_min64(lo + span, V);
            lc_gather_span(xr, lo, hi, lc_vec_ok(xr, V) && (span & 3) == 0, s.value, ct, win + row * LC_WIN,
                           &fill[row]);
        }
        return;
    }
    {
        const lc_i64 lo = (lc_i64)blockIdx.x * span, hi = lc_min64(lo + span, V);
        lc_u32 c = 0u;
        for (lc_i64 col = lo + threadIdx.x; col < hi; col += blockDim.x) c += xr[col] == s.value;
        c = lc_block_sum<lc_u32>(c, scratch);
        if (threadIdx.x == 0) w.ties[row * gridDim.x + blockIdx.x] = c;
    }
    if (!lc_last_of_row(&w.done[row * 4 + 3], &last)) return;
    if (threadIdx.x == 0) {  // the span holding the need-th tie, in id order
        lc_i64 acc = 0, k = 0;
        for (; k < (lc_i64)gridDim.x - 1; ++k) {
            const lc_i64 q = __ldcg(&w.ties[row * gridDim.x + k]);
            if (acc + q >= s.need) break;
            acc += q;
        }
        blk = k; rank = s.need - acc; found = V;
    }
    __syncthreads();
    const lc_i64 lo = blk * span, hi = lc_min64(lo + span, V);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    lc_i64 before = 0;  // ties in earlier tiles of this span
    for (lc_i64 tile = lo; tile < hi; tile += blockDim.x) {
        const lc_i64 col = tile + threadIdx.x;
        const bool tie = col < hi && xr[col] == s.value;
        const lc_u32 ballot = __ballot_sync(0xffffffffu, tie);
        if (lane == 0) warp_count[warp] = __popc(ballot);
        __syncthreads();
        lc_i64 r = before, tile_total = 0;
        for (int q = 0; q < (int)(blockDim.x >> 5); ++q) {
            if (q < warp) r += warp_count[q];
            tile_total += warp_count[q];
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
        if (gather) pending[row] = 1;
    }
}
