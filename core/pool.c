/* The warm pool: sandboxes started before their program is known, each
 * with its worker up and warmed, each used for exactly one run and then
 * destroyed (isolation per run is unchanged). A run whose sandbox-relevant
 * settings differ from the runtime's starts one of its own.
 *
 * Refilled only when the runtime is idle: no run in flight and every used
 * sandbox gone (reaped), so a refill never competes with a run for the CPU
 * and a slot is reused only after its last sandbox is reaped. Disposal ends
 * the pooled sandboxes at once and never waits for a refill. */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"

typedef struct lr_pooled {
  lr_sandbox *sb;
  uint64_t born;
} lr_pooled;

struct lr_pool {
  lr_runtime *rt;
  lr_pooled *ready;
  size_t nready, size;
  uv_timer_t timer; /* idle lifetime and deferred refill */
  bool dormant;     /* idle sandboxes expired: no refill before the next run */
  bool closing;
};

/* True when a sandbox made for a could serve a run with config b: the same
 * heap cap, memory cap and isolation settings (Node and the runner are the
 * runtime's). */
static bool lr__same_sandbox(const lr_config *a, const lr_config *b) {
  if (a->max_old_generation_size_mb != b->max_old_generation_size_mb ||
      a->max_process_memory_mb != b->max_process_memory_mb || a->isolation != b->isolation ||
      a->network_host != b->network_host || a->tmp_mb != b->tmp_mb || a->max_processes != b->max_processes ||
      a->allow_child_processes != b->allow_child_processes || a->nmounts != b->nmounts)
    return false;
  for (size_t i = 0; i < a->nmounts; i++)
    if (strcmp(a->mounts[i].host, b->mounts[i].host) != 0 || strcmp(a->mounts[i].at, b->mounts[i].at) != 0 ||
        a->mounts[i].write != b->mounts[i].write)
      return false;
  return true;
}

static void lr__pool_arm(struct lr_pool *p);

static void lr__pool_on_timer(uv_timer_t *t) {
  struct lr_pool *p = t->data;
  uint64_t now = uv_now(p->rt->loop);
  size_t kept = 0;
  for (size_t i = 0; i < p->nready; i++) {
    lr_pooled *e = &p->ready[i];
    bool expired = now >= e->born + p->rt->cfg.pool_idle_ms;
    if (expired || !lr__sandbox_alive(e->sb)) {
      if (expired) p->dormant = true;
      lr__sandbox_terminate(e->sb);
    } else {
      p->ready[kept++] = *e;
    }
  }
  p->nready = kept;
  lr__pool_refill(p->rt);
  lr__pool_arm(p);
}

/* The timer fires at the earliest expiry. */
static void lr__pool_arm(struct lr_pool *p) {
  if (p->closing) return;
  if (p->nready == 0) {
    uv_timer_stop(&p->timer);
    return;
  }
  uint64_t first = p->ready[0].born;
  for (size_t i = 1; i < p->nready; i++)
    if (p->ready[i].born < first) first = p->ready[i].born;
  uint64_t at = first + p->rt->cfg.pool_idle_ms, now = uv_now(p->rt->loop);
  uv_timer_start(&p->timer, lr__pool_on_timer, at > now ? at - now : 0, 0);
}

static struct lr_pool *lr__pool_get(lr_runtime *rt) {
  if (rt->pool || rt->cfg.pool_size == 0 || rt->disposing) return rt->pool;
  /* A remote sandbox is made at the first run, not before (README, "E2B"). */
  if (rt->cfg.backend != LR_BACKEND_LOCAL) return NULL;
  if (rt->bwrap_path == NULL && rt->cfg.isolation != LR_ISOLATION_NONE) return NULL;
  struct lr_pool *p = lr__xcalloc(1, sizeof *p);
  p->rt = rt;
  p->size = rt->cfg.pool_size;
  p->ready = lr__xcalloc(p->size, sizeof *p->ready);
  uv_timer_init(rt->loop, &p->timer);
  p->timer.data = p;
  uv_unref((uv_handle_t *)&p->timer); /* the pool alone keeps no loop alive */
  rt->pool = p;
  return p;
}

lr_sandbox *lr__pool_take(lr_runtime *rt, const lr_config *cfg) {
  struct lr_pool *p = lr__pool_get(rt);
  if (!p || p->closing) return NULL;
  p->dormant = false;
  if (!lr__same_sandbox(&rt->cfg, cfg)) return NULL;
  while (p->nready > 0) {
    lr_pooled e = p->ready[0];
    memmove(p->ready, p->ready + 1, (p->nready - 1) * sizeof *p->ready);
    p->nready--;
    if (lr__sandbox_alive(e.sb)) {
      lr__pool_arm(p);
      return e.sb;
    }
    lr__sandbox_terminate(e.sb);
  }
  return NULL;
}

/* Called whenever a run ends or a sandbox is gone: refills when idle. */
void lr__pool_refill(lr_runtime *rt) {
  struct lr_pool *p = lr__pool_get(rt);
  if (!p || p->closing || p->dormant || rt->disposing || rt->nruns > 0) return;
  /* Every sandbox that is not pooled is gone: nothing is being reaped. */
  if (rt->nsandboxes != p->nready) return;
  bool added = false;
  while (p->nready < p->size) {
    char err[LR_ERR_MAX];
    lr_sandbox *sb = lr__runtime_start_sandbox(rt, &rt->cfg, err);
    if (!sb) break; /* the next run starts its own and reports why */
    p->ready[p->nready++] = (lr_pooled){.sb = sb, .born = uv_now(rt->loop)};
    added = true;
  }
  if (added) lr__pool_arm(p);
}

static void lr__pool_on_closed(uv_handle_t *h) {
  struct lr_pool *p = h->data;
  lr_runtime *rt = p->rt;
  free(p->ready);
  free(p);
  rt->pool = NULL;
  lr__runtime_pool_closed(rt);
}

void lr__pool_close(lr_runtime *rt) {
  struct lr_pool *p = rt->pool;
  if (!p || p->closing) return;
  p->closing = true;
  for (size_t i = 0; i < p->nready; i++) lr__sandbox_terminate(p->ready[i].sb);
  p->nready = 0;
  uv_close((uv_handle_t *)&p->timer, lr__pool_on_closed);
}
