/* gp_run_all.c — see gp_run_all.h. */
#include "gp_run_all.h"

#include <pthread.h>
#include <string.h>

typedef struct {
    const gp_scenario *sc;
    gp_result *res;
    size_t n, next, done;
    const gp_backend *b, *cmp;
    const gp_run_opts *o;
    int failed; /* 0, or the first failing gp_run_scenario_seeds code */
    gp_error err;
    pthread_mutex_t mu;
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
        gp_deadline_set(w->o->max_seconds);
        int rc = gp_run_scenario_seeds(&w->sc[i], w->o->nseeds, w->b, w->cmp, &w->res[i], &e);
        gp_deadline_set(0);
        pthread_mutex_lock(&w->mu);
        if (rc != 0 && !w->failed) {
            w->failed = rc;
            gp_error_set(&w->err, "scenario '%s': %s", w->sc[i].name, e.msg);
            w->next = w->n; /* start nothing more */
        }
        w->done++;
        if (w->o->progress)
            fprintf(w->o->progress, "\r[%zu/%zu] %-50.50s", w->done, w->n, w->sc[i].name);
        pthread_mutex_unlock(&w->mu);
    }
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
    pthread_t th[256];
    int nth = o->jobs < 1 ? 1 : o->jobs > 256 ? 256 : o->jobs, started = 0, terr = 0;
    if ((size_t)nth > n)
        nth = (int)n;
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
    pthread_mutex_destroy(&w.mu);
    if (o->progress)
        fprintf(o->progress, "\r%-60s\r", "");
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
