/* gp_run_all.c — see gp_run_all.h. */
#include "gp_run_all.h"

#include "../sources/gp_backend.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct {
    const gp_scenario *sc;
    gp_result *res;
    size_t n, next, done;
    const gp_backend *b, *cmp;
    const gp_run_opts *o;
    int failed; /* 0, or the first failing gp_run_scenario_seeds code */
    gp_error err;
    int inner;           /* threads inside each scenario */
    uint64_t work_done;  /* progress: gp_run_work units finished (atomic) */
    uint64_t work_total; /* ... of the whole run */
    const char *current; /* the scenario started last (progress line) */
    int finished;        /* every worker returned: the progress thread stops */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} work;

static void *worker(void *arg)
{
    work *w = arg;
    for (;;) {
        pthread_mutex_lock(&w->mu);
        size_t i = w->next++;
        pthread_mutex_unlock(&w->mu);
        if (i >= w->n)
            return NULL;
        gp_error e = {""};
        gp_run_ctl ctl = {w->inner, &w->work_done};
        pthread_mutex_lock(&w->mu);
        w->current = w->sc[i].name;
        pthread_mutex_unlock(&w->mu);
        gp_deadline_set(w->o->max_seconds);
        int rc = gp_run_scenario_seeds(&w->sc[i], w->o->nseeds, &ctl, w->b, w->cmp, &w->res[i], &e);
        gp_deadline_set(0);
        if (rc == GP_RUN_REFUSED) { /* reported as refused; the others run */
            gp_result *r = &w->res[i];
            memset(r, 0, sizeof *r);
            r->refused = 1;
            r->expect_met = !w->sc[i].expect.set;
            r->dominant = GP_NMECH;
            snprintf(r->refusal, sizeof r->refusal, "%s", e.msg);
            rc = 0;
        }
        pthread_mutex_lock(&w->mu);
        if (rc != 0 && !w->failed) {
            w->failed = rc;
            gp_error_set(&w->err, "scenario '%s': %s", w->sc[i].name, e.msg);
            w->next = w->n; /* start nothing more */
        }
        w->done++;
        pthread_mutex_unlock(&w->mu);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* "1h02m", "4m05s", "12s" */
static void fmt_duration(double s, char *out, size_t len)
{
    long v = s < 0 ? 0 : s > 359999 ? 359999 : (long)(s + 0.5);
    if (v >= 3600)
        snprintf(out, len, "%ldh%02ldm", v / 3600, v / 60 % 60);
    else if (v >= 60)
        snprintf(out, len, "%ldm%02lds", v / 60, v % 60);
    else
        snprintf(out, len, "%lds", v);
}

/* 950, 12.3k, 4.56M, 7.89G, 1.23T */
static void fmt_si(double v, char *out, size_t len)
{
    static const char unit[] = " kMGTPE";
    int u = 0;
    while (v >= 999.5 && u < 6) {
        v /= 1000;
        u++;
    }
    if (u == 0)
        snprintf(out, len, "%.0f", v);
    else
        snprintf(out, len, "%.3g%c", v, unit[u]);
}

void gp_progress_line(double done, double total, double elapsed, size_t sc_done, size_t sc_n, const char *name,
                      char *out, size_t len)
{
    char eta[32] = "?", d[16], t[16], r[16];
    double frac = total > 0 ? done / total : 0, rate = elapsed > 0 ? done / elapsed : 0;
    if (frac > 1)
        frac = 1;
    if (rate > 0)
        fmt_duration((total - done) / rate, eta, sizeof eta);
    fmt_si(done, d, sizeof d);
    fmt_si(total, t, sizeof t);
    fmt_si(rate, r, sizeof r);
    char bar[11];
    int fill = (int)(frac * 10);
    for (int i = 0; i < 10; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[10] = 0;
    snprintf(out, len, "[%zu/%zu] %-16.16s [%s] %5.1f%% %s/%s %s/s ETA %s", sc_done, sc_n, name ? name : "", bar,
             100 * frac, d, t, r, eta);
}

/* Redraw the progress line every half second, from o->progress_after seconds on (with
 * progress_after 0, also once at the start: a run shorter than half a second shows it). */
static void *progress_thread(void *arg)
{
    work *w = arg;
    double t0 = now_s();
    int drawn = 0, first = w->o->progress_after <= 0;
    pthread_mutex_lock(&w->mu);
    while (!w->finished) {
        if (!first) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 500000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&w->cv, &w->mu, &until);
        }
        first = 0;
        double el = now_s() - t0;
        if (w->finished || el < w->o->progress_after)
            continue;
        char line[200];
        gp_progress_line((double)__atomic_load_n(&w->work_done, __ATOMIC_RELAXED), (double)w->work_total, el,
                         w->done, w->n, w->current, line, sizeof line);
        fprintf(w->o->progress, "\r%-79.79s", line);
        fflush(w->o->progress);
        drawn = 1;
    }
    pthread_mutex_unlock(&w->mu);
    if (drawn) {
        fprintf(w->o->progress, "\r%-79s\r", "");
        fflush(w->o->progress);
    }
    return NULL;
}

int gp_run_all(const gp_scenario *sc, size_t n, const gp_backend *b, const gp_backend *cmp, const gp_run_opts *o,
               gp_result *res, gp_error *err)
{
    work w;
    memset(&w, 0, sizeof w);
    memset(res, 0, n * sizeof *res);
    w.sc = sc;
    w.res = res;
    w.n = n;
    w.b = b;
    w.cmp = cmp;
    w.o = o;
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t th[256], pth;
    int jobs = o->jobs < 1 ? 1 : o->jobs > 256 ? 256 : o->jobs, nth = jobs, started = 0, terr = 0;
    if ((size_t)nth > n)
        nth = (int)n;
    w.inner = nth > 0 ? jobs / nth : 1; /* fewer scenarios than threads: the rest split them */
    for (size_t i = 0; i < n; i++) {
        uint64_t wk = gp_run_work(&sc[i]) * (uint64_t)(o->nseeds > 1 ? o->nseeds : 1);
        w.work_total = wk > UINT64_MAX - w.work_total ? UINT64_MAX : w.work_total + wk;
    }
    int progress = o->progress && pthread_create(&pth, NULL, progress_thread, &w) == 0;
    for (int t = 0; t < nth && !terr; t++)
        if ((terr = pthread_create(&th[t], NULL, worker, &w)) == 0)
            started++;
    if (terr) { /* let the started threads finish what they took, start nothing more */
        pthread_mutex_lock(&w.mu);
        w.next = w.n;
        pthread_mutex_unlock(&w.mu);
    }
    for (int t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    if (progress) {
        pthread_mutex_lock(&w.mu);
        w.finished = 1;
        pthread_cond_signal(&w.cv);
        pthread_mutex_unlock(&w.mu);
        pthread_join(pth, NULL);
    }
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    if (terr && !w.failed) {
        w.failed = -1;
        gp_error_set(&w.err, "cannot start worker thread %d of %d: %s", started + 1, nth, strerror(terr));
    }
    if (w.failed) {
        for (size_t i = 0; i < n; i++)
            gp_result_free(&res[i]);
        gp_error_set(err, "%s", w.err.msg);
        return w.failed;
    }
    return 0;
}
