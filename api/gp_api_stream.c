/* gp_api_stream.c — the streaming calls of include/gradprec.h (gradprec_stream_*) over
 * harness/run/gp_session.h: a closed step's scenario (YAML naming the step's memory dump) is
 * loaded and run by gradprec_load_yaml and gradprec_run, the calls `gradprec run` goes
 * through, so its results are read with the gradprec_result_* accessors. */
#include "../include/gradprec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/run/gp_session.h"
#include "../kernels/gp_names.h"

struct gradprec_stream {
    gp_session *s;
    char backend[300]; /* "" : cpu */
    int jobs;
};

static int fail(char *err, size_t errlen, const char *msg, int rc)
{
    if (err && errlen)
        snprintf(err, errlen, "stream: %s", msg);
    return rc;
}

gradprec_stream *gradprec_stream_open(const char *yaml, size_t len, const char *backend, int jobs, char *err,
                                      size_t errlen)
{
    gp_error e = {""};
    gp_session *s = NULL;
    gradprec_stream *st = NULL;
    if (!yaml)
        fail(err, errlen, "the skeleton is NULL", 0);
    else if (backend && strlen(backend) >= sizeof st->backend)
        fail(err, errlen, "the backend spec is too long", 0);
    else if (gp_session_open(yaml, len, &s, &e) != 0)
        fail(err, errlen, e.msg, 0);
    else if (!(st = calloc(1, sizeof *st))) {
        gp_session_free(s);
        fail(err, errlen, "out of memory", 0);
    } else {
        st->s = s;
        snprintf(st->backend, sizeof st->backend, "%s", backend ? backend : "cpu");
        st->jobs = jobs < 1 ? 1 : jobs;
    }
    return st;
}

void gradprec_stream_free(gradprec_stream *st)
{
    if (!st)
        return;
    gp_session_free(st->s);
    free(st);
}

size_t gradprec_stream_tensor_count(const gradprec_stream *st)
{
    return st ? gp_session_ntensors(st->s) : 0;
}

const char *gradprec_stream_tensor_name(const gradprec_stream *st, size_t t)
{
    return st ? gp_session_tensor_name(st->s, t) : NULL;
}

uint64_t gradprec_stream_tensor_size(const gradprec_stream *st, size_t t)
{
    return st ? gp_session_tensor_size(st->s, t) : 0;
}

uint64_t gradprec_stream_tensor_fed(const gradprec_stream *st, size_t t)
{
    return st ? gp_session_tensor_count(st->s, t) : 0;
}

const uint64_t *gradprec_stream_tensor_indices(const gradprec_stream *st, size_t t)
{
    return st ? gp_session_tensor_indices(st->s, t) : NULL;
}

static int format_of(const char *name, gp_format *f, char *err, size_t errlen)
{
    char msg[128];
    if (name && gp_format_parse(name, f) == 0 && (*f == GP_FP32 || *f == GP_BF16 || *f == GP_FP16))
        return 0;
    snprintf(msg, sizeof msg, "format '%s': fp32, bf16 or fp16", name ? name : "(null)");
    return fail(err, errlen, msg, -1);
}

int gradprec_stream_grad(gradprec_stream *st, size_t tensor, const char *format, const void *data, uint64_t n,
                         char *err, size_t errlen)
{
    gp_error e = {""};
    gp_format f;
    if (!st)
        return fail(err, errlen, "the stream is NULL", GRADPREC_BAD_INPUT);
    if (format_of(format, &f, err, errlen) != 0)
        return GRADPREC_BAD_INPUT;
    return gp_session_grad(st->s, tensor, f, data, n, &e) == 0 ? GRADPREC_OK
                                                                : fail(err, errlen, e.msg, GRADPREC_BAD_INPUT);
}

int gradprec_stream_tokens(gradprec_stream *st, int64_t tokens, char *err, size_t errlen)
{
    gp_error e = {""};
    if (!st)
        return fail(err, errlen, "the stream is NULL", GRADPREC_BAD_INPUT);
    return gp_session_tokens(st->s, tokens, &e) == 0 ? GRADPREC_OK : fail(err, errlen, e.msg, GRADPREC_BAD_INPUT);
}

int gradprec_stream_optimizer(gradprec_stream *st, size_t tensor, int after, const char *what, const char *format,
                              const void *data, uint64_t n, int64_t step, char *err, size_t errlen)
{
    static const char *const names[GP_FEED_NQ] = {"param", "exp_avg", "exp_avg_sq", "master"};
    gp_error e = {""};
    gp_format f;
    int q = -1;
    if (!st)
        return fail(err, errlen, "the stream is NULL", GRADPREC_BAD_INPUT);
    for (int i = 0; what && i < GP_FEED_NQ; i++)
        if (!strcmp(what, names[i]))
            q = i;
    if (q < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "optimizer: '%.60s': param, exp_avg, exp_avg_sq or master", what ? what : "(null)");
        return fail(err, errlen, msg, GRADPREC_BAD_INPUT);
    }
    if (format_of(format, &f, err, errlen) != 0)
        return GRADPREC_BAD_INPUT;
    return gp_session_optim(st->s, tensor, q, after, f, data, n, step, &e) == 0
               ? GRADPREC_OK
               : fail(err, errlen, e.msg, GRADPREC_BAD_INPUT);
}

int gradprec_stream_close(gradprec_stream *st, const char *overrides, size_t len, gradprec_result **out,
                          char **scenario, char *err, size_t errlen)
{
    gp_error e = {""};
    char *text = NULL;
    if (out)
        *out = NULL;
    if (scenario)
        *scenario = NULL;
    if (!st || !out)
        return fail(err, errlen, "the stream or the result pointer is NULL", GRADPREC_BAD_INPUT);
    if (gp_session_step_text(st->s, overrides, overrides ? len : 0, &text, &e) != 0)
        return fail(err, errlen, e.msg, GRADPREC_BAD_INPUT);
    int rc = GRADPREC_BAD_INPUT;
    char origin[64];
    snprintf(origin, sizeof origin, "stream step %llu", (unsigned long long)gp_session_steps(st->s));
    gradprec_set *set = gradprec_load_yaml(text, strlen(text), origin, err, errlen);
    if (set)
        rc = gradprec_run(set, st->backend, NULL, NULL, st->jobs, out, err, errlen);
    gradprec_set_free(set);
    gp_session_step_end(st->s); /* the step's memory dump is released */
    if (scenario)
        *scenario = text;
    else
        free(text);
    return rc;
}

void gradprec_stream_discard(gradprec_stream *st)
{
    if (st)
        gp_session_discard(st->s);
}

void gradprec_stream_text_free(char *text)
{
    free(text);
}
