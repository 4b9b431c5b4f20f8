/* gp_hostile_plugin.c — plugins that misbehave at run time, to test that gradprec's
 * plugin worker reports them (exit 3, one line naming plugin, entry point, scenario):
 * GP_HOSTILE_SEGV segfaults in accumulate_many, GP_HOSTILE_EXIT0 calls exit(0) in
 * accumulate, GP_HOSTILE_HANG never returns from accumulate, GP_HOSTILE_ABORT aborts in
 * unscale, GP_HOSTILE_ENTRY_SEGV segfaults in gp_plugin_entry, GP_HOSTILE_FAIL7 returns
 * 7 from accumulate_many. GP_HOSTILE_TRUNCATE truncates a file while the run reads it
 * (tests/test_replay.c): at its first accumulate or accumulate_many call, the file named by
 * the environment variable GP_HOSTILE_TRUNCATE="BYTES:PATH" is cut to BYTES bytes. Everything
 * else does nothing and returns 0. */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(GP_HOSTILE_TRUNCATE)
static void truncate_once(void)
{
    static int done;
    const char *v = getenv("GP_HOSTILE_TRUNCATE");
    char *path = NULL;
    long long bytes = v ? strtoll(v, &path, 10) : -1;
    if (!done && bytes >= 0 && path && *path == ':' && truncate(path + 1, (off_t)bytes) != 0)
        _exit(97); /* the test cannot happen: the worker's exit is reported */
    done = 1;
}
#endif

#include "gp_plugin_abi.h"

static int acc(const gp_plugin_accumulate_args *a)
{
    (void)a;
#if defined(GP_HOSTILE_TRUNCATE)
    truncate_once();
#endif
#if defined(GP_HOSTILE_EXIT0)
    exit(0);
#elif defined(GP_HOSTILE_HANG)
    for (;;)
        pause();
#endif
    return 0;
}

static int acc_many(const gp_plugin_accumulate_args *a, uint32_t count)
{
    (void)a;
    (void)count;
#if defined(GP_HOSTILE_TRUNCATE)
    truncate_once();
#endif
#if defined(GP_HOSTILE_SEGV)
    raise(SIGSEGV);
#elif defined(GP_HOSTILE_FAIL7)
    return 7;
#endif
    return 0;
}

static int unscale(gp_plugin_unscale_args *a)
{
    (void)a;
#if defined(GP_HOSTILE_ABORT)
    abort();
#endif
    return 0;
}

static int adamw(const gp_plugin_adamw_args *a)
{
    (void)a;
    return 0;
}

static const gp_plugin plugin = {GP_PLUGIN_ABI_VERSION, "hostile", GP_PLUGIN_HOST, acc, unscale, adamw, 0, 0, 0,
                                 acc_many};

const gp_plugin *gp_plugin_entry(void);
const gp_plugin *gp_plugin_entry(void)
{
#if defined(GP_HOSTILE_ENTRY_SEGV)
    raise(SIGSEGV);
#endif
    return &plugin;
}
