/* gradprec_main.c — the `gradprec` executable: everything lives in gradprec_core. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../harness/sources/gp_plugin_worker.h"
#include "gp_cli.h"

/* The hidden command that serves a device-memory plugin: `gradprec __worker plugin:PATH
 * FD`, started by the plugin's worker (harness/sources/gp_plugin_worker.h), never by a user. */
#define WORKER_CMD "__worker"

static int serve(const char *spec, const char *fdtext)
{
    char *end;
    long fd = strtol(fdtext, &end, 10);
    if (strncmp(spec, "plugin:", 7) != 0 || *end || end == fdtext || fd < 0 || fd > 1 << 20) {
        fprintf(stderr, "gradprec " WORKER_CMD ": started by gradprec itself (plugin:PATH FD), not by hand\n");
        return 2;
    }
    return gp_worker_main((int)fd, spec + 7);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], WORKER_CMD) == 0)
    {
        int st = argc == 4 ? serve(argv[2], argv[3]) : serve("", "");
        fflush(NULL);
        _exit(st); /* as a forked worker ends: the process holds the plugin until the end */
    }
    /* This very program serves device-memory plugins (a fresh image initialises CUDA). */
    const char *const worker[] = {"/proc/self/exe", WORKER_CMD, NULL};
    gp_worker_set_program(worker);
    return gp_cli_main(argc, argv, stdout, stderr);
}
