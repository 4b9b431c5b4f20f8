/* gp_plugin_worker.h — a user's plugin runs in a forked worker process, so that its
 * crash, abort, exit() or hang is reported as what it is (exit 3, one line naming the
 * plugin, the entry point and the scenario) instead of killing gradprec or passing for
 * a result. The parent holds a proxy table (host memory, the plugin's optional entries
 * only) whose calls ship the arguments and arrays over a socket and wait for the
 * answer no longer than the thread's time limit (gp_deadline_set). */
#ifndef GP_PLUGIN_WORKER_H
#define GP_PLUGIN_WORKER_H

#include <stddef.h>

#include "../../base/gp_error.h"
#include "../../kernels/gp_plugin_abi.h"

/* What a proxy call returns when the worker failed (crashed, exited, hung, or the
 * connection broke); gp_worker_fault says how. No plugin returns it (its codes are
 * 0, 1 and its own failures, all passed through). */
#define GP_WORKER_FAULT (-1000000)

typedef struct gp_worker gp_worker;

/* Fork a worker that loads the plugin at path (dlopen, gp_plugin_entry and the ABI
 * checks; a device-memory plugin behind the CUDA staging adapter, in the worker) and
 * serves its table. A device-memory plugin is served by the program set with
 * gp_worker_set_program, which the forked worker execs (a fresh process, where CUDA
 * initialises even when this process used CUDA first); with none set, by the forked
 * worker, which first checks that CUDA works there (else the plugin is refused). Returns 0 with *w and *ops (the proxy table; valid until
 * gp_worker_close) and the plugin's name in name[namelen]; -1 with err when the plugin
 * was refused (bad usage: "plugin PATH: why"); -3 with err when the worker failed
 * while loading it (crashed in gp_plugin_entry, hung, could not be started). */
int gp_worker_open(const char *path, gp_worker **w, const gp_plugin **ops, char *name, size_t namelen,
                   gp_error *err);

/* A path "python:MODULE:NAME" starts a Python backend instead: the worker process execs
 * the interpreter ($GP_PYTHON, else python3 on PATH) with `-m gradprec._serve
 * MODULE:NAME FD`, which serves the object's table over the inherited socket through
 * gp_worker_serve (the public gradprec_serve). Everything else is as for a plugin. */

/* The program that serves device-memory plugins (CUDA cannot be used in a child forked
 * after its parent used CUDA, so such a plugin's worker must be a fresh program):
 * argv[0] is the file to exec (searched in PATH), argv[1..] its leading arguments,
 * NULL-terminated, at most 8; the worker appends "plugin:PATH" and the socket's fd
 * number, and the program calls gp_worker_main. Copied. argv NULL or empty: none (a
 * device-memory plugin's worker is then only forked, and when CUDA cannot be
 * initialised there it is refused with one line naming the cause). The gradprec
 * command sets itself, the Python package its interpreter. 0, or -1 (too many, no
 * memory: nothing changed). */
int gp_worker_set_program(const char *const *argv);

/* The worker side of a program set by gp_worker_set_program: load the plugin at path
 * and serve it over the connected socket fd until the parent closes it. Returns the
 * program's exit status: 0 done, 2 the plugin was refused (the parent prints why), 3
 * the connection broke. */
int gp_worker_main(int fd, const char *path);

/* Serve table p to the gradprec process at the other end of socket fd (the worker
 * protocol), checking it first as gp_plugin_table_adopt does; with p NULL (or refused),
 * tell the parent why (`refusal`) and return. fault (faultlen bytes, may be NULL): a
 * buffer that p's functions may fill with one line before returning a failure (neither
 * 0 nor 1); the parent then reports that line as the backend's fault (exit 3) instead
 * of the code. A line left there with code 1 (the configuration is refused) is the
 * refusal's reason: the parent's call returns 1 and gp_worker_refusal gives the line.
 * Returns 0 when the parent closed the connection, -1 when the table was refused or the
 * connection broke. Serves one call at a time. */
int gp_worker_serve(int fd, const gp_plugin *p, const char *refusal, char *fault, size_t faultlen);

/* How the worker failed ("plugin PATH: ENTRY: crashed (signal 11, Segmentation fault)"),
 * or NULL while it is healthy. */
const char *gp_worker_fault(const gp_worker *w);

/* The reason the backend gave for the last call this thread made that returned 1 (the
 * configuration refused: a Python backend's NotImplementedError, "adamw: why"), or NULL
 * when it gave none. */
const char *gp_worker_refusal(void);

/* Stop the worker (it exits when its socket closes; killed if it does not) and free w. */
void gp_worker_close(gp_worker *w);

#endif
