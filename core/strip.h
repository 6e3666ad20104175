/* Type stripping on the host (SPEC §3): one long-lived helper process per
 * runtime runs Node's module.stripTypeScriptTypes on program text. It only
 * parses; it never executes a program. */
#ifndef LR_STRIP_H
#define LR_STRIP_H

#include <uv.h>
#include "util.h"

typedef struct lr_stripper lr_stripper;

/* ok: text is the stripped program. !ok && !broken: text is the message of
 * a program that does not strip (kind exception). broken: the helper itself
 * failed (it could not start or died): text says why. */
typedef void (*lr_strip_cb)(void *ud, bool ok, bool broken, const char *text, size_t len);

lr_stripper *lr__stripper_new(uv_loop_t *loop, const char *node_path, const char *script);

/* Starts the helper now (it warms its stripper as it starts), so that the
 * first program does not wait for it. */
void lr__stripper_start(lr_stripper *st);

/* Queues one program; returns a request id for lr__stripper_cancel. The
 * callback is always called later, never from inside this call. */
uint64_t lr__stripper_strip(lr_stripper *st, const char *program, size_t len,
                            lr_strip_cb cb, void *ud);

/* The callback of request id will not be called. */
void lr__stripper_cancel(lr_stripper *st, uint64_t id);

/* Stops the helper; calls on_closed (may be NULL) once it is gone, then frees. */
void lr__stripper_close(lr_stripper *st, void (*on_closed)(void *ud), void *ud);

#endif
