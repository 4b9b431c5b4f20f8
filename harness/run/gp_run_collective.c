/* gp_run_collective.c — data-parallel runs (docs/distributed.md): each rank's local
 * accumulation, then the simulated collective (ring, tree, reduce_scatter) in the reduce
 * dtype on the backend, every rounding of it observed and attributed. */
#include "gp_run_internal.h"

/* ---- the simulated collective (docs/distributed.md, harness/gp_collective.h) ---- */

static char *dist_rank(char *base, size_t width, int r, size_t off)
{
    return base + ((size_t)r * CHUNK + off) * width;
}

/* Count one rounding of element i in the collective (nonzero: of a non-zero exact value)
 * and attribute its local error d (final units) to mechanism m, in the run's split and in
 * the collective's own: the bookkeeping of coll_round and coll_wire. */
static void coll_note(chunk *c, size_t i, int nonzero, gp_mechanism m, double d)
{
    if (nonzero) {
        c->st->rounded_nonzero++;
        c->st->coll.roundings++;
        CNT_EL(c, CNT_RND, i);
    }
    if (m == GP_MECH_UNDERFLOW) {
        c->st->underflow++;
        c->st->coll.underflow++;
        CNT_EL(c, CNT_UND, i);
    }
    if (m == GP_MECH_OVERFLOW) {
        c->st->overflow++;
        c->st->coll.overflow++;
        CNT_EL(c, CNT_OVF, i);
    }
    gp_run_err_add(c, m, i, d);
    c->D->cerr[m][c->off + i] += d;
}

/* One rounding of the collective (a cast or a division) of the exact value `exact` to
 * bits in format f: counted, attributed to its mechanism with weight w (its share of the
 * final, unscaled gradient), in the run's split and in the collective's own. */
static void coll_round(chunk *c, size_t i, gp_format f, double exact, double lo, uint32_t bits, unsigned ev,
                       double w)
{
    if (!isfinite(exact)) /* already non-finite: counted where it arose */
        return;
    double v = widen(f, bits);
    gp_mechanism m = classify(f, gp_f64_nudge(exact, lo > 0 ? 1 : lo < 0 ? -1 : 0), bits, ev);
    double d = ((v - exact) - lo) * w; /* exact: the value rounded, lo: what the binary64 exact missed */
    if (!isfinite(v))
        d = v; /* an overflow loses everything */
    coll_note(c, i, exact != 0, m, d);
}

/* The compared backend's hop (--compare, fuzz_backend): its accumulate from the same old
 * partial sum and addend (args a, acc replaced), its result compared with the backend's X
 * bit for bit (NaN-ness for NaNs); a difference counts as a mismatch, the first noted as
 * entry "accumulate (collective)", output "acc", with the hop in the micro-batch field. The
 * run goes on with the backend's sums: each hop is compared from the same starting point. */
static int coll_hop_compare(chunk *c, gp_plugin_accumulate_args *a, const void *X, int hop, gp_error *err)
{
    struct dist_pool *D = c->D;
    gp_format rd = D->rd;
    char *X2 = D->part2 + c->off * D->rb;
    memcpy(X2, D->pold + c->off * D->rb, c->n * D->rb);
    a->acc = X2;
    int rc = c->cmp->ops->accumulate(a);
    if (rc != 0)
        return gp_run_backend_failure(c->cmp, "accumulate (collective)", rc, err);
    for (size_t i = 0; i < c->n; i++) {
        uint32_t x = gp_pack_get(rd, X, i), y = gp_pack_get(rd, X2, i);
        if (!gp_fmt_agree(rd, x, y)) {
            c->st->mismatches++;
            gp_mismatch_note(c->first, "accumulate (collective)", "acc", c->step + 1, hop, c->t,
                             (int64_t)(c->i0 + i), gp_fmt_get(rd).width, x, y);
        }
    }
    return 0;
}

/* One hop: X[i] <- X[i] + Y[i] in the reduce dtype on the backend (its accumulate entry,
 * RNE), every element observed as accumulate_after does; w: the weight of its errors. With
 * a compared backend, the same hop on it, compared (coll_hop_compare). */
static int coll_hop(chunk *c, void *X, const void *Y, int hop, double w, gp_error *err)
{
    struct dist_pool *D = c->D;
    gp_format rd = D->rd;
    memcpy(D->pold + c->off * D->rb, X, c->n * D->rb);
    gp_plugin_accumulate_args a;
    memset(&a, 0, sizeof a);
    a.struct_size = sizeof a;
    a.grad_format = (int32_t)rd;
    a.acc_format = (int32_t)rd;
    a.rounding = GP_PLUGIN_RNE;
    a.ftz = c->sc->precision.ftz;
    a.seed = c->sc->seed;
    a.stream = gp_stream_id(GP_STREAM_ACCUM_SR, c->t, (uint64_t)c->step, GP_SIGNAL_MICROBATCH - 1u);
    a.first_index = c->i0;
    a.n = c->n;
    a.microbatch = (uint32_t)hop;
    a.grad = Y;
    a.acc = X;
    int rc = c->b->ops->accumulate(&a);
    if (rc != 0)
        return gp_run_backend_failure(c->b, "accumulate (collective)", rc, err);
    if (c->cmp && (rc = coll_hop_compare(c, &a, X, hop, err)) != 0)
        return rc;
    c->st->coll.hops += c->n;
    const char *old = D->pold + c->off * D->rb;
    for (size_t i = 0; i < c->n; i++) {
        uint32_t ob = gp_pack_get(rd, old, i), nb = gp_pack_get(rd, X, i);
        double av = widen(rd, ob), g = widen(rd, gp_pack_get(rd, Y, i)), nv = widen(rd, nb);
        double s = av + g, bb = s - av, e = (av - (s - bb)) + (g - bb); /* exact sum s + e */
        if (!isfinite(av) || !isfinite(g))
            continue; /* counted where it became non-finite */
        if (!isfinite(s))
            e = 0;
        if (g != 0) {
            c->st->adds_nonzero++;
            c->st->coll.adds_nonzero++;
            CNT_EL(c, CNT_ADD, i);
        }
        /* saturated: an overflow kept at max finite (gp_attrib.h), before absorption */
        int sat = gp_attrib_saturated(rd, nb, s, e);
        if (sat || (g != 0 && nb == ob)) {
            gp_mechanism m = sat ? GP_MECH_SATURATION : GP_MECH_ABSORPTION;
            double d = ((nv - s) - e) * w;
            if (s != 0 || e != 0) {
                c->st->rounded_nonzero++;
                c->st->coll.roundings++;
                CNT_EL(c, CNT_RND, i);
            }
            if (!sat) {
                c->st->absorbed++;
                c->st->coll.absorbed++;
                CNT_EL(c, CNT_ABS, i);
            }
            gp_run_err_add(c, m, i, d);
            D->cerr[m][c->off + i] += d;
            continue;
        }
        coll_round(c, i, rd, s, e, nb, isinf(nv) && isfinite(s) ? GP_EV_OVERFLOW : 0, w);
    }
    return 0;
}

_Static_assert(CHUNK == GP_COLL_MESSAGE_BLOCK, "the loader keeps a scaled reduce dtype's messages inside one chunk");

/* A scaled reduce dtype (distributed.reduce_sc): the values X[0..n) of chunk c (fp32) are
 * what one rank sends; it quantizes them message by message (gp_coll_quantize: a message
 * never crosses a chunk, and a chunk starts a message) with its own scales, and the
 * receiver holds what they dequantize to (X is overwritten). Each element's loss
 * (gp_attrib_scaled) is attributed with weight w: saturation, overflow (:nosat), underflow
 * (zero inside a block whose amax set the scale), rounding. */
static void coll_wire(chunk *c, char *X, double w)
{
    const gp_scenario *sc = c->sc;
    struct dist_pool *D = c->D;
    float x[CHUNK], y[CHUNK];
    unsigned ev[CHUNK];
    uint64_t size = sc->tensors[c->t].size, B = (uint64_t)sc->distributed.bucket_elements;
    int tree = sc->distributed.collective == GP_COLL_TREE;
    for (size_t i = 0; i < c->n; i++) {
        x[i] = gp_f32_from_bits(gp_pack_get(GP_FP32, X, i));
        ev[i] = 0;
    }
    gp_coll_quantize(&sc->distributed.reduce_sc, x, y, ev, c->n, c->i0, size, B, D->W, tree);
    for (size_t i = 0; i < c->n; i++) {
        double a = (double)x[i], v = (double)y[i];
        gp_pack_set(GP_FP32, X, i, gp_f32_bits(y[i]));
        if (isfinite(a)) /* else already non-finite: counted where it arose */
            coll_note(c, i, a != 0, gp_attrib_scaled(a, v, ev[i]), isfinite(v) ? (v - a) * w : v);
    }
}

/* The collective over the ranks' local accumulators of chunk c (D->racc), result stored
 * into c->acc: cast to the reduce dtype, divide by the pre factor, reduce in the
 * collective's order (ring / reduce_scatter: gp_coll_ring_rank per element's chunk;
 * tree: level l adds rank r + 2^l into rank r for r a multiple of 2^(l+1)), divide by
 * the post factor, cast back to the accumulator dtype. A scaled reduce dtype adds in fp32
 * (D->rd) and quantizes what each rank sends (coll_wire): before every addition, and the
 * result once more for the all-gather (ring) or broadcast (tree), not for reduce_scatter,
 * whose shard stays with its owner. */
static int collective(chunk *c, gp_error *err)
{
    struct dist_pool *D = c->D;
    const gp_scenario *sc = c->sc;
    int W = D->W, ftz = sc->precision.ftz, op = sc->distributed.average == GP_AVG_OP, rc = 0;
    int scaled = sc->distributed.reduce_scaled;
    gp_format rd = D->rd, af = c->af;
    double pre, post, ws = 1.0 / c->s;
    gp_coll_factors(sc, &pre, &post);
    for (int r = 0; r < W; r++) {
        const char *ra = dist_rank(D->racc, D->ab, r, c->off);
        char *rv = dist_rank(D->val, D->rb, r, c->off);
        for (size_t i = 0; i < c->n; i++) {
            double a = widen(af, gp_pack_get(af, ra, i));
            unsigned ev = 0;
            uint32_t v = gp_fmt_from_f64(rd, a, GP_RNE, 0, ftz, &ev);
            if (rd != af)
                coll_round(c, i, rd, a, 0, v, ev, ws / (double)W);
            if (pre != 1.0) {
                double vv = widen(rd, v);
                ev = 0;
                v = gp_coll_divide(rd, vv, pre, op, ftz, &ev);
                coll_round(c, i, rd, vv / pre, 0, v, ev, ws / post);
            }
            gp_pack_set(rd, rv, i, v);
        }
    }
    char *part = D->part + c->off * D->rb, *add = D->add + c->off * D->rb;
    if (sc->distributed.collective == GP_COLL_TREE) {
        for (int st = 1; st < W && rc == 0; st *= 2)
            for (int r = 0; r + st < W && rc == 0; r += 2 * st) {
                if (scaled) /* rank r + st sends its sum to rank r */
                    coll_wire(c, dist_rank(D->val, D->rb, r + st, c->off), ws / post);
                rc = coll_hop(c, dist_rank(D->val, D->rb, r, c->off), dist_rank(D->val, D->rb, r + st, c->off),
                              r + st, ws / post, err);
            }
        memcpy(part, dist_rank(D->val, D->rb, 0, c->off), c->n * D->rb);
    } else {
        uint64_t size = sc->tensors[c->t].size, B = (uint64_t)sc->distributed.bucket_elements;
        for (int h = 0; h < W && rc == 0; h++) {
            char *dst = h == 0 ? part : add;
            for (size_t i = 0; i < c->n; i++) {
                uint64_t pos, blen = gp_coll_bucket(c->i0 + i, size, B, &pos);
                int q = gp_coll_chunk(pos, blen, W);
                const char *src = dist_rank(D->val, D->rb, gp_coll_ring_rank(W, q, h), c->off);
                gp_pack_set(rd, dst, i, gp_pack_get(rd, src, i));
            }
            if (h > 0 && scaled) /* rank q + h sends its partial sum to rank q + h + 1 */
                coll_wire(c, part, ws / post);
            if (h > 0)
                rc = coll_hop(c, part, add, h, ws / post, err);
        }
    }
    if (rc != 0)
        return rc;
    if (scaled && sc->distributed.collective != GP_COLL_REDUCE_SCATTER) /* the all-gather (broadcast) */
        coll_wire(c, part, ws / post);
    for (size_t i = 0; i < c->n; i++) {
        uint32_t v = gp_pack_get(rd, part, i);
        unsigned ev = 0;
        if (post != 1.0) {
            double p = widen(rd, v);
            v = gp_coll_divide(rd, p, post, 0, ftz, &ev);
            coll_round(c, i, rd, p / post, 0, v, ev, ws);
        }
        double p = widen(rd, v);
        ev = 0;
        uint32_t nb = gp_fmt_from_f64(af, p, GP_RNE, 0, ftz, &ev);
        if (af != rd)
            coll_round(c, i, af, p, 0, nb, ev, ws);
        gp_pack_set(af, c->acc, i, nb);
    }
    return 0;
}

void gp_run_rank_inputs(chunk *c, double N, int r)
{
    const gp_scenario *sc = c->sc;
    int K = sc->batch.microbatches, W = c->D->W;
    c->tok = sc->distributed.tokens ? sc->distributed.tokens + (size_t)r * (size_t)K : sc->batch.tokens;
    c->mb_base = r * K;
    c->errw = 1.0 / (double)W;
    if (sc->distributed.normalize == GP_NORM_RANK) {
        double Nr = 0;
        for (int k = 0; k < K; k++)
            Nr += (double)c->tok[k];
        c->tm_mul = 1.0;
        c->tm_den = Nr;
    } else {
        c->tm_mul = (double)W; /* the loss times W, as trainers do that divide by the global N */
        c->tm_den = N;
    }
}

/* Rank r of chunk c: its local accumulator starts as the chunk's gradient (0 in a window
 * with no_sync; the previous collective's result without it), its tokens, micro-batches
 * and normalization. */
static void rank_begin(chunk *c, void *real, double N, int r)
{
    struct dist_pool *D = c->D;
    c->acc = dist_rank(D->racc, D->ab, r, c->off);
    memcpy(c->acc, real, c->n * D->ab);
    gp_run_rank_inputs(c, N, r);
    memset(c->sr_prev, 0, c->n * sizeof(double));
}

/* Generated tensors across W ranks: each rank accumulates its micro-batches locally on
 * the backend; the collective runs once after the window (no_sync: true) or after every
 * micro-batch on the accumulated gradient (no_sync: false, DDP's reducer without
 * no_sync()); then unscale and the final statistics as in one process. */
int gp_run_distributed(chunk *G, size_t ng, double N, int *found_inf, gp_error *err)
{
    const gp_scenario *sc = G[0].sc;
    struct dist_pool *D = G[0].D;
    int K = sc->batch.microbatches, W = D->W, rc = 0;
    void *real[GP_PLUGIN_MANY_MAX];
    for (size_t j = 0; j < ng; j++) {
        real[j] = G[j].acc;
        for (int m = 0; m < GP_MECH_GRAD_END; m++)
            memset(D->cerr[m] + G[j].off, 0, G[j].n * sizeof(double));
        memset(D->sh + G[j].off, 0, G[j].n * sizeof(double));
        memset(D->sl + G[j].off, 0, G[j].n * sizeof(double));
    }
    int rounds = sc->distributed.no_sync ? 1 : K, per = sc->distributed.no_sync ? K : 1;
    for (int round = 0; round < rounds && rc == 0; round++) {
        for (int r = 0; r < W && rc == 0; r++) {
            for (size_t j = 0; j < ng; j++)
                rank_begin(&G[j], real[j], N, r);
            for (int k = round * per; k < round * per + per && rc == 0; k++) {
                for (size_t j = 0; j < ng && rc == 0; j++)
                    rc = gp_run_generate_microbatch(&G[j], N, k, err);
                if (rc == 0)
                    rc = gp_run_accumulate(G, ng, k, err);
            }
        }
        for (size_t j = 0; j < ng; j++) {
            G[j].acc = real[j];
            G[j].errw = 1.0;
        }
        for (size_t j = 0; j < ng && rc == 0; j++)
            rc = collective(&G[j], err);
    }
    for (size_t j = 0; j < ng && rc == 0; j++) {
        chunk *c = &G[j];
        if ((rc = gp_run_generated_final(c, N, found_inf, err)) != 0)
            break;
        for (size_t i = 0; i < c->n; i++) {
            double e = 0;
            for (int m = 0; m < GP_MECH_GRAD_END; m++) {
                double d = D->cerr[m][c->off + i];
                e += d;
                c->st->coll.ss_mech[m] += d * d;
            }
            c->st->coll.ss += e * e;
        }
    }
    return rc;
}
