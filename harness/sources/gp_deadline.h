/* gp_deadline.h — the time limit of the scenario a thread runs (per thread: -j workers
 * each have their own), which the runner checks between units of work and a plugin
 * worker's proxy waits by. */
#ifndef GP_DEADLINE_H
#define GP_DEADLINE_H

/* gp_deadline_set(s) starts a limit of s seconds from now (s <= 0: no limit). The runner
 * stops a scenario whose limit has passed (gp_deadline_passed), and a plugin worker waits
 * for a call no longer than the limit. */
void gp_deadline_set(double seconds);
int gp_deadline_passed(void);
/* Seconds left (a huge value without a limit), and the limit itself (0: none). */
double gp_deadline_left(void);
double gp_deadline_limit(void);

#endif
