/* gp_shim.cpp — the host launch shim's runtime (libgp_cudashim): "device" memory as
 * separate mappings that host code cannot touch outside launches and copies, kernel
 * launches with each block's threads run as cooperative fibers (ucontext) so that
 * __syncthreads really parks and resumes them, in an order chosen by GP_SHIM_ORDER, and
 * a fault handler that names the kernel, block and thread. CUDA kernel sources executed
 * on the CPU, never a GPU run. Design and knobs: docs/cuda.md. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <map>
#include <vector>

/* gradprec's rounding, included before cuda_runtime.h: here it is the CPU emulation's
 * code (GP_SHIM_CUDA not yet defined), which the shim's intrinsics call. */
#include "../../../kernels/arith/gp_accum.h"

#include "cuda_runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define GP_SHIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GP_SHIM_ASAN 1
#endif
#endif
#ifdef GP_SHIM_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" {
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
const int warpSize = 32;
}

namespace {

const unsigned char FILL_DEVICE = 0xa5; /* fresh cudaMalloc memory: fp32 -2.9e-16, bf16/fp16/fp8 finite */
const unsigned char FILL_SHARED = 0x5a; /* __shared__ arrays before every block */

/* ---- device memory ---- */

struct alloc {
    char *map;          /* the mapping: data pages, then one guard page */
    size_t map_len;
    char *user;         /* what the caller got: the last `rounded` bytes of the data pages */
    size_t size;        /* bytes asked for */
    size_t data_len;    /* bytes of data pages (PROT_NONE outside launches and copies) */
    const char *symbol; /* a __device__ variable's name, else NULL (cudaMalloc) */
    const char *file;
    int line;
};

pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* launches, copies and the registry */
std::map<uintptr_t, alloc> *g_allocs;              /* by user address; never freed (used until exit) */
size_t g_page;
thread_local cudaError_t t_last = cudaSuccess;   /* cudaGetLastError's */
cudaError_t g_sticky = cudaSuccess;              /* a failed kernel poisons the context, as on a GPU */

std::map<uintptr_t, alloc> &allocs()
{
    if (!g_allocs) {
        g_allocs = new std::map<uintptr_t, alloc>;
        g_page = (size_t)sysconf(_SC_PAGESIZE);
    }
    return *g_allocs;
}

void install_handlers();

/* Map `bytes` (aligned to `align`) so that they end where the guard page begins. */
char *map_device(size_t bytes, size_t align, const char *symbol, const char *file, int line, unsigned char fill)
{
    allocs();
    install_handlers();
    size_t rounded = (bytes + align - 1) / align * align;
    size_t data_len = (rounded + g_page - 1) / g_page * g_page;
    if (data_len == 0)
        data_len = g_page;
    void *m = mmap(NULL, data_len + g_page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    alloc a = {(char *)m, data_len + g_page, (char *)m + data_len - rounded, bytes, data_len, symbol, file, line};
    if (fill)
        memset(a.user, fill, rounded);
    mprotect(a.map + data_len, g_page, PROT_NONE);
    mprotect(a.map, data_len, PROT_NONE);
    allocs()[(uintptr_t)a.user] = a;
    return a.user;
}

/* The allocation holding [p, p + n), or NULL. */
alloc *find(const void *p, size_t n)
{
    std::map<uintptr_t, alloc> &m = allocs();
    auto it = m.upper_bound((uintptr_t)p);
    if (it == m.begin())
        return NULL;
    --it;
    alloc &a = it->second;
    uintptr_t u = (uintptr_t)a.user;
    return (uintptr_t)p >= u && (uintptr_t)p - u <= a.size && n <= a.size - ((uintptr_t)p - u) ? &a : NULL;
}

void access_all(int prot)
{
    for (auto &kv : allocs())
        mprotect(kv.second.map, kv.second.data_len, prot);
}

cudaError_t fail(cudaError_t e)
{
    t_last = e;
    return e;
}

/* CUDA's fork rule (CUDA C Programming Guide: a child forked after its parent used CUDA
 * cannot use CUDA): the first runtime call records the process that initialises the
 * runtime; in any other process (a fork() child, which inherits this state without the
 * driver's) every call that needs the device fails with cudaErrorInitializationError,
 * as it does on a GPU. A fresh program (exec) starts with fresh state. What the runtime
 * keeps on the host (the device count, the device ordinal, the last error, the error
 * names) still answers, as the real runtime's inherited state does. */
pid_t g_init_pid; /* 0 until the first call */

bool forked_after_init(void)
{
    pid_t me = getpid();
    pid_t was = __atomic_load_n(&g_init_pid, __ATOMIC_ACQUIRE);
    if (was == 0) {
        pid_t zero = 0;
        if (__atomic_compare_exchange_n(&g_init_pid, &zero, me, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return false;
        was = zero;
    }
    return was != me;
}

/* GP_SHIM_INIT_AT_LOAD=1: the runtime initialises when this library loads, as in a
 * host whose framework used CUDA before anything else (tests of the fork rule). */
__attribute__((constructor)) static void init_at_load(void)
{
    const char *e = getenv("GP_SHIM_INIT_AT_LOAD");
    if (e && strcmp(e, "1") == 0)
        (void)forked_after_init();
}

/* ---- launches ---- */

enum { T_NEW, T_RUNNING, T_PARKED, T_WARP, T_DONE }; /* T_PARKED: at __syncthreads; T_WARP: at a warp-level call */

/* A thread waiting at a warp-level call: what it asked, and where its answer goes. */
struct warp_call {
    int op;            /* GP_SHIM_WARP_* */
    unsigned mask;     /* the lanes that must all take part */
    const void *value; /* the value it offers (shuffles), on its fiber's stack */
    void *result;      /* where the answer goes (on its fiber's stack) */
    unsigned size;     /* bytes of value/result (shuffles: 1 .. 8) */
    int arg;           /* source lane, delta or lane mask (shuffles); the predicate (votes) */
    int width;         /* shuffles: the segment width, a power of two 1 .. 32 */
};

struct fiber {
    ucontext_t ctx;
    char *stack;   /* lowest usable byte (a guard page lies below) */
    size_t size;
    void *fake;    /* ASan's fake stack while switched out */
    int busy;      /* running or holding a parked thread */
};

struct launch {
    int active;
    const char *kernel, *file;
    int line;
    void (*body)(void *);
    void *ctx;
    unsigned nthreads, next, cur;
    std::vector<unsigned char> state;
    std::vector<fiber *> fib_of;
    std::vector<unsigned> order;
    std::vector<warp_call> wcall;
    uint64_t block_gen;
    int failed;
};

launch L;                                   /* the running launch (under g_mu) */
std::vector<fiber *> &g_fibers = *new std::vector<fiber *>; /* the pool, kept for the process (never destroyed) */
ucontext_t g_sched;                         /* the launching thread's context */
#ifdef GP_SHIM_ASAN
const void *g_sched_bottom;                 /* its stack, for ASan */
size_t g_sched_size;
#endif
std::vector<std::pair<void *, uint64_t>> g_shared; /* __shared__ array -> block it was poisoned for */
uint64_t g_launches;

enum order_kind { ORDER_FORWARD, ORDER_REVERSE, ORDER_SHUFFLE };
order_kind g_order = ORDER_FORWARD;
uint64_t g_order_seed;
size_t g_stack_bytes = (size_t)256 << 10;
int g_tight;      /* GP_SHIM_TIGHT=1: cudaMalloc memory ends exactly at its guard page */

uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* 0 .. n-1 in the configured order; salt varies a shuffle between blocks and rounds. */
void make_order(std::vector<unsigned> &o, unsigned n, uint64_t salt)
{
    o.resize(n);
    for (unsigned i = 0; i < n; i++)
        o[i] = g_order == ORDER_REVERSE ? n - 1 - i : i;
    if (g_order == ORDER_SHUFFLE) {
        uint64_t x = g_order_seed ^ (salt * 0xd1b54a32d192ed03ull);
        for (unsigned i = n; i > 1; i--) {
            unsigned j = (unsigned)(splitmix(&x) % i);
            unsigned t = o[i - 1];
            o[i - 1] = o[j];
            o[j] = t;
        }
    }
}

const char *order_name(void)
{
    static char buf[48];
    if (g_order == ORDER_SHUFFLE)
        snprintf(buf, sizeof buf, "shuffle:%llu", (unsigned long long)g_order_seed);
    return g_order == ORDER_FORWARD ? "forward" : g_order == ORDER_REVERSE ? "reverse" : buf;
}

/* GP_SHIM_ORDER = forward | reverse | shuffle[:SEED]; GP_SHIM_STACK_KIB = fiber stack size.
 * A bad value is a usage error: one line, exit 2. */
void read_config(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    const char *o = getenv("GP_SHIM_ORDER");
    if (o && *o) {
        char *end = NULL;
        if (strcmp(o, "forward") == 0)
            g_order = ORDER_FORWARD;
        else if (strcmp(o, "reverse") == 0)
            g_order = ORDER_REVERSE;
        else if (strcmp(o, "shuffle") == 0)
            g_order = ORDER_SHUFFLE, g_order_seed = 1;
        else if (strncmp(o, "shuffle:", 8) == 0 && o[8] && (g_order_seed = strtoull(o + 8, &end, 10), !*end))
            g_order = ORDER_SHUFFLE;
        else {
            fprintf(stderr, "GP_SHIM_ORDER=%s: expected forward, reverse or shuffle:SEED\n", o);
            exit(2);
        }
    }
    const char *tight = getenv("GP_SHIM_TIGHT");
    if (tight && *tight) {
        if (strcmp(tight, "0") != 0 && strcmp(tight, "1") != 0) {
            fprintf(stderr, "GP_SHIM_TIGHT=%s: expected 0 or 1\n", tight);
            exit(2);
        }
        g_tight = tight[0] == '1';
    }
    const char *k = getenv("GP_SHIM_STACK_KIB");
    if (k && *k) {
        char *end = NULL;
        unsigned long v = strtoul(k, &end, 10);
        if (*end || v < 16 || v > 65536) {
            fprintf(stderr, "GP_SHIM_STACK_KIB=%s: expected 16 .. 65536\n", k);
            exit(2);
        }
        g_stack_bytes = (size_t)v << 10;
    }
}

void set_thread(unsigned t)
{
    threadIdx.x = t % blockDim.x;
    threadIdx.y = t / blockDim.x % blockDim.y;
    threadIdx.z = t / (blockDim.x * blockDim.y);
    L.cur = t;
}

/* Switch from the scheduler into f / from f back to the scheduler (ASan told both ways). */
void enter(fiber *f)
{
#ifdef GP_SHIM_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, f->stack, f->size);
    swapcontext(&g_sched, &f->ctx);
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
    swapcontext(&g_sched, &f->ctx);
#endif
}

void leave(fiber *f)
{
#ifdef GP_SHIM_ASAN
    __sanitizer_start_switch_fiber(&f->fake, g_sched_bottom, g_sched_size);
    swapcontext(&f->ctx, &g_sched);
    __sanitizer_finish_switch_fiber(f->fake, &g_sched_bottom, &g_sched_size);
#else
    swapcontext(&f->ctx, &g_sched);
#endif
}

fiber *g_starting; /* the fiber being entered for the first time */

/* A fiber's life: run the block's threads not yet started, one after the other (a thread
 * that parks at a barrier keeps this fiber; the scheduler starts another for the rest);
 * when none is left, go idle until the scheduler needs it again. */
void fiber_main(void)
{
    fiber *f = g_starting;
#ifdef GP_SHIM_ASAN
    __sanitizer_finish_switch_fiber(NULL, &g_sched_bottom, &g_sched_size);
#endif
    for (;;) {
        while (L.next < L.nthreads && !L.failed) {
            unsigned t = L.order[L.next++];
            L.fib_of[t] = f;
            L.state[t] = T_RUNNING;
            set_thread(t);
            L.body(L.ctx);
            L.state[t] = T_DONE;
        }
        f->busy = 0;
        leave(f);
    }
}

/* Out of line: getcontext returns twice, which the caller's locals need not know about. */
__attribute__((noinline)) void make_fiber_context(fiber *f)
{
    getcontext(&f->ctx);
    f->ctx.uc_stack.ss_sp = f->stack;
    f->ctx.uc_stack.ss_size = f->size;
    f->ctx.uc_link = NULL;
    makecontext(&f->ctx, fiber_main, 0);
}

fiber *idle_fiber(void)
{
    for (fiber *idle : g_fibers)
        if (!idle->busy)
            return idle;
    fiber *f = new fiber();
    size_t guard = g_page;
    char *m = (char *)mmap(NULL, g_stack_bytes + guard, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == (char *)MAP_FAILED) {
        fprintf(stderr, "gp_shim: cannot map a fiber stack of %zu bytes\n", g_stack_bytes);
        abort();
    }
    mprotect(m, guard, PROT_NONE);
    f->stack = m + guard;
    f->size = g_stack_bytes;
    make_fiber_context(f);
    g_fibers.push_back(f);
    g_starting = f;
    return f;
}

/* Warp w's lanes are the block's linear threads 32w .. 32w + 31 (fewer in a last partial
 * warp). A warp-level call completes when every lane named in its mask waits at a call
 * with the same operation and mask — like a barrier of those lanes: all answers are
 * computed from the offered values before any lane resumes. Marks the lanes answered in
 * ready[]. Returns the number answered, or -1 with a message (a lane of the mask exited,
 * waits at __syncthreads or at a different warp-level call, or does not exist; the caller
 * is not in its own mask; a shuffle reads a lane outside the mask). */
int resolve_warps(std::vector<unsigned char> &ready)
{
    unsigned n = L.nthreads, answered = 0;
    static const char *const opname[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
                                         "__ballot_sync", "__any_sync", "__all_sync", "__syncwarp"};
    for (unsigned w0 = 0; w0 < n; w0 += 32) {
        unsigned lanes = n - w0 < 32 ? n - w0 : 32;
        for (unsigned l = 0; l < lanes; l++) {
            unsigned t = w0 + l;
            if (L.state[t] != T_WARP || ready[t])
                continue;
            const warp_call &c = L.wcall[t];
            const char *why = NULL;
            unsigned bad = l;
            if (!(c.mask >> l & 1u))
                why = "calls it with a mask that leaves out its own lane";
            for (unsigned k = 0; k < 32 && !why; k++) {
                if (!(c.mask >> k & 1u))
                    continue;
                bad = k;
                if (k >= lanes)
                    why = "names a lane the block does not have";
                else if (L.state[w0 + k] == T_DONE)
                    why = "names a lane that has exited";
                else if (L.state[w0 + k] == T_WARP && (L.wcall[w0 + k].op != c.op || L.wcall[w0 + k].mask != c.mask))
                    why = "names a lane waiting at a different warp-level call (operation or mask)";
            }
            if (why) {
                fprintf(stderr, "gp_shim: kernel %s (launched at %s:%d) block (%u,%u,%u) thread %u: %s(0x%08x, ...) "
                        "%s (lane %u of warp %u)\n", L.kernel, L.file, L.line, blockIdx.x, blockIdx.y, blockIdx.z,
                        t, opname[c.op], c.mask, why, bad, w0 / 32);
                return -1;
            }
            int all_here = 1;
            for (unsigned k = 0; k < lanes; k++)
                if ((c.mask >> k & 1u) && L.state[w0 + k] != T_WARP)
                    all_here = 0; /* some lane still runs toward it, or waits at __syncthreads */
            if (!all_here)
                continue;
            unsigned ballot = 0;
            for (unsigned k = 0; k < lanes; k++)
                if ((c.mask >> k & 1u) && L.wcall[w0 + k].arg)
                    ballot |= 1u << k;
            for (unsigned k = 0; k < lanes; k++) {
                if (!(c.mask >> k & 1u))
                    continue;
                warp_call &me = L.wcall[w0 + k];
                if (c.op <= GP_SHIM_WARP_XOR) {
                    int width = me.width, seg = (int)k & ~(width - 1), src = (int)k;
                    switch (me.op) {
                    case GP_SHIM_WARP_IDX: src = seg + (me.arg & (width - 1)); break;
                    case GP_SHIM_WARP_UP: src = (int)k - me.arg >= seg ? (int)k - me.arg : (int)k; break;
                    case GP_SHIM_WARP_DOWN: src = (int)k + me.arg < seg + width ? (int)k + me.arg : (int)k; break;
                    default: src = ((int)k ^ me.arg) < seg + width ? (int)k ^ me.arg : (int)k; break;
                    }
                    if (src < 0 || src >= 32 || !(c.mask >> src & 1u)) {
                        fprintf(stderr, "gp_shim: kernel %s (launched at %s:%d) block (%u,%u,%u) thread %u: "
                                "%s(0x%08x, ...) reads lane %d, which is not in the mask (warp %u)\n", L.kernel,
                                L.file, L.line, blockIdx.x, blockIdx.y, blockIdx.z, w0 + k, opname[me.op], c.mask,
                                src, w0 / 32);
                        return -1;
                    }
                    memcpy(me.result, L.wcall[w0 + (unsigned)src].value, me.size);
                } else if (c.op != GP_SHIM_WARP_SYNC) {
                    unsigned v = c.op == GP_SHIM_WARP_BALLOT ? ballot
                               : c.op == GP_SHIM_WARP_ANY   ? (unsigned)(ballot != 0)
                                                            : (unsigned)(ballot == c.mask);
                    memcpy(me.result, &v, sizeof v);
                }
                ready[w0 + k] = 1;
                answered++;
            }
        }
    }
    return (int)answered;
}

/* Run one block: every thread to completion, through its barriers. 0, or -1 with a
 * message printed (threads left at a barrier that others never reach). */
int run_block(uint64_t salt)
{
    unsigned n = L.nthreads;
    L.state.assign(n, T_NEW);
    L.fib_of.assign(n, NULL);
    L.wcall.assign(n, warp_call());
    make_order(L.order, n, salt);
    L.next = 0;
    L.block_gen++;
    while (L.next < n) {
        fiber *f = idle_fiber();
        f->busy = 1;
        enter(f);
        g_starting = NULL;
    }
    for (unsigned round = 1;; round++) {
        unsigned parked = 0, done = 0, warp = 0;
        for (unsigned t = 0; t < n; t++) {
            parked += L.state[t] == T_PARKED;
            done += L.state[t] == T_DONE;
            warp += L.state[t] == T_WARP;
        }
        if (parked == 0 && warp == 0)
            return 0;
        std::vector<unsigned> resume;
        make_order(resume, n, salt ^ ((uint64_t)round << 40));
        if (warp) { /* warp-level calls first: a barrier opens only when no warp call is pending */
            std::vector<unsigned char> ready(n, 0);
            int rc = resolve_warps(ready);
            if (rc < 0)
                return -1;
            if (rc == 0) {
                fprintf(stderr, "gp_shim: kernel %s (launched at %s:%d) block (%u,%u,%u): %u threads wait at a "
                        "warp-level call (__shfl_sync, __ballot_sync, ...) that lanes of their mask never reach "
                        "(%u wait at __syncthreads, %u have exited)\n", L.kernel, L.file, L.line, blockIdx.x,
                        blockIdx.y, blockIdx.z, warp, parked, done);
                return -1;
            }
            for (unsigned t : resume)
                if (ready[t]) {
                    L.state[t] = T_RUNNING;
                    set_thread(t);
                    enter(L.fib_of[t]);
                }
            continue;
        }
        if (done) {
            fprintf(stderr, "gp_shim: kernel %s (launched at %s:%d) block (%u,%u,%u): %u threads wait at "
                    "__syncthreads while %u have exited without reaching it\n", L.kernel, L.file, L.line,
                    blockIdx.x, blockIdx.y, blockIdx.z, parked, done);
            return -1;
        }
        for (unsigned t : resume) {
            L.state[t] = T_RUNNING;
            set_thread(t);
            enter(L.fib_of[t]);
        }
    }
}

/* ---- faults ---- */

struct sigaction g_prev_segv, g_prev_bus;

void say(const char *s)
{
    ssize_t r = write(2, s, strlen(s));
    (void)r;
}

/* What the faulting address is, in words. */
void describe(const char *a, char *buf, size_t len)
{
    if (g_allocs)
        for (auto &kv : *g_allocs) {
            const alloc &m = kv.second;
            if (a < m.map || a >= m.map + m.map_len)
                continue;
            char what[200];
            if (m.symbol)
                snprintf(what, sizeof what, "__device__ %s (%zu bytes, %s:%d)", m.symbol, m.size, m.file, m.line);
            else
                snprintf(what, sizeof what, "a device allocation of %zu bytes (cudaMalloc)", m.size);
            if (a >= m.user + m.size)
                snprintf(buf, len, "%zu bytes past the end of %s", (size_t)(a - (m.user + m.size)), what);
            else if (a < m.user)
                snprintf(buf, len, "%zu bytes before the start of %s", (size_t)(m.user - a), what);
            else
                snprintf(buf, len, "byte %zu of %s", (size_t)(a - m.user), what);
            return;
        }
    for (fiber *f : g_fibers)
        if (a >= f->stack - g_page && a < f->stack) {
            snprintf(buf, len, "the guard page of a fiber stack: stack overflow (GP_SHIM_STACK_KIB=%zu)",
                     f->size >> 10);
            return;
        }
    snprintf(buf, len, "no device allocation");
}

void on_fault(int sig, siginfo_t *si, void *uc)
{
    char where[400], msg[900];
    const char *a = (const char *)si->si_addr;
    describe(a, where, sizeof where);
    int device = strcmp(where, "no device allocation") != 0;
    if (L.active) {
        snprintf(msg, sizeof msg, "gp_shim: kernel %s (launched at %s:%d) block (%u,%u,%u) thread (%u,%u,%u): "
                 "invalid access at %p: %s\n", L.kernel, L.file, L.line, blockIdx.x, blockIdx.y, blockIdx.z,
                 threadIdx.x, threadIdx.y, threadIdx.z, (const void *)a, where);
    } else if (device) {
        snprintf(msg, sizeof msg, "gp_shim: host code touched device memory at %p (%s) outside a kernel or a "
                 "cudaMemcpy\n", (const void *)a, where);
    } else {
        struct sigaction *prev = sig == SIGBUS ? &g_prev_bus : &g_prev_segv;
        if (prev->sa_flags & SA_SIGINFO) {
            prev->sa_sigaction(sig, si, uc);
            return;
        }
        if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
            prev->sa_handler(sig);
            return;
        }
        signal(sig, SIG_DFL); /* the fault repeats and ends the process as it would have */
        return;
    }
    say(msg);
    _exit(1);
}

thread_local int t_altstack;

void install_altstack(void)
{
    if (t_altstack)
        return;
    t_altstack = 1;
    stack_t old;
    if (sigaltstack(NULL, &old) == 0 && !(old.ss_flags & SS_DISABLE))
        return; /* one is there already (ASan's) */
    stack_t s;
    s.ss_size = (size_t)1 << 16;
    s.ss_sp = mmap(NULL, s.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    s.ss_flags = 0;
    if (s.ss_sp != MAP_FAILED)
        sigaltstack(&s, NULL);
}

void install_handlers(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &g_prev_segv);
    sigaction(SIGBUS, &sa, &g_prev_bus);
}

struct locked {
    locked() { pthread_mutex_lock(&g_mu); read_config(); }
    ~locked() { pthread_mutex_unlock(&g_mu); }
};

} // namespace

/* ---- the entry points ---- */

extern "C" void gp_shim_run(const char *kernel, const char *file, int line, dim3 grid, dim3 block, size_t shmem,
                            void (*body)(void *), void *ctx)
{
    if (forked_after_init()) {
        fail(cudaErrorInitializationError);
        return;
    }
    locked lk;
    uint64_t threads = (uint64_t)block.x * block.y * block.z;
    if (g_sticky != cudaSuccess) {
        fail(g_sticky);
        return;
    }
    if (!grid.x || !grid.y || !grid.z || !threads || threads > 1024 || block.x > 1024 || block.y > 1024 ||
        block.z > 64 || grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535 || shmem > 0) {
        fail(cudaErrorInvalidConfiguration); /* dynamic shared memory: not provided (docs/cuda.md) */
        return;
    }
    install_handlers();
    install_altstack();
    L.active = 1;
    L.kernel = kernel;
    L.file = file;
    L.line = line;
    L.body = body;
    L.ctx = ctx;
    L.nthreads = (unsigned)threads;
    L.failed = 0;
    blockDim = block;
    gridDim = grid;
    uint64_t nblocks = (uint64_t)grid.x * grid.y * grid.z, launch_no = ++g_launches;
    access_all(PROT_READ | PROT_WRITE);
    int rc = 0;
    std::vector<unsigned> border;
    for (uint64_t k = 0; k < nblocks && rc == 0; k++) {
        uint64_t b = g_order == ORDER_FORWARD ? k : g_order == ORDER_REVERSE ? nblocks - 1 - k : k;
        if (g_order == ORDER_SHUFFLE && nblocks <= 0xffffffffu) {
            if (k == 0)
                make_order(border, (unsigned)nblocks, launch_no);
            b = border[k];
        }
        blockIdx.x = (unsigned)(b % grid.x);
        blockIdx.y = (unsigned)(b / grid.x % grid.y);
        blockIdx.z = (unsigned)(b / ((uint64_t)grid.x * grid.y));
        rc = run_block(launch_no * 0x100000001b3ull + b);
    }
    access_all(PROT_NONE);
    L.active = 0;
    if (rc != 0) {
        g_sticky = cudaErrorLaunchFailure;
        fail(g_sticky);
    }
}

extern "C" void gp_shim_syncthreads(void)
{
    unsigned t = L.cur;
    L.state[t] = T_PARKED;
    leave(L.fib_of[t]);
}

extern "C" void gp_shim_warp(int op, unsigned mask, const void *value, void *result, unsigned size, int arg,
                             int width)
{
    unsigned t = L.cur;
    if (!L.active || size > 8 || width < 1 || width > 32 || (width & (width - 1))) {
        fprintf(stderr, "gp_shim: a warp-level call outside a kernel, of a value over 8 bytes, or with a width "
                "(%d) that is not a power of two 1 .. 32\n", width);
        abort();
    }
    warp_call c = {op, mask, value, result, size, arg, width};
    L.wcall[t] = c;
    L.state[t] = T_WARP;
    leave(L.fib_of[t]);
}

extern "C" float gp_shim_fadd_rz(float a, float b)
{
    return gp_f32_from_bits(gp_accum_step(GP_FP32, GP_ACC_RTZ, 0, gp_f32_bits(a), (uint32_t *)0, b, 0, (unsigned *)0));
}

extern "C" unsigned gp_shim_fmt_from_f32(int format, unsigned f32_bits, int rtz)
{
    return gp_fmt_from_f32_bits((gp_format)format, f32_bits, rtz ? GP_RTZ : GP_RNE, 0, 0, (unsigned *)0);
}

extern "C" unsigned gp_shim_fmt_to_f32(int format, unsigned bits)
{
    return gp_fmt_to_f32_bits((gp_format)format, bits);
}

extern "C" void gp_shim_shared_seen_raw(void *p, size_t bytes)
{
    for (auto &s : g_shared)
        if (s.first == p) {
            if (s.second != L.block_gen) {
                memset(p, FILL_SHARED, bytes);
                s.second = L.block_gen;
            }
            return;
        }
    memset(p, FILL_SHARED, bytes);
    g_shared.push_back(std::make_pair(p, L.block_gen));
}

extern "C" void *gp_shim_symbol_alloc(size_t bytes, size_t align, const char *name, const char *file, int line)
{
    locked lk;
    void *p = map_device(bytes, align, name, file, line, 0); /* zero: static storage */
    if (!p) {
        fprintf(stderr, "gp_shim: cannot map __device__ %s (%zu bytes)\n", name, bytes);
        abort();
    }
    return p;
}

extern "C" cudaError_t gp_shim_symbol_copy(const void *symbol, void *host, size_t count, size_t offset,
                                           int to_symbol)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    locked lk;
    if (g_sticky != cudaSuccess)
        return fail(g_sticky);
    alloc *a = find(symbol, 0);
    if (!a || !a->symbol || a->user != symbol)
        return fail(cudaErrorInvalidSymbol);
    if (offset > a->size || count > a->size - offset)
        return fail(cudaErrorInvalidValue);
    mprotect(a->map, a->data_len, PROT_READ | PROT_WRITE);
    if (to_symbol)
        memcpy(a->user + offset, host, count);
    else
        memcpy(host, a->user + offset, count);
    mprotect(a->map, a->data_len, PROT_NONE);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    locked lk;
    if (!p)
        return fail(cudaErrorInvalidValue);
    if (g_sticky != cudaSuccess)
        return fail(g_sticky);
    *p = NULL;
    if (bytes == 0)
        return cudaSuccess;
    /* cudaMalloc's alignment, 256; GP_SHIM_TIGHT: the largest power of two up to 256 that
     * divides the size, so that the allocation ends where its guard page begins and a
     * read one element past it faults (16-byte vector accesses stay aligned for sizes
     * that are multiples of 16) */
    size_t align = g_tight ? (bytes & (~bytes + 1)) : 256;
    *p = map_device(bytes, align < 256 ? align : 256, NULL, NULL, 0, FILL_DEVICE);
    return *p ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

extern "C" cudaError_t cudaFree(void *p)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    locked lk;
    if (!p)
        return cudaSuccess;
    auto it = allocs().find((uintptr_t)p);
    if (it == allocs().end() || it->second.symbol)
        return fail(cudaErrorInvalidDevicePointer);
    munmap(it->second.map, it->second.map_len);
    allocs().erase(it);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    if (!p)
        return fail(cudaErrorInvalidValue);
    *p = NULL;
    if (posix_memalign(p, 4096, bytes ? bytes : 1) != 0)
        return fail(cudaErrorMemoryAllocation);
    return cudaSuccess;
}

extern "C" cudaError_t cudaFreeHost(void *p)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    free(p);
    return cudaSuccess;
}

/* Copies check, as the GPU runtime does, that the device side lies inside one allocation. */
extern "C" cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    locked lk;
    if (g_sticky != cudaSuccess)
        return fail(g_sticky);
    if (count == 0)
        return cudaSuccess;
    alloc *d = find(dst, count), *s = find(src, count);
    if (kind == cudaMemcpyDefault)
        kind = d ? (s ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice)
                 : (s ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost);
    if (kind > cudaMemcpyDefault)
        return fail(cudaErrorInvalidMemcpyDirection);
    int dd = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    int sd = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if ((dd && !d) || (sd && !s) || (!dd && d) || (!sd && s))
        return fail(cudaErrorInvalidValue);
    if (d)
        mprotect(d->map, d->data_len, PROT_READ | PROT_WRITE);
    if (s)
        mprotect(s->map, s->data_len, PROT_READ | PROT_WRITE);
    memmove(dst, src, count);
    if (d)
        mprotect(d->map, d->data_len, PROT_NONE);
    if (s)
        mprotect(s->map, s->data_len, PROT_NONE);
    return cudaSuccess;
}

extern "C" cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                       cudaStream_t s)
{
    (void)s;
    return cudaMemcpy(dst, src, count, kind);
}

extern "C" cudaError_t cudaMemset(void *p, int value, size_t count)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    locked lk;
    if (g_sticky != cudaSuccess)
        return fail(g_sticky);
    if (count == 0)
        return cudaSuccess;
    alloc *a = find(p, count);
    if (!a)
        return fail(cudaErrorInvalidValue);
    mprotect(a->map, a->data_len, PROT_READ | PROT_WRITE);
    memset(p, value, count);
    mprotect(a->map, a->data_len, PROT_NONE);
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetLastError(void)
{
    cudaError_t e = t_last;
    t_last = cudaSuccess;
    return g_sticky != cudaSuccess ? g_sticky : e;
}

extern "C" cudaError_t cudaPeekAtLastError(void)
{
    return g_sticky != cudaSuccess ? g_sticky : t_last;
}

extern "C" cudaError_t cudaDeviceSynchronize(void)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    return g_sticky; /* launches are synchronous */
}

extern "C" cudaError_t cudaGetDeviceCount(int *n)
{
    (void)forked_after_init(); /* initialises; in a fork child: the inherited answer */
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, [] {
        pthread_mutex_lock(&g_mu);
        read_config();
        pthread_mutex_unlock(&g_mu);
        printf("gp_shim: CUDA kernel sources executed on the CPU through the host shim (thread order %s); "
               "not a GPU run\n", order_name());
        fflush(stdout);
    });
    if (!n)
        return fail(cudaErrorInvalidValue);
    *n = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaGetDevice(int *d)
{
    (void)forked_after_init(); /* initialises; in a fork child: the inherited answer */
    if (!d)
        return fail(cudaErrorInvalidValue);
    *d = 0;
    return cudaSuccess;
}

extern "C" cudaError_t cudaSetDevice(int d)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    return d == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

extern "C" cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int d)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    if (!prop || d != 0)
        return fail(!prop ? cudaErrorInvalidValue : cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "gradprec host shim (CUDA kernel sources on the CPU, not a GPU)");
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
    prop->maxThreadsDim[2] = 64;
    prop->maxGridSize[0] = 0x7fffffff;
    prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    if (!s)
        return fail(cudaErrorInvalidValue);
    *s = NULL; /* one queue: every stream is the default one */
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    (void)s;
    return cudaSuccess;
}

extern "C" cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (forked_after_init())
        return fail(cudaErrorInitializationError);
    (void)s;
    return g_sticky;
}

extern "C" const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidSymbol: return "cudaErrorInvalidSymbol";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

extern "C" const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidSymbol: return "invalid device symbol";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorLaunchFailure: return "unspecified launch failure (host shim: see the message above)";
    }
    return "unknown error";
}
