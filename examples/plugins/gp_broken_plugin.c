/* gp_broken_plugin.c — plugins that are wrong in form, to test the loader's errors:
 * GP_BROKEN_NOSYM exports no gp_plugin_entry; GP_BROKEN_ABI99 claims ABI version 99. */
#include "gp_plugin_abi.h"

static int nothing(const gp_plugin_accumulate_args *a)
{
    (void)a;
    return 0;
}

static int nothing_unscale(gp_plugin_unscale_args *a)
{
    (void)a;
    return 0;
}

static const gp_plugin plugin = {99u, "abi99", GP_PLUGIN_HOST, nothing, nothing_unscale, 0, 0, 0, 0, 0};

#ifdef GP_BROKEN_NOSYM
const gp_plugin *not_the_entry(void);
const gp_plugin *not_the_entry(void)
#else
const gp_plugin *gp_plugin_entry(void);
const gp_plugin *gp_plugin_entry(void)
#endif
{
    return &plugin;
}
