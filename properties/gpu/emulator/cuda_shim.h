// The CUDA built-ins gpu_impl's kernels use, in standard C++, so that the kernels' own text runs
// on a CPU: every thread of a block is a fiber of one OS thread, switched at each barrier
// (__syncthreads, and every warp shuffle, which is a barrier of the warp's 32 lanes); blocks run
// one at a time, in an order drawn from the launch's seed, so `__shared__` is a function-local
// static. What this can find: wrong results, a barrier or shuffle some threads never reach (a
// deadlock in CUDA, reported here), a shuffle in a warp with exited lanes, a scalar argument
// of the wrong width. What it cannot: data races inside a barrier phase (threads of a phase run
// one after another), the device's own rounding (fused multiply-add, expf's ulps), and speed.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <vector>

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x, y, z; };
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
static inline float2 make_float2(float a, float b) { return float2{a, b}; }
static inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
struct __attribute__((aligned(16))) ulonglong2 { unsigned long long x, y; };
static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return uint4{a, b, c, d}; }
static inline ulonglong2 make_ulonglong2(unsigned long long a, unsigned long long b) { return ulonglong2{a, b}; }

namespace emu {
uint3 thread_idx, block_idx;
dim3 block_dim, grid_dim;
const char* failure = nullptr;  // set when a launch is wrong; the launch then stops
void warp_barrier();
void block_barrier();
uint64_t* warp_slots();
void fail(const char* why);
}  // namespace emu

#define threadIdx emu::thread_idx
#define blockIdx emu::block_idx
#define blockDim emu::block_dim
#define gridDim emu::grid_dim
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

static inline void __syncthreads() { emu::block_barrier(); }
static inline void __threadfence() {}
template <typename T> static inline T __ldcg(const T* p) { return *p; }

static inline unsigned __float_as_uint(float v) { unsigned u; memcpy(&u, &v, 4); return u; }
static inline int __float_as_int(float v) { int u; memcpy(&u, &v, 4); return u; }
static inline float __uint_as_float(unsigned u) { float v; memcpy(&v, &u, 4); return v; }
static inline float __int_as_float(int u) { float v; memcpy(&v, &u, 4); return v; }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline unsigned long long __float2ull_rn(float v) {
    return v <= 0.0f ? 0ull : (unsigned long long)nearbyint((double)v);  // ties to even
}

// Shuffles: each lane posts its value in the warp's slots, the warp meets, each lane reads its
// source lane's, the warp meets again before the slots are reused. Only full masks are used.
template <typename T> static inline T emu_exchange(unsigned mask, T v, int src, bool keep_own) {
    static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
    if (mask != 0xffffffffu) emu::fail("a shuffle with a partial mask (the emulator takes full warps only)");
    uint64_t* slot = emu::warp_slots();
    const int lane = threadIdx.x & 31;
    memcpy(&slot[lane], &v, sizeof(T));
    emu::warp_barrier();
    T r = v;
    if (!keep_own) memcpy(&r, &slot[src], sizeof(T));
    emu::warp_barrier();
    return r;
}
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int o) {
    return emu_exchange(mask, v, (threadIdx.x & 31) ^ (o & 31), false);
}
template <typename T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d) {
    const int src = (int)(threadIdx.x & 31) - (int)d;
    return emu_exchange(mask, v, src < 0 ? 0 : src, src < 0);
}
template <typename T> static inline T __shfl_sync(unsigned mask, T v, int src) {
    return emu_exchange(mask, v, src & 31, false);
}
static inline unsigned __ballot_sync(unsigned mask, int pred) {
    uint64_t* slot = emu::warp_slots();
    if (mask != 0xffffffffu) emu::fail("a ballot with a partial mask (the emulator takes full warps only)");
    slot[threadIdx.x & 31] = pred != 0;
    emu::warp_barrier();
    unsigned bits = 0;
    for (int l = 0; l < 32; ++l) bits |= (unsigned)(slot[l] & 1) << l;
    emu::warp_barrier();
    return bits;
}

// Atomics: threads of a phase run one at a time, so a read-modify-write is atomic as it is.
template <typename T, typename U> static inline T atomicAdd(T* a, U v) { const T o = *a; *a = o + (T)v; return o; }
template <typename T, typename U> static inline T atomicMax(T* a, U v) { const T o = *a; *a = o < (T)v ? (T)v : o; return o; }
template <typename T, typename U> static inline T atomicMin(T* a, U v) { const T o = *a; *a = (T)v < o ? (T)v : o; return o; }
template <typename T, typename U> static inline T atomicOr(T* a, U v) { const T o = *a; *a = o | (T)v; return o; }
