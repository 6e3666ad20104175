/* A runtime: one loop, one config, the namespaces, the runner installed
 * once into a folder of its own, the strip helper, and the runs in flight. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "isolation.h"
#include "names.h"
#include "node_version.h"
#include "runtime.h"
#include "runtime_ext.h"

#ifndef LUNARUN_DEFAULT_NODE
#define LUNARUN_DEFAULT_NODE ""
#endif

static int lr__write_file(const char *path, const char *data, size_t len, char *err) {
  FILE *f = fopen(path, "wb");
  if (!f) return lr__errf(err, "cannot write %s: %s", path, strerror(errno));
  size_t n = fwrite(data, 1, len, f);
  if (fclose(f) != 0 || n != len) return lr__errf(err, "cannot write %s: %s", path, strerror(errno));
  return 0;
}

static char *lr__path_join(const char *dir, const char *name) {
  lr_buf b = {0};
  lr__buf_append_str(&b, dir);
  lr__buf_append_char(&b, '/');
  lr__buf_append_str(&b, name);
  return lr__buf_steal(&b, NULL);
}

/* Removes what lr_runtime_new installed into rt->dir, and the folder. */
static void lr__runtime_remove_files(lr_runtime *rt) {
  char *runner_dir = lr__path_join(rt->dir, "runner");
  for (const struct lr_embedded *f = lr__runner_files; f->name; f++) {
    char *path = lr__path_join(runner_dir, f->name);
    unlink(path);
    free(path);
  }
  rmdir(runner_dir);
  free(runner_dir);
  lr__isolation_cleanup(rt->dir);
  rmdir(rt->dir);
}

/* nodePath, else $LUNARUN_NODE, else the Node the build was set up with,
 * else `node` on the host's PATH. The sandbox gets an empty environment, so
 * the path is resolved here, once. */
static char *lr__resolve_node(const lr_config *cfg, char *err) {
  const char *candidates[] = {cfg->node_path, getenv("LUNARUN_NODE"), LUNARUN_DEFAULT_NODE};
  for (size_t i = 0; i < 3; i++) {
    const char *c = candidates[i];
    if (!c || !*c) continue;
    if (access(c, X_OK) == 0) return lr__xstrdup(c);
    if (i == 0) {
      lr__errf(err, "config: nodePath \"%s\" is not an executable file", c);
      return NULL;
    }
  }
  const char *path = getenv("PATH");
  if (path) {
    char *copy = lr__xstrdup(path), *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
      char *p = lr__path_join(*dir ? dir : ".", "node");
      if (access(p, X_OK) == 0) {
        free(copy);
        return p;
      }
      free(p);
    }
    free(copy);
  }
  lr__errf(err, "no Node found: set nodePath (Node >= 22.13) or LUNARUN_NODE");
  return NULL;
}

void lr__runtime_describe_namespace(const lr_namespace *ns, lr_buf *b) {
    lr__buf_append_str(b, "{\"global\":");
    lr__json_write_string(ns->global, strlen(ns->global), b);
    lr__buf_append_str(b, ",\"members\":[");
    for (size_t m = 0; m < ns->nmembers; m++) {
      if (m) lr__buf_append_char(b, ',');
      lr__json_write_string(ns->members[m], ns->member_lens[m], b);
    }
    lr__buf_append_str(b, "],\"errorClass\":");
    if (ns->error_class) {
      lr__buf_append_str(b, "{\"name\":");
      lr__json_write_string(ns->error_class, strlen(ns->error_class), b);
      lr__buf_append_str(b, ",\"memberNameProperty\":");
      lr__json_write_string(ns->member_name_property, strlen(ns->member_name_property), b);
      lr__buf_append_char(b, '}');
    } else {
      lr__buf_append_str(b, "null");
    }
    lr__buf_append_char(b, '}');
}


/* An executable named name in PATH or the usual system folders. */
static char *lr__find_program(const char *name) {
  const char *path = getenv("PATH");
  lr_buf dirs = {0};
  lr__buf_append_str(&dirs, path ? path : "");
  lr__buf_append_str(&dirs, ":/usr/bin:/bin:/usr/sbin:/sbin");
  char *save = NULL, *found = NULL;
  for (char *dir = strtok_r(dirs.data, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
    char *p = lr__path_join(*dir ? dir : ".", name);
    if (access(p, X_OK) == 0) found = p;
    else free(p);
  }
  lr__buf_free(&dirs);
  return found;
}

/* With isolation = bwrap: the runner world-readable, the sandbox's /etc,
 * and both reachable by the sandbox's uid. */
static int lr__install_isolated(lr_runtime *rt, char *err) {
  if (lr__isolation_prepare(&rt->cfg, rt->dir, err) != 0) return -1;
  char *controller = lr__path_join(rt->dir, "runner/controller.mjs");
  int rc = lr__isolation_readable(controller, "the runner", err);
  free(controller);
  return rc;
}

int lr_runtime_new(uv_loop_t *loop, const lr_config *config, lr_runtime **out, char *err) {
  *out = NULL;
  lr_config defaults;
  if (!config) {
    lr_config_init(&defaults);
    config = &defaults;
  }
  if (lr_config_check(config, err) != 0) return -1;
  char *node = lr__resolve_node(config, err);
  if (!node) return -1;
  if (lr__node_check_version(node, err) != 0) {
    free(node);
    return -1;
  }
  char *prlimit = lr__find_program("prlimit");
  if (!prlimit) {
    free(node);
    return lr__errf(err, "maxProcessMemoryMb needs util-linux's prlimit, which is not installed");
  }
  char *bwrap = NULL;
  lr_e2b *e2b = NULL;
  if (config->backend == LR_BACKEND_E2B) {
    /* The remote VM is the sandbox; bubblewrap is not needed here. */
    e2b = lr__e2b_new(loop, config, err);
    if (!e2b) {
      free(node);
      free(prlimit);
      return -1;
    }
  } else if (config->isolation == LR_ISOLATION_BWRAP &&
      (lr__isolation_check(config, &bwrap, err) != 0 || lr__isolation_readable(node, "Node", err) != 0)) {
    free(bwrap);
    free(node);
    free(prlimit);
    return -1;
  }
  const char *root = config->runtime_root;
  if (!root || !*root) root = getenv("TMPDIR");
  if (!root || !*root) root = "/tmp";
  char *dir = lr__path_join(root, "lunarun-XXXXXX");
  if (!mkdtemp(dir)) {
    lr__errf(err, "config: runtimeRoot \"%s\": cannot make a folder there: %s", root, strerror(errno));
    free(dir);
    free(node);
    free(prlimit);
    free(bwrap);
    if (e2b) lr__e2b_close(e2b, NULL, NULL); /* its handles close on the loop's next turn */
    return -1;
  }
  lr_runtime *rt = lr__xcalloc(1, sizeof *rt);
  rt->loop = loop;
  lr_config_copy(&rt->cfg, config);
  rt->node_path = node;
  rt->prlimit_path = prlimit;
  rt->bwrap_path = bwrap;
  rt->e2b = e2b;
  rt->dir = dir;
  rt->strip_path = lr__path_join(dir, "runner/strip.mjs");
  /* The runner's files in a folder of their own, readable by a sandbox's
   * dropped uid: the sandbox sees this folder and nothing else of ours. */
  char *runner_dir = lr__path_join(dir, "runner");
  int made = 0;
  if (mkdir(runner_dir, 0755) != 0 || chmod(runner_dir, 0755) != 0)
    made = lr__errf(err, "cannot make %s: %s", runner_dir, strerror(errno));
  for (const struct lr_embedded *f = lr__runner_files; made == 0 && f->name; f++) {
    char *file = lr__path_join(runner_dir, f->name);
    made = lr__write_file(file, f->data, f->len, err);
    if (made == 0 && chmod(file, 0644) != 0)
      made = lr__errf(err, "cannot change the mode of %s: %s", file, strerror(errno));
    free(file);
  }
  free(runner_dir);
  if (made == 0 && bwrap) made = lr__install_isolated(rt, err);
  if (made != 0) {
    if (e2b) lr__e2b_close(e2b, NULL, NULL);
    lr__runtime_remove_files(rt);
    free(bwrap);
    free(rt->strip_path);
    free(dir);
    free(node);
    free(prlimit);
    lr_config_free(&rt->cfg);
    free(rt);
    return -1;
  }
  /* A runner that dies while we write its stdin must not kill the host. */
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
  rt->stripper = lr__stripper_new(loop, rt->node_path, rt->strip_path);
  lr__stripper_start(rt->stripper);
  *out = rt;
  lr__pool_refill(rt); /* the warm pool fills now: the first run finds it ready */
  return 0;
}

uv_loop_t *lr_runtime_loop(lr_runtime *rt) { return rt->loop; }
const lr_config *lr_runtime_config(lr_runtime *rt) { return &rt->cfg; }

/* True when name is already a global or an error class of the runtime. */
static bool lr__name_taken(const lr_runtime *rt, const char *name) {
  for (size_t i = 0; i < rt->nnamespaces; i++) {
    const lr_namespace *ns = rt->namespaces[i];
    if (strcmp(ns->global, name) == 0 || (ns->error_class && strcmp(ns->error_class, name) == 0))
      return true;
  }
  return false;
}

int lr_namespace_def_check(const lr_namespace_def *def, char *err) {
  if (!def->call) return lr__errf(err, "namespace \"%s\": no call function", def->global ? def->global : "");
  if (lr__name_check_identifier(def->global, "namespace global", err) != 0) return -1;
  if (def->error_class) {
    char inner[LR_ERR_MAX];
    if (lr__name_check_identifier(def->error_class, "error class name", inner) != 0)
      return lr__errf(err, "namespace \"%s\": %s", def->global, inner);
    if (strcmp(def->error_class, def->global) == 0)
      return lr__errf(err, "namespace \"%s\": error class name \"%s\" is already used", def->global, def->error_class);
    if (lr__name_check_member_property(def->member_name_property, inner) != 0)
      return lr__errf(err, "namespace \"%s\": %s", def->global, inner);
  } else if (def->member_name_property) {
    return lr__errf(err, "namespace \"%s\": memberNameProperty needs an error class", def->global);
  }
  for (size_t i = 0; i < def->nmembers; i++)
    if (!def->members[i] || !lr__utf8_valid(def->members[i], strlen(def->members[i]), false))
      return lr__errf(err, "namespace \"%s\": member names must be UTF-8 strings", def->global);
  for (size_t i = 0; def->policies && i < def->nmembers; i++)
    if (def->policies[i].timeout_ms > (uint64_t)LR_MAX_SAFE_INTEGER ||
        def->policies[i].max_calls > (uint64_t)LR_MAX_SAFE_INTEGER)
      return lr__errf(err, "namespace \"%s\": member \"%s\": timeout and call limit must be safe integers",
                      def->global, def->members[i]);
  return 0;
}

int lr_runtime_add_namespace(lr_runtime *rt, const lr_namespace_def *def, char *err) {
  if (rt->disposing) return lr__errf(err, "the runtime is disposed");
  if (lr_namespace_def_check(def, err) != 0) return -1;
  if (lr__name_taken(rt, def->global))
    return lr__errf(err, "namespace global \"%s\" is already used by another namespace or error class", def->global);
  if (def->error_class && lr__name_taken(rt, def->error_class))
    return lr__errf(err, "namespace \"%s\": error class name \"%s\" is already used", def->global, def->error_class);
  rt->namespaces = lr__xrealloc(rt->namespaces, (rt->nnamespaces + 1) * sizeof *rt->namespaces);
  lr_namespace *ns = lr__xcalloc(1, sizeof *ns);
  ns->index = rt->nnamespaces;
  rt->namespaces[rt->nnamespaces++] = ns;
  ns->global = lr__xstrdup(def->global);
  ns->error_class = def->error_class ? lr__xstrdup(def->error_class) : NULL;
  ns->member_name_property = def->error_class ? lr__xstrdup(def->member_name_property) : NULL;
  ns->nmembers = def->nmembers;
  ns->members = lr__xcalloc(def->nmembers, sizeof *ns->members);
  ns->member_lens = lr__xcalloc(def->nmembers, sizeof *ns->member_lens);
  for (size_t i = 0; i < def->nmembers; i++) {
    ns->members[i] = lr__xstrdup(def->members[i]);
    ns->member_lens[i] = strlen(def->members[i]);
  }
  ns->policies = lr__xcalloc(def->nmembers, sizeof *ns->policies);
  if (def->policies) memcpy(ns->policies, def->policies, def->nmembers * sizeof *ns->policies);
  ns->call = def->call;
  ns->cancel = def->cancel;
  ns->refused = def->refused;
  ns->ud = def->ud;
  ns->free_ud = def->free_ud;
  return 0;
}

const lr_namespace *lr__runtime_find_namespace(const lr_runtime *rt, const char *global, size_t len) {
  for (size_t i = 0; i < rt->nnamespaces; i++)
    if (strlen(rt->namespaces[i]->global) == len && memcmp(rt->namespaces[i]->global, global, len) == 0)
      return rt->namespaces[i];
  return NULL;
}

static void lr__runtime_maybe_disposed(lr_runtime *rt);

static void lr__on_e2b_closed(void *ud) {
  lr_runtime *rt = ud;
  rt->e2b = NULL;
  lr__runtime_maybe_disposed(rt);
}

static void lr__runtime_maybe_disposed(lr_runtime *rt) {
  if (!rt->disposing || rt->nruns > 0 || !rt->stripper_closed || rt->nsandboxes > 0 || rt->pool) return;
  if (rt->e2b) {
    /* The remote sandbox is deleted last. */
    lr__e2b_close(rt->e2b, lr__on_e2b_closed, rt);
    return;
  }
  for (size_t i = 0; i < rt->nnamespaces; i++) {
    lr_namespace *ns = rt->namespaces[i];
    if (ns->free_ud) ns->free_ud(ns->ud);
    for (size_t m = 0; m < ns->nmembers; m++) free(ns->members[m]);
    free(ns->members);
    free(ns->member_lens);
    free(ns->global);
    free(ns->error_class);
    free(ns->member_name_property);
    free(ns->policies);
    free(ns);
  }
  free(rt->namespaces);
  if (rt->close_ext) rt->close_ext(rt->ext);
  lr__runtime_remove_files(rt);
  free(rt->strip_path);
  free(rt->dir);
  free(rt->node_path);
  free(rt->prlimit_path);
  free(rt->bwrap_path);
  lr_config_free(&rt->cfg);
  void (*cb)(void *) = rt->on_disposed;
  void *ud = rt->disposed_ud;
  free(rt);
  if (cb) cb(ud);
}

void lr__runtime_run_finished(lr_runtime *rt, lr_run *run) {
  if (run->prev) run->prev->next = run->next;
  else rt->runs = run->next;
  if (run->next) run->next->prev = run->prev;
  rt->nruns--;
  lr__pool_refill(rt);
  lr__runtime_maybe_disposed(rt);
}

static void lr__on_stripper_closed(void *ud) {
  lr_runtime *rt = ud;
  rt->stripper_closed = true;
  lr__runtime_maybe_disposed(rt);
}

void lr_runtime_dispose(lr_runtime *rt, void (*on_disposed)(void *ud), void *ud) {
  if (rt->disposing) return;
  rt->disposing = true;
  rt->on_disposed = on_disposed;
  rt->disposed_ud = ud;
  for (lr_run *run = rt->runs; run; run = run->next)
    lr__run_settle(run, LR_ABORT, "the runtime was disposed", 24);
  lr__pool_close(rt);
  lr__stripper_close(rt->stripper, lr__on_stripper_closed, rt);
}

void lr__runtime_pool_closed(lr_runtime *rt) { lr__runtime_maybe_disposed(rt); }

/* A sandbox of this runtime is entirely gone: disposal waits for all. */
static void lr__on_sandbox_gone(void *ud) {
  lr_runtime *rt = ud;
  rt->nsandboxes--;
  lr__pool_refill(rt);
  lr__runtime_maybe_disposed(rt);
}

lr_sandbox *lr__runtime_start_sandbox(lr_runtime *rt, const lr_config *cfg, char err[LR_ERR_MAX]) {
  lr_sandbox_spec spec = {
      .cfg = cfg,
      .node_path = rt->node_path,
      .runtime_dir = rt->dir,
      .bwrap_path = rt->bwrap_path,
      .prlimit_path = rt->prlimit_path,
      .on_gone = lr__on_sandbox_gone,
      .owner = rt,
  };
  lr_sandbox *sb;
  int rc = rt->e2b ? lr__sandbox_e2b_start(rt->e2b, &spec, &sb, err)
                   : lr__sandbox_local_start(rt->loop, &spec, &sb, err);
  if (rc != 0) return NULL;
  rt->nsandboxes++;
  return sb;
}

lr_sandbox *lr__runtime_take_sandbox(lr_runtime *rt, const lr_config *cfg, char err[LR_ERR_MAX]) {
  lr_sandbox *sb = lr__pool_take(rt, cfg);
  return sb ? sb : lr__runtime_start_sandbox(rt, cfg, err);
}

void lr__runtime_set_ext(lr_runtime *rt, void *ext, void (*close_ext)(void *ext)) {
  rt->ext = ext;
  rt->close_ext = close_ext;
}

void *lr__runtime_ext(lr_runtime *rt) { return rt->ext; }
