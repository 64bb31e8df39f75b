// The block scheduler of the emulator (cuda_shim.h): one fiber per thread of a block, run until it
// reaches a barrier or returns; a warp barrier opens when all lanes of the warp are at one, the
// block barrier when every live thread is. A phase in which nothing can open is a deadlock.
// The context switch saves only the callee-saved registers (x86-64 System V); elsewhere
// ucontext does the same, slower.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>

#if defined(__x86_64__)
extern "C" void emu_switch(void** save_sp, void* to_sp);
asm(R"(
.text
.globl emu_switch
.type emu_switch,@function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size emu_switch, .-emu_switch
.section .note.GNU-stack,"",@progbits
.text
)");
#else
#include <ucontext.h>
#endif

namespace emu {
enum State { RUN, AT_WARP, AT_BLOCK, DONE };
constexpr size_t STACK = 64 * 1024;
constexpr int MAX_THREADS = 1024;

struct Fiber {
    State state;
    uint3 idx;
#if defined(__x86_64__)
    void* sp;
#else
    ucontext_t ctx;
#endif
};

static std::vector<Fiber> fibers(MAX_THREADS);
static char* stacks = nullptr;  // MAX_THREADS stacks, committed by the OS as they are touched
static std::vector<uint64_t> slots(MAX_THREADS);
static int current = 0;
static void (*body)(void**) = nullptr;
static void** body_args = nullptr;
#if defined(__x86_64__)
static void* scheduler_sp = nullptr;
#else
static ucontext_t scheduler_ctx;
#endif

void fail(const char* why) {
    if (failure == nullptr) failure = why;
}

static void to_scheduler(State s) {
    Fiber& f = fibers[current];
    f.state = s;
#if defined(__x86_64__)
    emu_switch(&f.sp, scheduler_sp);
#else
    swapcontext(&f.ctx, &scheduler_ctx);
#endif
}

void warp_barrier() { to_scheduler(AT_WARP); }
void block_barrier() { to_scheduler(AT_BLOCK); }
uint64_t* warp_slots() { return &slots[(thread_idx.x >> 5) * 32]; }

static void fiber_main() {
    if (failure == nullptr) body(body_args);
    to_scheduler(DONE);
    __builtin_trap();  // a finished fiber is never resumed
}

static void start(int i) {
    char* top = stacks + (size_t)(i + 1) * STACK;
#if defined(__x86_64__)
    void** sp = reinterpret_cast<void**>(top);
    *--sp = nullptr;                                           // fiber_main's return address (never used)
    *--sp = reinterpret_cast<void*>(&fiber_main);              // where emu_switch's ret lands
    for (int r = 0; r < 6; ++r) *--sp = nullptr;               // rbp rbx r12 r13 r14 r15
    fibers[i].sp = sp;
#else
    getcontext(&fibers[i].ctx);
    fibers[i].ctx.uc_stack.ss_sp = top - STACK;
    fibers[i].ctx.uc_stack.ss_size = STACK;
    fibers[i].ctx.uc_link = nullptr;
    makecontext(&fibers[i].ctx, fiber_main, 0);
#endif
    fibers[i].state = RUN;
}

static void resume(int i) {
    current = i;
    thread_idx = fibers[i].idx;
#if defined(__x86_64__)
    emu_switch(&scheduler_sp, fibers[i].sp);
#else
    swapcontext(&scheduler_ctx, &fibers[i].ctx);
#endif
}

// Runs one block to the end; false (with `failure` set) on a deadlock.
static bool run_block(int n, std::mt19937_64& rng) {
    std::vector<int> order(n);
    for (int i = 0; i < n; ++i) order[i] = i;
    for (int i = 0; i < n; ++i) {
        fibers[i].idx = uint3{(unsigned)(i % block_dim.x), (unsigned)((i / block_dim.x) % block_dim.y),
                              (unsigned)(i / (block_dim.x * block_dim.y))};
        start(i);
    }
    const int warps = (n + 31) / 32;
    std::shuffle(order.begin(), order.end(), rng);  // the block's threads run each phase in a drawn order
    for (;;) {
        bool ran = false;
        for (int i : order)
            if (fibers[i].state == RUN) {
                resume(i);
                ran = true;
            }
        if (ran) continue;
        bool opened = false;
        for (int w = 0; w < warps; ++w) {
            int at = 0, done = 0, lanes = std::min(32, n - 32 * w);
            for (int l = 0; l < lanes; ++l) {
                at += fibers[32 * w + l].state == AT_WARP;
                done += fibers[32 * w + l].state == DONE;
            }
            if (at == lanes) {
                for (int l = 0; l < lanes; ++l) fibers[32 * w + l].state = RUN;
                opened = true;
            } else if (at > 0 && at + done == lanes) {
                fail("a warp shuffle in a warp some of whose lanes have returned");
                return false;
            }
        }
        if (opened) continue;
        int live = 0, at_block = 0;
        for (int i = 0; i < n; ++i) {
            live += fibers[i].state != DONE;
            at_block += fibers[i].state == AT_BLOCK;
        }
        if (live == 0) return true;
        if (at_block == live) {
            for (int i = 0; i < n; ++i)
                if (fibers[i].state == AT_BLOCK) fibers[i].state = RUN;
            continue;
        }
        fail("deadlock: some threads wait at __syncthreads while others wait at a warp shuffle");
        return false;
    }
}
}  // namespace emu

// Runs kernel `fn` over the grid, blocks in an order drawn from `seed`. Returns nullptr, or why
// the launch is wrong (the first failure stops it).
extern "C" const char* emu_run(void (*fn)(void**), void** args, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                               unsigned by, unsigned bz, unsigned long long seed) {
    using namespace emu;
    failure = nullptr;
    const long n = (long)bx * by * bz;
    if (n < 1 || n > MAX_THREADS) return "a block of more than 1024 threads (or none)";
    if (stacks == nullptr) stacks = static_cast<char*>(aligned_alloc(64, (size_t)MAX_THREADS * STACK));
    if (stacks == nullptr) return "no memory for the fibers' stacks";
    body = fn;
    body_args = args;
    block_dim = dim3{bx, by, bz};
    grid_dim = dim3{gx, gy, gz};
    std::vector<uint3> blocks;
    for (unsigned z = 0; z < gz; ++z)
        for (unsigned y = 0; y < gy; ++y)
            for (unsigned x = 0; x < gx; ++x) blocks.push_back(uint3{x, y, z});
    std::mt19937_64 rng(seed);
    std::shuffle(blocks.begin(), blocks.end(), rng);  // blocks in a drawn order: none may assume another ran first
    for (const uint3& b : blocks) {
        block_idx = b;
        if (!run_block((int)n, rng) || failure != nullptr) return failure;
    }
    return nullptr;
}
