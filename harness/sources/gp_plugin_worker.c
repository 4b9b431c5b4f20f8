/* gp_plugin_worker.c — see gp_plugin_worker.h.
 *
 * Protocol on a stream socket pair. Request: {fn, count}, then count argument structs
 * as the caller passed them, then every array the call reads (described by `describe`,
 * in its order). The worker points the structs' array fields at its own copies (each
 * 64-byte aligned), calls the plugin, and answers {rc}, the structs (for unscale's
 * found_inf and grad_sumsq's sumsq), then every array the call may write. The proxy
 * copies only the out fields and the written arrays back into the caller's memory. */
#define _GNU_SOURCE /* strsignal */
#include "gp_plugin_worker.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../kernels/arith/gp_format.h"
#include "../../kernels/cuda/gp_cuda.h"
#include "gp_deadline.h"
#include "gp_plugin_table.h"

enum { FN_ACC, FN_MANY, FN_UNSCALE, FN_ADAMW, FN_SUMSQ, FN_SCALE, FN_SCALER, FN_N };
static const char *const fn_names[FN_N] = {"accumulate", "accumulate_many", "unscale", "adamw",
                                           "grad_sumsq", "grad_scale", "scaler_update"};
#define LOAD_TIMEOUT_S 60.0 /* a worker gets this long to start serving without --max-seconds */
#define MAX_ARRAYS (3 * GP_PLUGIN_MANY_MAX)

/* ---- what each call reads and writes ---- */

typedef struct {
    void **slot;  /* the array field inside an argument struct */
    size_t bytes; /* its length */
    int out;      /* the call may write it */
} array_ref;

static size_t args_size(int fn)
{
    switch (fn) {
    case FN_ACC:
    case FN_MANY: return sizeof(gp_plugin_accumulate_args);
    case FN_UNSCALE: return sizeof(gp_plugin_unscale_args);
    case FN_ADAMW: return sizeof(gp_plugin_adamw_args);
    case FN_SUMSQ: return sizeof(gp_plugin_sumsq_args);
    case FN_SCALE: return sizeof(gp_plugin_scale_args);
    default: return sizeof(gp_plugin_scaler_args);
    }
}

/* Bytes of n elements of a plugin format; 0 for a format that does not exist. */
static size_t bytes_of(int32_t f, uint64_t n)
{
    if (f < 0 || f >= GP_NFORMATS || n > ((uint64_t)1 << 40))
        return 0;
    return (size_t)n * (size_t)(gp_fmt_get((gp_format)f).width / 8);
}

#define REF(field, len, w) (r[k++] = (array_ref){(void **)&(field), (len), (w)})

/* The arrays of one call (args: count structs of fn's type), in protocol order. */
static size_t describe(int fn, void *args, uint32_t count, array_ref *r)
{
    size_t k = 0;
    if (fn == FN_ACC || fn == FN_MANY) {
        gp_plugin_accumulate_args *a = args;
        for (uint32_t j = 0; j < count; j++) {
            size_t ab = bytes_of(a[j].acc_format, a[j].n);
            REF(a[j].grad, bytes_of(a[j].grad_format, a[j].n), 0);
            REF(a[j].acc, ab, 1);
            REF(a[j].comp, ab, 1);
        }
    } else if (fn == FN_UNSCALE) {
        gp_plugin_unscale_args *a = args;
        REF(a->acc, bytes_of(a->acc_format, a->n), 1);
    } else if (fn == FN_ADAMW) {
        gp_plugin_adamw_args *a = args;
        size_t pb = bytes_of(a->param_format, a->n), sb = bytes_of(a->state_format, a->n);
        REF(a->grad, bytes_of(a->grad_format, a->n), 0);
        REF(a->found_inf, sizeof(int32_t), 0);
        REF(a->param, pb, 1);
        REF(a->master, bytes_of(GP_PLUGIN_FP32, a->n), 1);
        REF(a->comp, pb, 1);
        REF(a->m, sb, 1);
        REF(a->v, sb, 1);
        if (a->struct_size >= sizeof *a && a->state_quant != GP_PLUGIN_STATE_PLAIN && a->block > 0) {
            size_t nc = a->n <= ((uint64_t)1 << 40) ? (size_t)a->n : 0, ns = nc / (size_t)a->block * sizeof(float);
            REF(a->m_codes, nc, 1);
            REF(a->v_codes, nc, 1);
            REF(a->m_scales, ns, 1);
            REF(a->v_scales, ns, 1);
        }
    } else if (fn == FN_SUMSQ) {
        gp_plugin_sumsq_args *a = args;
        REF(a->grad, bytes_of(a->format, a->n), 0);
    } else if (fn == FN_SCALE) {
        gp_plugin_scale_args *a = args;
        REF(a->grad, bytes_of(a->format, a->n), 1);
    } else {
        gp_plugin_scaler_args *a = args;
        REF(a->found_inf, sizeof(int32_t), 0);
        REF(a->scale, sizeof(float), 1);
        REF(a->tracker, sizeof(int32_t), 1);
    }
    return k;
}

typedef struct {
    uint32_t fn, count;
} request;

typedef struct {
    int32_t ok;                  /* 1: loaded; 0: refused (why says why) */
    uint32_t abi;                /* the plugin's abi_version */
    uint32_t has[FN_N];          /* which entries the plugin has */
    char name[128];
    char why[512];
} hello;

/* ---- I/O ---- */

/* Move len bytes over fd (writing when wr), waiting no longer than until `until`
 * (CLOCK_MONOTONIC seconds; 0: forever). 0; -1 end of file or error; -2 timeout. */
static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int io(int fd, void *buf, size_t len, int wr, double until)
{
    char *p = buf;
    while (len > 0) {
        if (until > 0) {
            double left = until - mono();
            if (left <= 0)
                return -2;
            struct pollfd pf = {fd, (short)(wr ? POLLOUT : POLLIN), 0};
            int ms = left > 1e6 ? 1000000000 : (int)(left * 1000.0) + 1;
            int pr = poll(&pf, 1, ms);
            if (pr < 0 && errno == EINTR)
                continue;
            if (pr < 0)
                return -1;
            if (pr == 0)
                continue; /* re-check the clock */
        }
        ssize_t k = wr ? send(fd, p, len, MSG_NOSIGNAL | (until > 0 ? MSG_DONTWAIT : 0))
                       : recv(fd, p, len, until > 0 ? MSG_DONTWAIT : 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (k <= 0)
            return -1;
        p += k;
        len -= (size_t)k;
    }
    return 0;
}

/* ---- the worker process ---- */

/* dlopen, entry point and ABI checks (the messages gp_backend_open documents). */
static const gp_plugin *load(const char *path, gp_plugin *table, char *why, size_t whylen)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *hint = strchr(path, '/') ? "" : "; a name without '/' is searched in the library path: "
                                                    "for a file in the current folder write plugin:./";
        snprintf(why, whylen, "cannot load: %s%s%s", dlerror(), hint, *hint ? path : "");
        return NULL;
    }
    gp_plugin_entry_fn entry;
    void *sym = dlsym(dl, GP_PLUGIN_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry); /* object -> function pointer, POSIX-sanctioned */
    const gp_plugin *p = sym ? entry() : NULL;
    if (!sym)
        snprintf(why, whylen, "does not export the symbol " GP_PLUGIN_ENTRY_SYMBOL);
    else if (!p)
        snprintf(why, whylen, GP_PLUGIN_ENTRY_SYMBOL "() returned NULL");
    else {
        const gp_plugin *ops = gp_plugin_table_adopt(p, table, why, whylen);
        if (ops)
            return ops;
    }
    dlclose(dl);
    return NULL;
}

static int serve_call(const gp_plugin *p, int fn, void *args, uint32_t count)
{
    switch (fn) {
    case FN_ACC: return p->accumulate(args);
    case FN_MANY: return p->accumulate_many(args, count);
    case FN_UNSCALE: return p->unscale(args);
    case FN_ADAMW: return p->adamw(args);
    case FN_SUMSQ: return p->grad_sumsq(args);
    case FN_SCALE: return p->grad_scale(args);
    default: return p->scaler_update(args);
    }
}

/* The answer code of a call whose function failed and left a message in the serving
 * process's fault buffer (gp_worker_serve): the message follows, 512 bytes. */
#define RAISED_RC ((int32_t)0x7fff0bad)
#define RAISED_LEN 512
/* The answer code of a call refused (code 1) with a reason in the fault buffer: the
 * reason follows, RAISED_LEN bytes, then the call's arguments as for code 1. */
#define REFUSED_RC ((int32_t)0x7fff0bae)

int gp_worker_serve(int fd, const gp_plugin *p, const char *refusal, char *fault, size_t faultlen)
{
    hello h;
    gp_plugin table;
    memset(&h, 0, sizeof h);
    if (p && !(p = gp_plugin_table_adopt(p, &table, h.why, sizeof h.why)))
        p = NULL;
    else if (!p)
        snprintf(h.why, sizeof h.why, "%s", refusal ? refusal : "no table");
    if (p) {
        h.ok = 1;
        h.abi = table.abi_version;
        snprintf(h.name, sizeof h.name, "%s", table.name ? table.name : "unnamed");
        const void *fns[FN_N] = {(void *)p->accumulate, (void *)p->accumulate_many, (void *)p->unscale,
                                 (void *)p->adamw, (void *)p->grad_sumsq, (void *)p->grad_scale,
                                 (void *)p->scaler_update};
        for (int k = 0; k < FN_N; k++)
            h.has[k] = fns[k] != NULL;
    }
    if (io(fd, &h, sizeof h, 1, 0) != 0 || !p)
        return -1;
    char *buf = NULL;
    size_t cap = 0;
    int ret = -1;
    array_ref *r = malloc(MAX_ARRAYS * sizeof *r);
    for (;;) {
        _Alignas(16) char args[GP_PLUGIN_MANY_MAX * sizeof(gp_plugin_accumulate_args)];
        request q;
        int e = r ? io(fd, &q, sizeof q, 0, 0) : -1;
        if (e != 0) {
            ret = 0; /* the parent closed the connection: done */
            break;
        }
        if (q.fn >= FN_N || !h.has[q.fn] || q.count < 1 || q.count > GP_PLUGIN_MANY_MAX ||
            (q.fn != FN_MANY && q.count != 1))
            break;
        size_t as = args_size((int)q.fn) * q.count, need = as;
        if (io(fd, args, as, 0, 0) != 0)
            break;
        size_t nr = describe((int)q.fn, args, q.count, r);
        for (size_t k = 0; k < nr; k++)
            if (*r[k].slot)
                need += r[k].bytes + 64;
        if (need > cap) {
            free(buf);
            cap = need + need / 2;
            if (!(buf = aligned_alloc(64, (cap + 63) / 64 * 64)))
                break;
        }
        size_t off = 0, k;
        for (k = 0; k < nr; k++) {
            if (!*r[k].slot)
                continue;
            *r[k].slot = buf + off;
            if (io(fd, buf + off, r[k].bytes, 0, 0) != 0)
                break;
            off += (r[k].bytes + 63) / 64 * 64;
        }
        if (k < nr)
            break;
        if (fault && faultlen)
            fault[0] = '\0';
        int32_t rc = serve_call(p, (int)q.fn, args, q.count);
        if (rc != 0 && fault && faultlen && fault[0]) { /* a message: the fault, or the refusal's reason */
            char msg[RAISED_LEN];
            memset(msg, 0, sizeof msg);
            snprintf(msg, sizeof msg, "%.*s", (int)(faultlen < RAISED_LEN ? faultlen : RAISED_LEN - 1), fault);
            int32_t code = rc == 1 ? REFUSED_RC : RAISED_RC;
            if (io(fd, &code, sizeof code, 1, 0) != 0 || io(fd, msg, sizeof msg, 1, 0) != 0)
                break;
            if (rc != 1) /* the fault: instead of the arrays */
                continue;
            if (io(fd, &rc, sizeof rc, 1, 0) != 0) /* then the refusal as any code 1 */
                break;
        } else if (io(fd, &rc, sizeof rc, 1, 0) != 0) {
            break;
        }
        if (io(fd, args, as, 1, 0) != 0)
            break;
        for (k = 0; k < nr; k++)
            if (*r[k].slot && r[k].out && io(fd, *r[k].slot, r[k].bytes, 1, 0) != 0)
                break;
        if (k < nr)
            break;
    }
    free(buf);
    free(r);
    return ret;
}

/* The program a device-memory plugin's worker execs (gp_worker_set_program): argv[0]
 * is the file, then the leading arguments; NULL-terminated; empty while none is set. */
#define EXEC_MAX 8
static char *g_exec[EXEC_MAX + 1];
static pthread_mutex_t g_exec_mu = PTHREAD_MUTEX_INITIALIZER;

int gp_worker_set_program(const char *const *argv)
{
    size_t n = 0;
    while (argv && argv[n])
        n++;
    if (n > EXEC_MAX)
        return -1;
    char *copy[EXEC_MAX + 1] = {NULL};
    for (size_t k = 0; k < n; k++)
        if (!(copy[k] = strdup(argv[k]))) {
            for (size_t j = 0; j < k; j++)
                free(copy[j]);
            return -1;
        }
    pthread_mutex_lock(&g_exec_mu);
    for (size_t k = 0; k < EXEC_MAX; k++) {
        free(g_exec[k]);
        g_exec[k] = copy[k];
    }
    pthread_mutex_unlock(&g_exec_mu);
    return 0;
}

/* This process becomes argv's program (argv[0] searched in PATH), serving over the
 * inherited socket fd; when it cannot be started, the refusal names `what` and why. */
static void exec_worker(int fd, char *const *argv, const char *what)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0)
        fcntl(fd, F_SETFD, fl & ~FD_CLOEXEC);
    execvp(argv[0], argv);
    hello h;
    memset(&h, 0, sizeof h);
    snprintf(h.why, sizeof h.why, "cannot run %s '%s': %s", what, argv[0], strerror(errno));
    io(fd, &h, sizeof h, 1, 0);
    _exit(0);
}

/* A plugin's worker: load it and serve it. exec_argv (forked workers only; NULL when no
 * program is set): a device-memory plugin is served by that program instead, a fresh
 * process image that initialises CUDA itself (CUDA cannot be used in a child forked
 * after its parent used CUDA). Before serving a device-memory plugin the worker checks
 * that CUDA works here, so that this fails as one line when the plugin is opened
 * rather than as a failed call later. Returns the exit status gp_worker_main documents. */
static int worker_main(int fd, const char *path, int forked, char *const *exec_argv)
{
    gp_plugin table;
    char why[512] = "", cuda[256] = "";
    const gp_plugin *p = load(path, &table, why, sizeof why);
    if (p && table.memory == GP_PLUGIN_DEVICE && exec_argv)
        exec_worker(fd, exec_argv, "the program that serves device-memory plugins");
    int ce = p && table.memory == GP_PLUGIN_DEVICE ? gp_cuda_probe(cuda, sizeof cuda) : 0;
    if (ce != 0) {
        if (forked && ce == GP_CUDA_INIT_ERROR)
            snprintf(why, sizeof why,
                     "CUDA cannot be initialised in the plugin's worker process (%.120s): CUDA was initialised in "
                     "this process before the plugin's worker was forked; open the plugin before the first CUDA "
                     "call, or register a program that serves it afresh (gradprec_set_worker_program; the gradprec "
                     "command and the Python package do)", cuda);
        else
            snprintf(why, sizeof why, "CUDA cannot be used in the plugin's worker process: %.300s", cuda);
        p = NULL; /* the process ends after the refusal: nothing to close */
    }
    int rc = gp_worker_serve(fd, p, why, NULL, 0);
    return rc == 0 ? 0 : p ? 3 : 2;
}

int gp_worker_main(int fd, const char *path)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0)
        return 2;
    fcntl(fd, F_SETFD, fl | FD_CLOEXEC);
    return worker_main(fd, path, 0, NULL);
}

/* A python: backend's worker: this process becomes the Python interpreter ($GP_PYTHON,
 * else python3 on PATH) running gradprec._serve, which imports MODULE, makes NAME's
 * backend object and serves it through gradprec_serve on the inherited socket fd. When
 * the interpreter cannot be started, the refusal says so. */
static void exec_python(int fd, const char *spec)
{
    const char *py = getenv("GP_PYTHON");
    if (!py || !*py)
        py = "python3";
    char fdarg[24];
    snprintf(fdarg, sizeof fdarg, "%d", fd);
    char *argv[] = {(char *)py, "-m", "gradprec._serve", (char *)spec, fdarg, NULL};
    exec_worker(fd, argv, "the Python interpreter ($GP_PYTHON, else python3)");
}

/* ---- the parent's side ---- */

struct gp_worker {
    pid_t pid;
    int fd;
    int slot;
    char path[4096];
    char fault[512];   /* "" while healthy */
    pthread_mutex_t mu;
    gp_plugin table;   /* the proxy table */
};

#define SLOTS 16
static gp_worker *g_slot[SLOTS];
static pthread_mutex_t g_slots_mu = PTHREAD_MUTEX_INITIALIZER;

/* How messages name what a worker serves: "plugin PATH", or "backend python:M:N". */
static const char *kind_of(const char *path)
{
    return strncmp(path, "python:", 7) == 0 ? "backend" : "plugin";
}

/* Wait up to `grace` seconds for the worker to end, then kill it; its wait status. */
static pid_t reap(pid_t pid, double grace, int *st)
{
    double until = mono() + grace;
    pid_t r;
    while ((r = waitpid(pid, st, WNOHANG)) == 0 && mono() < until) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    if (r == 0) {
        kill(pid, SIGKILL);
        r = waitpid(pid, st, 0);
    }
    return r;
}

/* The worker is gone or stuck: reap it and say how, naming the entry point. Returns the
 * worker's exit status when it exited, else -1. */
static int set_fault(gp_worker *w, const char *fn, int timed_out)
{
    int st = 0;
    pid_t r = reap(w->pid, timed_out ? 0.0 : 2.0, &st);
    w->pid = 0;
    char how[200];
    if (timed_out && gp_deadline_limit() > 0)
        snprintf(how, sizeof how, "did not return within the time limit of %g s (--max-seconds); the worker was killed",
                 gp_deadline_limit());
    else if (timed_out)
        snprintf(how, sizeof how, "did not return within %g s (the limit on starting a worker when no --max-seconds "
                 "is given); the worker was killed", LOAD_TIMEOUT_S);
    else if (r > 0 && WIFSIGNALED(st))
        snprintf(how, sizeof how, "crashed (signal %d, %s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (r > 0 && WIFEXITED(st))
        snprintf(how, sizeof how, "ended the process (exit status %d) instead of returning", WEXITSTATUS(st));
    else
        snprintf(how, sizeof how, "lost its worker process");
    snprintf(w->fault, sizeof w->fault, "%s %.200s: %.100s: %.200s", kind_of(w->path), w->path, fn, how);
    return !timed_out && r > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static double until_of_call(void)
{
    double left = gp_deadline_left();
    return left > 1e20 ? 0 : mono() + (left > 0 ? left : 0);
}

static _Thread_local char g_refusal[RAISED_LEN]; /* gp_worker_refusal */

const char *gp_worker_refusal(void)
{
    return g_refusal[0] ? g_refusal : NULL;
}

static int call(gp_worker *w, int fn, void *args, uint32_t count)
{
    array_ref r[MAX_ARRAYS];
    void *orig[MAX_ARRAYS];
    if (count < 1 || count > GP_PLUGIN_MANY_MAX)
        return -1;
    pthread_mutex_lock(&w->mu);
    if (w->fault[0]) {
        pthread_mutex_unlock(&w->mu);
        return GP_WORKER_FAULT;
    }
    double until = until_of_call();
    size_t as = args_size(fn) * count;
    _Alignas(16) char back[GP_PLUGIN_MANY_MAX * sizeof(gp_plugin_accumulate_args)];
    memcpy(back, args, as);
    size_t nr = describe(fn, back, count, r);
    request q = {(uint32_t)fn, count};
    int e = io(w->fd, &q, sizeof q, 1, until);
    if (e == 0)
        e = io(w->fd, args, as, 1, until);
    for (size_t k = 0; k < nr && e == 0; k++)
        if (*r[k].slot)
            e = io(w->fd, *r[k].slot, r[k].bytes, 1, until);
    int32_t rc = 0;
    for (size_t k = 0; k < nr; k++)
        orig[k] = *r[k].slot;
    if (e == 0)
        e = io(w->fd, &rc, sizeof rc, 0, until);
    g_refusal[0] = '\0';
    if (e == 0 && rc == REFUSED_RC) { /* refused, saying why; the code 1 follows */
        char msg[RAISED_LEN];
        if ((e = io(w->fd, msg, sizeof msg, 0, until)) == 0) {
            msg[sizeof msg - 1] = '\0';
            snprintf(g_refusal, sizeof g_refusal, "%s", msg);
            e = io(w->fd, &rc, sizeof rc, 0, until);
        }
    }
    if (e == 0 && rc == RAISED_RC) { /* the function failed and said why: that line is the fault */
        char msg[RAISED_LEN];
        if ((e = io(w->fd, msg, sizeof msg, 0, until)) == 0) {
            msg[sizeof msg - 1] = '\0';
            snprintf(w->fault, sizeof w->fault, "%s", msg);
            pthread_mutex_unlock(&w->mu);
            return GP_WORKER_FAULT;
        }
    }
    if (e == 0)
        e = io(w->fd, back, as, 0, until);
    for (size_t k = 0; k < nr && e == 0; k++)
        if (orig[k] && r[k].out)
            e = io(w->fd, orig[k], r[k].bytes, 0, until);
    if (e != 0) {
        set_fault(w, fn_names[fn], e == -2);
        pthread_mutex_unlock(&w->mu);
        return GP_WORKER_FAULT;
    }
    if (fn == FN_UNSCALE)
        ((gp_plugin_unscale_args *)args)->found_inf = ((gp_plugin_unscale_args *)back)->found_inf;
    else if (fn == FN_SUMSQ)
        ((gp_plugin_sumsq_args *)args)->sumsq = ((gp_plugin_sumsq_args *)back)->sumsq;
    pthread_mutex_unlock(&w->mu);
    return rc;
}

/* The proxy entry points of slot K (the ABI passes no context pointer). */
#define SLOT_FNS(K)                                                                                               \
    static int acc_##K(const gp_plugin_accumulate_args *a) { return call(g_slot[K], FN_ACC, (void *)a, 1); }        \
    static int many_##K(const gp_plugin_accumulate_args *a, uint32_t c)                                            \
    {                                                                                                              \
        return call(g_slot[K], FN_MANY, (void *)a, c);                                                             \
    }                                                                                                              \
    static int uns_##K(gp_plugin_unscale_args *a) { return call(g_slot[K], FN_UNSCALE, a, 1); }                     \
    static int adam_##K(const gp_plugin_adamw_args *a) { return call(g_slot[K], FN_ADAMW, (void *)a, 1); }         \
    static int ssq_##K(gp_plugin_sumsq_args *a) { return call(g_slot[K], FN_SUMSQ, a, 1); }                         \
    static int gsc_##K(const gp_plugin_scale_args *a) { return call(g_slot[K], FN_SCALE, (void *)a, 1); }          \
    static int upd_##K(const gp_plugin_scaler_args *a) { return call(g_slot[K], FN_SCALER, (void *)a, 1); }
SLOT_FNS(0) SLOT_FNS(1) SLOT_FNS(2) SLOT_FNS(3) SLOT_FNS(4) SLOT_FNS(5) SLOT_FNS(6) SLOT_FNS(7)
SLOT_FNS(8) SLOT_FNS(9) SLOT_FNS(10) SLOT_FNS(11) SLOT_FNS(12) SLOT_FNS(13) SLOT_FNS(14) SLOT_FNS(15)
#define SLOT_TABLE(K) {0, NULL, GP_PLUGIN_HOST, acc_##K, uns_##K, adam_##K, ssq_##K, gsc_##K, upd_##K, many_##K}
static const gp_plugin g_proxy[SLOTS] = {SLOT_TABLE(0),  SLOT_TABLE(1),  SLOT_TABLE(2),  SLOT_TABLE(3),
                                         SLOT_TABLE(4),  SLOT_TABLE(5),  SLOT_TABLE(6),  SLOT_TABLE(7),
                                         SLOT_TABLE(8),  SLOT_TABLE(9),  SLOT_TABLE(10), SLOT_TABLE(11),
                                         SLOT_TABLE(12), SLOT_TABLE(13), SLOT_TABLE(14), SLOT_TABLE(15)};

int gp_worker_open(const char *path, gp_worker **wp, const gp_plugin **ops, char *name, size_t namelen,
                   gp_error *err)
{
    *wp = NULL;
    gp_worker *w = calloc(1, sizeof *w);
    if (!w)
        return gp_error_set(err, "%s %s: out of memory", kind_of(path), path);
    snprintf(w->path, sizeof w->path, "%s", path);
    w->slot = -1;
    w->fd = -1;
    pthread_mutex_init(&w->mu, NULL);
    pthread_mutex_lock(&g_slots_mu);
    for (int k = 0; k < SLOTS && w->slot < 0; k++)
        if (!g_slot[k]) {
            g_slot[k] = w;
            w->slot = k;
        }
    pthread_mutex_unlock(&g_slots_mu);
    if (w->slot < 0) {
        free(w);
        gp_error_set(err, "%s %s: more than %d plugins open at once", kind_of(path), path, SLOTS);
        return -3;
    }
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        gp_error_set(err, "%s %s: cannot start its worker process: %s", kind_of(path), path, strerror(errno));
        gp_worker_close(w);
        return -3;
    }
    /* The device-memory worker's command line, built before the fork: PROGRAM ARGS...
     * plugin:PATH FD. */
    char spec[4096 + 8], fdarg[24], *exec_argv[EXEC_MAX + 3] = {NULL};
    snprintf(spec, sizeof spec, "plugin:%s", path);
    snprintf(fdarg, sizeof fdarg, "%d", sv[1]);
    pthread_mutex_lock(&g_exec_mu);
    size_t ne = 0;
    for (; g_exec[ne]; ne++)
        exec_argv[ne] = g_exec[ne];
    int have_exec = ne > 0;
    exec_argv[ne] = spec;
    exec_argv[ne + 1] = fdarg;
    fflush(NULL); /* nothing buffered is written twice */
    pid_t pid = fork();
    pthread_mutex_unlock(&g_exec_mu);
    if (pid == 0) {
        close(sv[0]);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* A crash ends the worker with its signal, whatever handlers the parent had
         * (a sanitizer's, Python's faulthandler): the parent reports it in one line. */
        const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP};
        for (size_t k = 0; k < sizeof fatal / sizeof fatal[0]; k++)
            signal(fatal[k], SIG_DFL);
        /* The worker's stdout is gradprec's stderr: what a plugin or a Python module
         * prints (an import banner) never mixes into gradprec's own output. */
        dup2(STDERR_FILENO, STDOUT_FILENO);
        if (strncmp(path, "python:", 7) == 0)
            exec_python(sv[1], path + 7);
        _exit(worker_main(sv[1], path, 1, have_exec ? exec_argv : NULL));
    }
    close(sv[1]);
    w->fd = sv[0];
    if (pid < 0) {
        gp_error_set(err, "%s %s: cannot start its worker process: %s", kind_of(path), path, strerror(errno));
        close(w->fd);
        w->fd = -1;
        gp_worker_close(w);
        return -3;
    }
    w->pid = pid;
    /* Starting to serve (a plugin's gp_plugin_entry; for python: the interpreter's start,
     * MODULE's import and NAME's call) gets the caller's time limit (--max-seconds), else
     * LOAD_TIMEOUT_S; a fault names that step. */
    hello h;
    double left = gp_deadline_left();
    int e = io(w->fd, &h, sizeof h, 0, mono() + (left > 1e20 ? LOAD_TIMEOUT_S : left > 0 ? left : 0));
    if (e != 0) {
        char step[128];
        const char *mod = path + 7, *colon = strrchr(path, ':');
        if (strncmp(path, "python:", 7) == 0 && colon > mod)
            snprintf(step, sizeof step, "starting (the interpreter, import %.*s, %.40s)", (int)(colon - mod < 60 ? colon - mod : 60),
                     mod, colon + 1);
        else
            snprintf(step, sizeof step, "%s", GP_PLUGIN_ENTRY_SYMBOL);
        int exited = set_fault(w, step, e == -2);
        if (exited >= 0 && strncmp(path, "python:", 7) == 0) { /* the interpreter could not start serving */
            gp_error_set(err, "backend %s: the Python interpreter ended (exit status %d) before serving it: can "
                         "$GP_PYTHON (else python3) import gradprec? (PYTHONPATH=python, or pip install ./python)",
                         path, exited);
            gp_worker_close(w);
            return -1;
        }
        if (exited >= 0 && have_exec) { /* the exec'd program ended without serving it */
            gp_error_set(err, "plugin %s: its worker program '%s' ended (exit status %d) before serving it", path,
                         exec_argv[0], exited);
            gp_worker_close(w);
            return -3;
        }
        gp_error_set(err, "%s", w->fault);
        gp_worker_close(w);
        return -3;
    }
    if (!h.ok) {
        h.why[sizeof h.why - 1] = '\0';
        gp_error_set(err, "%s %s: %s", kind_of(path), path, h.why);
        gp_worker_close(w);
        return -1;
    }
    h.name[sizeof h.name - 1] = '\0';
    snprintf(name, namelen, "%s", h.name);
    w->table = g_proxy[w->slot];
    w->table.abi_version = h.abi;
    w->table.name = NULL;
    if (!h.has[FN_MANY])
        w->table.accumulate_many = NULL;
    if (!h.has[FN_SUMSQ])
        w->table.grad_sumsq = NULL;
    if (!h.has[FN_SCALE])
        w->table.grad_scale = NULL;
    if (!h.has[FN_SCALER])
        w->table.scaler_update = NULL;
    *ops = &w->table;
    *wp = w;
    return 0;
}

const char *gp_worker_fault(const gp_worker *w)
{
    return w && w->fault[0] ? w->fault : NULL;
}

void gp_worker_close(gp_worker *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd); /* the worker reads end of file and exits */
    if (w->pid > 0) {
        int st;
        reap(w->pid, 5.0, &st);
    }
    pthread_mutex_destroy(&w->mu);
    if (w->slot >= 0) {
        pthread_mutex_lock(&g_slots_mu);
        g_slot[w->slot] = NULL;
        pthread_mutex_unlock(&g_slots_mu);
    }
    free(w);
}
