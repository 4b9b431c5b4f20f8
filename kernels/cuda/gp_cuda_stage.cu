/* gp_cuda_stage.cu — the staging adapter (see gp_cuda.h): any device-memory gp_plugin
 * (the CUDA backend's kernels, a user's CUDA plugin) served as a host-memory one. A
 * call's host arrays are packed into a host mirror (pinned when the driver gives it),
 * copied to the device in one transfer, the device table's function runs on them, and
 * the arrays it may write are copied back in one transfer. A function table carries no
 * context, so each open staged table is a slot with its own instance of the entry
 * points (slot_fns<K>), up to GP_CUDA_STAGE_MAX at once.
 * Build: part of gradprec_core when nvcc is found. */
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gp_cuda.h"

#define GP_STAGE_ALIGN 256u                     /* every array's offset: vector loads are legal */
#define GP_STAGE_STEP ((size_t)1 << 20)        /* the buffers grow in steps of 1 MiB */
#define GP_STAGE_ARRAYS (3 * GP_PLUGIN_MANY_MAX) /* the most one call stages: acc, comp, grad per segment */
#define GP_STAGE_BAD SIZE_MAX                   /* the size of an array of an unknown format */

/* One host array of a call. */
typedef struct {
    const void *src; /* copied in; NULL: absent (its device pointer is NULL) */
    void *dst;       /* copied back to (the function may write it); NULL: read only */
    size_t bytes;
    size_t off;      /* in the buffers, set by upload */
} stage_array;

typedef struct {
    gp_plugin table;      /* what callers see */
    const gp_plugin *dev; /* the wrapped device-memory table */
    pthread_mutex_t mu;   /* one call at a time: the buffers belong to the call */
    char *dbuf, *hbuf;    /* the device buffer and its host mirror */
    size_t cap;           /* their size */
    int pinned;           /* hbuf from cudaMallocHost (else malloc) */
    size_t written;       /* bytes copied back: the writable arrays are laid out first */
    size_t narr;
    stage_array arr[GP_STAGE_ARRAYS];
    gp_plugin_accumulate_args seg[GP_PLUGIN_MANY_MAX]; /* accumulate's arguments, device pointers */
} stage;

static stage *g_slot[GP_CUDA_STAGE_MAX];
static pthread_mutex_t g_slots_mu = PTHREAD_MUTEX_INITIALIZER;

/* Bytes of n packed elements of format f; GP_STAGE_BAD for an unknown format. */
static size_t bytes_of(int32_t f, uint64_t n)
{
    return f >= 0 && f < GP_NFORMATS ? (size_t)n * (size_t)(gp_fmt_get((gp_format)f).width / 8) : GP_STAGE_BAD;
}

/* Start the list of a call's arrays. */
static void begin(stage *s)
{
    s->narr = 0;
}

/* Add a host array of `bytes` to the call: src (NULL: absent), dst (NULL: read only). */
static void add(stage *s, const void *src, void *dst, size_t bytes)
{
    stage_array a = {src, dst, bytes, 0};
    s->arr[s->narr++] = a;
}

/* The device address of array k, valid after upload (NULL for an absent array). */
static void *dev_ptr(const stage *s, size_t k)
{
    return s->arr[k].src ? s->dbuf + s->arr[k].off : NULL;
}

static void release(stage *s)
{
    cudaFree(s->dbuf);
    if (s->pinned)
        cudaFreeHost(s->hbuf);
    else
        free(s->hbuf);
    s->dbuf = s->hbuf = NULL;
    s->cap = 0;
    s->pinned = 0;
}

/* Make both buffers hold at least need bytes (grow only; contents not kept). 0 or -1. */
static int reserve(stage *s, size_t need)
{
    if (need <= s->cap)
        return 0;
    release(s);
    size_t cap = (need + GP_STAGE_STEP - 1) / GP_STAGE_STEP * GP_STAGE_STEP;
    if (cudaMalloc((void **)&s->dbuf, cap) != cudaSuccess) {
        (void)cudaGetLastError();
        s->dbuf = NULL;
        return -1;
    }
    s->pinned = cudaMallocHost((void **)&s->hbuf, cap) == cudaSuccess;
    if (!s->pinned) {
        (void)cudaGetLastError(); /* pageable memory copies too, only slower */
        s->hbuf = (char *)malloc(cap);
    }
    if (!s->hbuf) {
        release(s);
        return -1;
    }
    s->cap = cap;
    return 0;
}

/* Lay the call's arrays out (the writable ones first, each at a multiple of
 * GP_STAGE_ALIGN), grow the buffers, and copy everything in with one transfer.
 * Returns 0; 1 for an unknown format (a configuration not supported); -1 on a CUDA error. */
static int upload(stage *s)
{
    size_t off = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            s->written = off;
        for (size_t k = 0; k < s->narr; k++) {
            stage_array *a = &s->arr[k];
            if (a->bytes == GP_STAGE_BAD)
                return 1;
            if (a->src && (a->dst != NULL) == (pass == 0)) {
                a->off = off;
                off += (a->bytes + GP_STAGE_ALIGN - 1) / GP_STAGE_ALIGN * GP_STAGE_ALIGN;
            }
        }
    }
    if (reserve(s, off ? off : 1) != 0)
        return -1;
    for (size_t k = 0; k < s->narr; k++)
        if (s->arr[k].src)
            memcpy(s->hbuf + s->arr[k].off, s->arr[k].src, s->arr[k].bytes);
    return off && cudaMemcpy(s->dbuf, s->hbuf, off, cudaMemcpyHostToDevice) != cudaSuccess ? -1 : 0;
}

/* After the device function returned rc: wait for the device (its kernels may run on
 * any stream), then, if rc is 0, copy the writable arrays back with one transfer.
 * Returns rc, or -1 on a CUDA error. */
static int finish(stage *s, int rc)
{
    if (cudaDeviceSynchronize() != cudaSuccess)
        return -1;
    if (rc != 0)
        return rc;
    if (s->written && cudaMemcpy(s->hbuf, s->dbuf, s->written, cudaMemcpyDeviceToHost) != cudaSuccess)
        return -1;
    for (size_t k = 0; k < s->narr; k++)
        if (s->arr[k].dst)
            memcpy(s->arr[k].dst, s->hbuf + s->arr[k].off, s->arr[k].bytes);
    return 0;
}

/* ---- the staged entry points (s's lock held) ---- */

/* accumulate (count 1) and accumulate_many: every segment staged, then one call to the
 * device's accumulate_many when it has one and count > 1, else its accumulate per segment. */
static int st_accumulate(stage *s, const gp_plugin_accumulate_args *h, uint32_t count)
{
    if (count > GP_PLUGIN_MANY_MAX)
        return -1;
    begin(s);
    for (uint32_t j = 0; j < count; j++) {
        size_t ab = bytes_of(h[j].acc_format, h[j].n);
        add(s, h[j].acc, h[j].acc, ab);
        add(s, h[j].comp, h[j].comp, ab);
        add(s, h[j].grad, NULL, bytes_of(h[j].grad_format, h[j].n));
    }
    int rc = upload(s);
    if (rc != 0)
        return rc;
    for (uint32_t j = 0; j < count; j++) {
        s->seg[j] = h[j];
        s->seg[j].acc = dev_ptr(s, 3 * (size_t)j);
        s->seg[j].comp = dev_ptr(s, 3 * (size_t)j + 1);
        s->seg[j].grad = dev_ptr(s, 3 * (size_t)j + 2);
    }
    if (count > 1 && s->dev->accumulate_many)
        rc = s->dev->accumulate_many(s->seg, count);
    else
        for (uint32_t j = 0; j < count && rc == 0; j++)
            rc = s->dev->accumulate(&s->seg[j]);
    return finish(s, rc);
}

static int st_unscale(stage *s, gp_plugin_unscale_args *h)
{
    begin(s);
    add(s, h->acc, h->acc, bytes_of(h->acc_format, h->n));
    int rc = upload(s);
    if (rc != 0)
        return rc;
    gp_plugin_unscale_args d = *h;
    d.acc = dev_ptr(s, 0);
    rc = finish(s, s->dev->unscale(&d));
    if (rc == 0)
        h->found_inf = d.found_inf; /* the device table only ever sets it */
    return rc;
}

static int st_adamw(stage *s, const gp_plugin_adamw_args *h)
{
    size_t pb = bytes_of(h->param_format, h->n), sb = bytes_of(h->state_format, h->n);
    begin(s);
    add(s, h->param, h->param, pb);
    add(s, h->master, h->master, 4 * (size_t)h->n);
    add(s, h->comp, h->comp, pb);
    add(s, h->m, h->m, sb);
    add(s, h->v, h->v, sb);
    add(s, h->grad, NULL, bytes_of(h->grad_format, h->n));
    add(s, h->found_inf, NULL, sizeof *h->found_inf);
    /* a low-bit state: n codes and n / block fp32 scales for each of m and v, updated */
    int lowbit = h->struct_size >= sizeof *h && h->state_quant != GP_PLUGIN_STATE_PLAIN;
    if (lowbit) {
        size_t sc = h->block > 0 ? (size_t)(h->n / (uint64_t)h->block) * sizeof(float) : GP_STAGE_BAD;
        add(s, h->m_codes, h->m_codes, (size_t)h->n);
        add(s, h->v_codes, h->v_codes, (size_t)h->n);
        add(s, h->m_scales, h->m_scales, sc);
        add(s, h->v_scales, h->v_scales, sc);
    }
    int rc = upload(s);
    if (rc != 0)
        return rc;
    gp_plugin_adamw_args d = *h;
    if (lowbit) {
        d.m_codes = (uint8_t *)dev_ptr(s, 7);
        d.v_codes = (uint8_t *)dev_ptr(s, 8);
        d.m_scales = (float *)dev_ptr(s, 9);
        d.v_scales = (float *)dev_ptr(s, 10);
    }
    d.param = dev_ptr(s, 0);
    d.master = dev_ptr(s, 1);
    d.comp = dev_ptr(s, 2);
    d.m = dev_ptr(s, 3);
    d.v = dev_ptr(s, 4);
    d.grad = dev_ptr(s, 5);
    d.found_inf = (const int32_t *)dev_ptr(s, 6);
    return finish(s, s->dev->adamw(&d));
}

static int st_grad_sumsq(stage *s, gp_plugin_sumsq_args *h)
{
    begin(s);
    add(s, h->grad, NULL, bytes_of(h->format, h->n));
    int rc = upload(s);
    if (rc != 0)
        return rc;
    gp_plugin_sumsq_args d = *h;
    d.grad = dev_ptr(s, 0);
    rc = finish(s, s->dev->grad_sumsq(&d));
    if (rc == 0)
        h->sumsq = d.sumsq;
    return rc;
}

static int st_grad_scale(stage *s, const gp_plugin_scale_args *h)
{
    begin(s);
    add(s, h->grad, h->grad, bytes_of(h->format, h->n));
    int rc = upload(s);
    if (rc != 0)
        return rc;
    gp_plugin_scale_args d = *h;
    d.grad = dev_ptr(s, 0);
    return finish(s, s->dev->grad_scale(&d));
}

static int st_scaler_update(stage *s, const gp_plugin_scaler_args *h)
{
    begin(s);
    add(s, h->scale, h->scale, sizeof *h->scale);
    add(s, h->tracker, h->tracker, sizeof *h->tracker);
    add(s, h->found_inf, NULL, sizeof *h->found_inf);
    int rc = upload(s);
    if (rc != 0)
        return rc;
    gp_plugin_scaler_args d = *h;
    d.scale = (float *)dev_ptr(s, 0);
    d.tracker = (int32_t *)dev_ptr(s, 1);
    d.found_inf = (const int32_t *)dev_ptr(s, 2);
    return finish(s, s->dev->scaler_update(&d));
}

/* f(s, args...) holding s's lock. */
template <typename F, typename... A> static int locked(F f, stage *s, A... args)
{
    pthread_mutex_lock(&s->mu);
    int rc = f(s, args...);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

/* The entry points of slot K. */
template <int K> struct slot_fns {
    static int accumulate(const gp_plugin_accumulate_args *a) { return locked(st_accumulate, g_slot[K], a, 1u); }
    static int accumulate_many(const gp_plugin_accumulate_args *a, uint32_t count)
    {
        return locked(st_accumulate, g_slot[K], a, count);
    }
    static int unscale(gp_plugin_unscale_args *a) { return locked(st_unscale, g_slot[K], a); }
    static int adamw(const gp_plugin_adamw_args *a) { return locked(st_adamw, g_slot[K], a); }
    static int grad_sumsq(gp_plugin_sumsq_args *a) { return locked(st_grad_sumsq, g_slot[K], a); }
    static int grad_scale(const gp_plugin_scale_args *a) { return locked(st_grad_scale, g_slot[K], a); }
    static int scaler_update(const gp_plugin_scaler_args *a) { return locked(st_scaler_update, g_slot[K], a); }

    /* t's entries: slot K's, NULL where dev's are NULL. */
    static void fill(gp_plugin *t, const gp_plugin *dev)
    {
        t->accumulate = dev->accumulate ? accumulate : NULL;
        t->unscale = dev->unscale ? unscale : NULL;
        t->adamw = dev->adamw ? adamw : NULL;
        t->grad_sumsq = dev->grad_sumsq ? grad_sumsq : NULL;
        t->grad_scale = dev->grad_scale ? grad_scale : NULL;
        t->scaler_update = dev->scaler_update ? scaler_update : NULL;
        t->accumulate_many = dev->accumulate_many ? accumulate_many : NULL;
    }
};

typedef void (*fill_fn)(gp_plugin *, const gp_plugin *);
static const fill_fn g_fill[] = {
    slot_fns<0>::fill,  slot_fns<1>::fill,  slot_fns<2>::fill,  slot_fns<3>::fill,
    slot_fns<4>::fill,  slot_fns<5>::fill,  slot_fns<6>::fill,  slot_fns<7>::fill,
    slot_fns<8>::fill,  slot_fns<9>::fill,  slot_fns<10>::fill, slot_fns<11>::fill,
    slot_fns<12>::fill, slot_fns<13>::fill, slot_fns<14>::fill, slot_fns<15>::fill,
};
static_assert(sizeof g_fill / sizeof g_fill[0] == GP_CUDA_STAGE_MAX, "one slot_fns per slot");

extern "C" const gp_plugin *gp_cuda_stage_open(const gp_plugin *dev, gp_error *err)
{
    if (!dev || dev->memory != GP_PLUGIN_DEVICE) {
        gp_error_set(err, "staging: the table does not ask for device memory");
        return NULL;
    }
    if (gp_cuda_device_count() == 0) {
        gp_error_set(err, "staging: no CUDA device present");
        return NULL;
    }
    stage *s = (stage *)calloc(1, sizeof *s);
    if (!s) {
        gp_error_set(err, "staging: out of memory");
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->dev = dev;
    s->table.abi_version = dev->abi_version;
    s->table.name = dev->name;
    s->table.memory = GP_PLUGIN_HOST;
    int k = 0;
    pthread_mutex_lock(&g_slots_mu);
    while (k < GP_CUDA_STAGE_MAX && g_slot[k])
        k++;
    if (k < GP_CUDA_STAGE_MAX) {
        g_fill[k](&s->table, dev);
        g_slot[k] = s;
    }
    pthread_mutex_unlock(&g_slots_mu);
    if (k == GP_CUDA_STAGE_MAX) {
        pthread_mutex_destroy(&s->mu);
        free(s);
        gp_error_set(err, "staging: %d device-memory tables are open already", GP_CUDA_STAGE_MAX);
        return NULL;
    }
    return &s->table;
}

extern "C" void gp_cuda_stage_close(const gp_plugin *staged)
{
    stage *s = NULL;
    pthread_mutex_lock(&g_slots_mu);
    for (int k = 0; k < GP_CUDA_STAGE_MAX && staged; k++)
        if (g_slot[k] && &g_slot[k]->table == staged) {
            s = g_slot[k];
            g_slot[k] = NULL;
        }
    pthread_mutex_unlock(&g_slots_mu);
    if (!s)
        return;
    release(s);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
