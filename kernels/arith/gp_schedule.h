/* gp_schedule.h — learning-rate schedules as pure functions of (parameters, optimizer
 * step t, t = 1 for the first step), returning the lr as a binary64, as the Python
 * scheduler hands it to the optimizer. Linear warmup composes with every schedule.
 * Evaluate on the host and pass the value to kernels: cos and sqrt of a device libm
 * may differ from the host's in the last bit of a binary64 (see gp_schedule_lr). */
#ifndef GP_SCHEDULE_H
#define GP_SCHEDULE_H

#include <math.h>

#include "gp_arith.h"

/* Schedule kinds. Same numbers as harness/scenario/gp_scenario.h's gp_schedule_kind
 * (GP_SCHED_CONSTANT = 0, COSINE, LINEAR, INVSQRT, STEP), so the harness may cast one
 * to the other; the arithmetic does not include harness headers, hence its own names. */
enum {
    GP_LR_CONSTANT = 0,
    GP_LR_COSINE = 1,
    GP_LR_LINEAR = 2,
    GP_LR_INVSQRT = 3,
    GP_LR_STEP = 4
};

typedef struct {
    int kind;       /* GP_LR_* */
    int warmup;     /* W: linear warmup steps, 0 = none */
    int total;      /* T: cosine / linear reach min_lr at t = T */
    double base_lr; /* the optimizer's lr: reached at t = W */
    double min_lr;  /* cosine / linear floor */
    double gamma;   /* step: factor applied every step_size steps */
    int step_size;  /* step: steps between factors (values < 1 count as 1) */
} gp_schedule_params;

/* pi rounded to binary64 (M_PI is not C11). */
#define GP_SCHEDULE_PI 3.14159265358979323846

/* The lr of optimizer step t >= 1 (t < 1 is treated as 1). Formulas, W = warmup,
 * T = total, b = base_lr, n = min_lr:
 *  - warmup, t <= W (W > 0): b * t / W — from b/W at t = 1 to b at t = W, whatever
 *    the kind. Transformers' get_*_schedule_with_warmup (src/transformers/
 *    optimization.py) evaluate the same expressions at the 0-based scheduler step
 *    s = t - 1 (LambdaLR starts at last_epoch 0), so their lr at step t is this
 *    function's at t - 1 (0 at the first warmup step); the shapes are identical.
 *  - constant: b.
 *  - cosine: p = (t - W) / max(1, T - W) clamped to [0, 1];
 *    n + (b - n) * 0.5 * (1 + cos(pi * p)): b at t = W, (b + n)/2 half way, n at T and
 *    after (transformers' cosine keeps following the cosine past T; here it stays at n).
 *  - linear: n + (b - n) * max(0, (T - t) / max(1, T - W)): b at W, n at T and after
 *    (transformers' linear schedule with n = 0).
 *  - inverse square root: b * sqrt(W) / sqrt(t) after warmup (continuous at t = W:
 *    transformers' get_inverse_sqrt_schedule with timescale = W), b / sqrt(t) with W = 0.
 *  - step: k = floor((t - 1 - W) / step_size) factors after warmup, applied by
 *    repeated multiplication lr <- lr * gamma as torch's StepLR.get_lr does
 *    (torch/optim/lr_scheduler.py: the chainable form multiplies the current lr by
 *    gamma whenever last_epoch % step_size == 0, last_epoch = t - 1): steps W+1 ..
 *    W+step_size run at b, the next step_size at b*gamma, and so on.
 * Every operation is a binary64 IEEE operation except cos (step kind: none), so the
 * result is deterministic on one platform; across libms cos may differ in the last bit.
 * Unknown kinds behave as constant. */
GP_ARITH double gp_schedule_lr(const gp_schedule_params *p, long t)
{
    double b = p->base_lr, n = p->min_lr;
    long W = p->warmup > 0 ? p->warmup : 0;
    if (t < 1)
        t = 1;
    if (W > 0 && t <= W)
        return b * (double)t / (double)W;
    long span = (long)p->total - W;
    if (span < 1)
        span = 1;
    switch (p->kind) {
    case GP_LR_COSINE: {
        double prog = (double)(t - W) / (double)span;
        if (prog > 1.0)
            prog = 1.0;
        double c = 0.5 * (1.0 + cos(GP_SCHEDULE_PI * prog));
        return n + (b - n) * c;
    }
    case GP_LR_LINEAR: {
        double frac = (double)((long)p->total - t) / (double)span;
        if (frac < 0.0)
            frac = 0.0;
        return n + (b - n) * frac;
    }
    case GP_LR_INVSQRT:
        return W > 0 ? b * sqrt((double)W) / sqrt((double)t) : b / sqrt((double)t);
    case GP_LR_STEP: {
        long ss = p->step_size > 0 ? p->step_size : 1;
        long k = (t - 1 - W) / ss;
        double lr = b;
        for (long i = 0; i < k && lr != 0.0; i++)
            lr = lr * p->gamma;
        return lr;
    }
    default:
        return b;
    }
}

#endif
