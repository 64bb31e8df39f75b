// top_k -> top_p -> min_p -> temp on a top-W window: the first W elements of the row (found by
// the radix select) are gathered, block-sorted in shared memory and scanned there; only the
// rows the window cannot decide go on to the row-wide searches (lc_chain_finish).

// grid (blocks_per_row, B): the window of the rows whose select left it pending (a prefix that
// splits its ties is known only once the select has finished; lc_radix_finish gathers the others):
// appends the row's prefix (c, cut), which holds exactly min(n_win, V) elements, to win[b].
extern "C" __global__ void lc_window_gather(const float* __restrict__ x, const lc_i64 V, const float* __restrict__ c,
                                            const lc_i64* __restrict__ cut, const lc_i64 span,
                                            const int* __restrict__ pending, lc_u64* __restrict__ win,
                                            int* __restrict__ fill) {
    const lc_i64 row = blockIdx.y, lo = (lc_i64)blockIdx.x * span, hi = lc_min64(lo + span, V);
    if (!pending[row]) return;
    const float* xr = x + row * V;
    lc_gather_span(xr, lo, hi, lc_vec_ok(xr, V) && (span & 3) == 0, c[row], cut[row], win + row * LC_WIN,
                   &fill[row]);
}

// One block of LC_WIN threads per row. Parameters per row: n_k (top_k's prefix, V when off),
// p / mk_p (top_p, off at p >= 1), mp / mk_m (min_p, off at mp <= 0), first_only (temp t <= 0).
// Writes the survivors' prefix as (c, cut) with status 0, or leaves the row to lc_chain_finish:
// status 1 = top_p's crossing lies past the window, 2 = min_p's count does, 3 = the prefix is
// known (n_out) but longer than the window. part: lc_row_stats partials (used when n_k > W).
// y_max: the row max of the chain's output (the kept logits divided by t_div when use_t).
extern "C" __global__ void lc_window_cut(const lc_u64* __restrict__ win, const int* __restrict__ fill, const lc_i64 V,
                                         const float2* __restrict__ part, const int n_chunks,
                                         const lc_i64* __restrict__ n_k, const float* __restrict__ p,
                                         const lc_i64* __restrict__ mk_p, const float* __restrict__ mp,
                                         const lc_i64* __restrict__ mk_m, const int* __restrict__ first_only,
                                         float* __restrict__ c, lc_i64* __restrict__ cut, lc_i64* __restrict__ n_out,
                                         int* __restrict__ status, float* __restrict__ thr,
                                         int* __restrict__ act_mass, int* __restrict__ act_ge,
                                         const float* __restrict__ t_div, const int use_t, float* __restrict__ y_max) {
    __shared__ lc_u64 key[LC_WIN];
    __shared__ float prob[LC_WIN];
    __shared__ float scratch[32];
    __shared__ float ms[2];
    const lc_i64 row = blockIdx.x;
    const int t = threadIdx.x;
    const int L = (int)lc_min64(fill[row], lc_min64(V, LC_WIN));  // elements in the window
    key[t] = t < L ? win[row * LC_WIN + t] : ~0ull;
    __syncthreads();
    for (int k = 2; k <= LC_WIN; k <<= 1)  // bitonic sort, ascending key = the row's order
        for (int j = k >> 1; j > 0; j >>= 1) {
            const int o = t ^ j;
            if (o > t) {
                const lc_u64 a = key[t], b = key[o];
                if ((a > b) == ((t & k) == 0)) { key[t] = b; key[o] = a; }
            }
            __syncthreads();
        }
    const lc_i64 nk = lc_min64(lc_max64(n_k[row], 1), V);
    const float top = lc_key_value((lc_u32)(key[0] >> 32));  // the row max
    const bool whole = nk <= L;  // the window holds every survivor of top_k
    // top_p's normaliser: the survivors' own sum when they fit, else the row's (top_k off)
    const float my = (t < L && t < nk) ? lc_key_value((lc_u32)(key[t] >> 32)) : LC_NEG_INF;
    const float e = (top == LC_NEG_INF || my == LC_NEG_INF) ? 0.0f : expf(my - top);
    float s = lc_block_sum(e, scratch);
    if (!whole) {
        if (t < 32) lc_combine_partials(part + row * n_chunks, n_chunks, &ms[0], &ms[1]);
        __syncthreads();
        s = ms[1];  // relative to the row max, which is `top`
    }
    prob[t] = e / s;
    __syncthreads();
    if (t != 0) return;

    float val_last = L > 0 ? lc_key_value((lc_u32)(key[L - 1] >> 32)) : LC_NEG_INF;
    const bool all_finite_in = L == V || val_last == LC_NEG_INF;  // no finite logit outside
    int st = 0;
    lc_i64 n = nk;
    const float pp = p[row];
    if (top == LC_NEG_INF) {
        n = V;  // no finite logit: every filter keeps the (all -inf) row
    } else if (pp < 1.0f) {
        if (!whole && !all_finite_in) {
            st = 1;  // maybe decided inside the window, but the survivors' mass is not all here
        }
        float cum = 0.0f;  // float32 running sum in the row's order, as llama.cpp accumulates
        lc_i64 first = -1;
        const int lim = (int)lc_min64(nk, L);
        for (int i = 0; i < lim; ++i) {
            cum += prob[i];
            if (cum >= pp) { first = i; break; }
        }
        if (first >= 0) {
            st = 0;
            n = lc_min64(lc_max64(first + 1, mk_p[row]), V);
        } else if (whole || all_finite_in) {
            n = nk;  // every candidate is in the window and the sum never reached p: keep all
        } else {
            st = 1;
        }
    }
    float th = LC_NEG_INF;
    const float mpp = mp[row];
    if (st == 0 && top != LC_NEG_INF && mpp > 0.0f) {
        th = top + logf(mpp);
        const lc_i64 need = lc_min64(lc_max64(mk_m[row], 1), V);
        lc_i64 ge = 0;
        const int lim = (int)lc_min64(n, L);
        while (ge < lim && lc_key_value((lc_u32)(key[ge] >> 32)) >= th) ++ge;
        if (ge == lim && n > L) st = 2;  // survivors >= thr may continue past the window
        else n = lc_min64(n, ge >= need ? ge : need);
    } else if (st == 1 && mpp > 0.0f) {
        th = top + logf(mpp);
    }
    if (st == 0 && first_only[row]) n = 1;
    if (st == 0 && n > L) st = 3;
    if (st == 0) {
        const lc_u64 k_n = key[n - 1];
        c[row] = lc_key_value((lc_u32)(k_n >> 32));
        cut[row] = (lc_i64)(k_n & 0xffffffffull);
    }
    if (top == LC_NEG_INF) { c[row] = LC_NEG_INF; cut[row] = V; st = 0; }
    // the output's row max: the first element is always kept, and x / t is monotone in x (the
    // same division as lc_mask_prefix, so the same bits), which spares dist a pass over the row
    y_max[row] = (top == LC_NEG_INF || !use_t) ? top : top / t_div[row];
    n_out[row] = n;
    status[row] = st;
    thr[row] = th;
    act_mass[row] = st == 1;
    act_ge[row] = (st == 1 || st == 2) && mpp > 0.0f;
}

// One thread per row, for rows the window left open (status != 0): their prefix length from the
// row-wide mass select (status 1) and min_p count (count_ge). Where that prefix is the mass
// crossing itself, or exactly the logits >= min_p's threshold, its (c, cut) is known and written to
// keep; the other rows are marked in act_sel for one more select of their n_sel-th element.
extern "C" __global__ void lc_chain_finish(const int B, const lc_i64 V, const int* __restrict__ status,
                                           const lc_i64* __restrict__ n_out, const float* __restrict__ mass_c,
                                           const lc_i64* __restrict__ mass_cut, const lc_i64* __restrict__ mass_n,
                                           const lc_i64* __restrict__ mk_p, const float* __restrict__ mp,
                                           const lc_i64* __restrict__ mk_m,
                                           const unsigned long long* __restrict__ count_ge,
                                           const float* __restrict__ thr, const int* __restrict__ first_only,
                                           float* __restrict__ keep_c, lc_i64* __restrict__ keep_cut,
                                           lc_i64* __restrict__ n_sel, int* __restrict__ act_sel) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const int st = status[b];
    act_sel[b] = 0;
    if (st == 0) { n_sel[b] = n_out[b]; return; }  // keep was written by lc_window_cut
    lc_i64 n = n_out[b], ge = -1;
    if (st == 1) n = lc_min64(lc_max64(mass_n[b], mk_p[b]), V);
    if ((st == 1 || st == 2) && mp[b] > 0.0f) {
        const lc_i64 need = lc_min64(lc_max64(mk_m[b], 1), V);
        ge = (lc_i64)count_ge[b];
        n = lc_min64(n, ge >= need ? ge : need);
    }
    if (first_only[b]) n = 1;
    n_sel[b] = n;
    if (st == 1 && n == mass_n[b]) {  // the prefix is the crossing
        keep_c[b] = mass_c[b];
        keep_cut[b] = mass_cut[b];
    } else if (n == ge) {  // the first ge elements are exactly those >= thr
        keep_c[b] = thr[b];
        keep_cut[b] = V;
    } else {
        act_sel[b] = 1;
    }
}

// One thread per row, after top_p's row-wide mass crossing (rows with p >= 1 or no finite logit
// got the whole row): the crossing is the prefix where it holds min_keep; shorter rows are marked
// in act_sel for one more select of their min(min_keep, V)-th element.
extern "C" __global__ void lc_top_p_finish(const int B, const lc_i64 V, const lc_i64* __restrict__ mass_n,
                                           const lc_i64* __restrict__ min_keep, lc_i64* __restrict__ n_sel,
                                           int* __restrict__ act_sel) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const lc_i64 n = lc_min64(lc_max64(mass_n[b], min_keep[b]), V);
    n_sel[b] = n;
    act_sel[b] = n != mass_n[b];
}
