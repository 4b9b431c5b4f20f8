/* gp_names.c — see gp_names.h; the name tables are made from kernels/gp_vocab.h. */
#include "gp_names.h"

#include <stdio.h>
#include <string.h>

#include "arith/gp_accum.h"
#include "arith/gp_adamw.h"
#include "cpu/gp_lowbit.h"
#include "gp_plugin_abi.h"
#include "gp_vocab.h"

/* Each list's positions are its enum's values and the plugin ABI's (gp_vocab.h). */
#define GP_VOCAB_ENTRY(E, NAME) NAME, /* a list without ABI values (GP_VOCAB_NAME_ABI: with) */
static const char *const format_names[] = {GP_VOCAB_FORMATS(GP_VOCAB_NAME_ABI)};
static const char *const rmode_names[] = {GP_VOCAB_RMODES(GP_VOCAB_ENTRY)};
static const char *const acc_names[] = {GP_VOCAB_ACC_ROUNDINGS(GP_VOCAB_NAME_ABI)};
static const char *const variant_names[] = {GP_VOCAB_ADAMW_VARIANTS(GP_VOCAB_NAME_ABI)};
static const char *const eval_names[] = {GP_VOCAB_ADAMW_EVALS(GP_VOCAB_NAME_ABI)};
static const char *const state_names[] = {GP_VOCAB_LOWBIT_STATES(GP_VOCAB_NAME_ABI)};
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* The value of each entry is its position, and the ABI constant equals the enum's. */
#define GP_VOCAB_POS_ABI(E, A, NAME) E##_pos_,
#define GP_VOCAB_POS(E, NAME) E##_pos_,
#define GP_VOCAB_CHECK_ABI(E, A, NAME)                                                             \
    _Static_assert((int)(E) == (int)E##_pos_, #E " is not at its position in gp_vocab.h");          \
    _Static_assert((int)(A) == (int)(E), #A " differs from " #E);
#define GP_VOCAB_CHECK(E, NAME) _Static_assert((int)(E) == (int)E##_pos_, #E " is not at its position in gp_vocab.h");
enum { GP_VOCAB_FORMATS(GP_VOCAB_POS_ABI) gp_vocab_nformats_ };
enum { GP_VOCAB_RMODES(GP_VOCAB_POS) gp_vocab_nrmodes_ };
enum { GP_VOCAB_ACC_ROUNDINGS(GP_VOCAB_POS_ABI) gp_vocab_nacc_ };
enum { GP_VOCAB_ADAMW_VARIANTS(GP_VOCAB_POS_ABI) gp_vocab_nvariants_ };
enum { GP_VOCAB_ADAMW_EVALS(GP_VOCAB_POS_ABI) gp_vocab_nevals_ };
enum { GP_VOCAB_LOWBIT_STATES(GP_VOCAB_POS_ABI) gp_vocab_nstates_ };
GP_VOCAB_FORMATS(GP_VOCAB_CHECK_ABI)
GP_VOCAB_RMODES(GP_VOCAB_CHECK)
GP_VOCAB_ACC_ROUNDINGS(GP_VOCAB_CHECK_ABI)
GP_VOCAB_ADAMW_VARIANTS(GP_VOCAB_CHECK_ABI)
GP_VOCAB_ADAMW_EVALS(GP_VOCAB_CHECK_ABI)
GP_VOCAB_LOWBIT_STATES(GP_VOCAB_CHECK_ABI)
_Static_assert((int)gp_vocab_nformats_ == (int)GP_NFORMATS, "gp_format has a value gp_vocab.h's GP_VOCAB_FORMATS lacks");
_Static_assert((int)gp_vocab_nrmodes_ == (int)GP_STOCHASTIC + 1, "gp_rmode: GP_VOCAB_RMODES must end with its last value");
_Static_assert((int)gp_vocab_nacc_ == (int)GP_ACC_KAHAN + 1, "gp_acc_rounding: GP_VOCAB_ACC_ROUNDINGS must end with its last value");
_Static_assert((int)gp_vocab_nvariants_ == (int)GP_ADAMW_TORCH_FUSED_CPU + 1, "gp_adamw_variant: GP_VOCAB_ADAMW_VARIANTS must end with its last value");
_Static_assert((int)gp_vocab_nevals_ == (int)GP_ADAMW_TORCH_CPU_FOREACH + 1, "gp_adamw_eval: GP_VOCAB_ADAMW_EVALS must end with its last value");
_Static_assert((int)gp_vocab_nstates_ == (int)GP_LOWBIT_COUNT, "gp_lowbit has a value gp_vocab.h's GP_VOCAB_LOWBIT_STATES lacks");

static const struct {
    const char *kind;
    const char *const *names;
    int n;
} vocab[GP_VOCAB_NKINDS] = {
    [GP_VOCAB_FORMAT] = {"format", format_names, COUNT(format_names)},
    [GP_VOCAB_RMODE] = {"rounding", rmode_names, COUNT(rmode_names)},
    [GP_VOCAB_ACC_ROUNDING] = {"acc_rounding", acc_names, COUNT(acc_names)},
    [GP_VOCAB_ADAMW_VARIANT] = {"adamw_variant", variant_names, COUNT(variant_names)},
    [GP_VOCAB_ADAMW_EVAL] = {"adamw_evaluation", eval_names, COUNT(eval_names)},
    [GP_VOCAB_LOWBIT_STATE] = {"state", state_names, COUNT(state_names)},
};

const char *gp_vocab_kind_name(gp_vocab_kind k)
{
    return (unsigned)k < GP_VOCAB_NKINDS ? vocab[k].kind : NULL;
}

int gp_vocab_count(gp_vocab_kind k)
{
    return (unsigned)k < GP_VOCAB_NKINDS ? vocab[k].n : 0;
}

const char *gp_vocab_name(gp_vocab_kind k, int i)
{
    return i >= 0 && i < gp_vocab_count(k) ? vocab[k].names[i] : NULL;
}

int gp_vocab_parse(gp_vocab_kind k, const char *s)
{
    for (int i = 0; s && i < gp_vocab_count(k); i++)
        if (strcmp(s, vocab[k].names[i]) == 0)
            return i;
    return -1;
}

const char *gp_format_name(gp_format f)
{
    const char *s = gp_vocab_name(GP_VOCAB_FORMAT, (int)f);
    return s ? s : "?";
}

int gp_format_parse(const char *s, gp_format *f)
{
    int i = gp_vocab_parse(GP_VOCAB_FORMAT, s);
    if (i < 0 && strncmp(s, "fp8_", 4) != 0 && strlen(s) < 16) { /* "e4m3" for "fp8_e4m3" */
        char full[24];
        snprintf(full, sizeof full, "fp8_%s", s);
        i = gp_vocab_parse(GP_VOCAB_FORMAT, full);
    }
    if (i < 0)
        return -1;
    *f = (gp_format)i;
    return 0;
}

const char *gp_rmode_name(gp_rmode m)
{
    const char *s = gp_vocab_name(GP_VOCAB_RMODE, (int)m);
    return s ? s : "?";
}

int gp_rmode_parse(const char *s, gp_rmode *m)
{
    int i = gp_vocab_parse(GP_VOCAB_RMODE, s);
    if (i < 0)
        return -1;
    *m = (gp_rmode)i;
    return 0;
}

const char *gp_event_name(unsigned bit)
{
    switch (bit) {
    case GP_EV_INEXACT: return "inexact";
    case GP_EV_UNDERFLOW: return "underflow";
    case GP_EV_OVERFLOW: return "overflow";
    case GP_EV_INVALID: return "invalid";
    case GP_EV_ABSORBED: return "absorbed";
    default: return "?";
    }
}

void gp_events_format(unsigned ev, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned bit = 1; bit <= GP_EV_ABSORBED; bit <<= 1)
        if (ev & bit)
            used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "%s%s",
                                     used ? "," : "", gp_event_name(bit));
    if (!used)
        snprintf(buf, n, "none");
}
