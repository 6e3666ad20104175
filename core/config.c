/* Configuration rules of SPEC §2: every value a positive safe integer, and
 * the rules between keys. Messages name the key. */
#include "isolation.h"
#include "lunarun.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LR_MAX_WALL_MS 2147483647ull

typedef struct lr_config_key {
  const char *name;
  size_t offset;
} lr_config_key;

static const lr_config_key lr__numeric_keys[] = {
    {"computeMs", offsetof(lr_config, compute_ms)},
    {"maxWallMs", offsetof(lr_config, max_wall_ms)},
    {"maxOutputBytes", offsetof(lr_config, max_output_bytes)},
    {"maxOldGenerationSizeMb", offsetof(lr_config, max_old_generation_size_mb)},
    {"maxFrameBytes", offsetof(lr_config, max_frame_bytes)},
    {"killGraceMs", offsetof(lr_config, kill_grace_ms)},
    {"maxProcessMemoryMb", offsetof(lr_config, max_process_memory_mb)},
    {"tmpMb", offsetof(lr_config, tmp_mb)},
    {"maxProcesses", offsetof(lr_config, max_processes)},
    {"poolSize", offsetof(lr_config, pool_size)}, /* the one that may be 0 */
    {"poolIdleMs", offsetof(lr_config, pool_idle_ms)},
    {"e2bTimeoutMs", offsetof(lr_config, e2b_timeout_ms)},
};

static const lr_config_key lr__string_keys[] = {
    {"nodePath", offsetof(lr_config, node_path)},
    {"runtimeRoot", offsetof(lr_config, runtime_root)},
    {"e2bTemplate", offsetof(lr_config, e2b_template)},
    {"e2bDomain", offsetof(lr_config, e2b_domain)},
    {"e2bApiUrl", offsetof(lr_config, e2b_api_url)},
    {"e2bSandboxUrl", offsetof(lr_config, e2b_sandbox_url)},
    {"e2bUser", offsetof(lr_config, e2b_user)},
};

#define LR_COUNT(a) (sizeof(a) / sizeof((a)[0]))

void lr_config_init(lr_config *c) {
  memset(c, 0, sizeof *c);
  c->compute_ms = 60000;
  c->max_wall_ms = 600000;
  c->max_output_bytes = 67108864;
  c->max_old_generation_size_mb = 512;
  c->max_frame_bytes = 268435456;
  c->kill_grace_ms = 2000;
  /* Node with a worker reserves about 1.9 GiB of address space before the
   * program allocates anything; 4 GiB leaves about 2 GiB for the program. */
  c->max_process_memory_mb = 4096;
  c->isolation = LR_ISOLATION_BWRAP;
  c->network_host = false;
  c->tmp_mb = 64;
  c->max_processes = 256;
  c->allow_child_processes = true;
  c->pool_size = 2;
  c->pool_idle_ms = 300000;
  c->backend = LR_BACKEND_LOCAL;
  c->e2b_timeout_ms = 300000;
}

static const lr_config_key *lr__find(const lr_config_key *keys, size_t n, const char *key) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(keys[i].name, key) == 0) return &keys[i];
  return NULL;
}

static int lr__unknown_key(const char *key, char *err) {
  return lr__errf(err,
                  "config: unknown key \"%s\" (known: computeMs, maxWallMs, maxOutputBytes, "
                  "maxOldGenerationSizeMb, maxFrameBytes, killGraceMs, maxProcessMemoryMb, nodePath, "
                  "runtimeRoot, isolation, network, tmpMb, maxProcesses, allowChildProcesses, mounts, "
                  "poolSize, poolIdleMs, backend, e2bTemplate, e2bDomain, e2bApiUrl, e2bSandboxUrl, e2bUser, "
                  "e2bTimeoutMs)",
                  key);
}

/* Each value alone: a positive safe integer, and the per-key bounds. */
static int lr__check_value(const char *key, double v, char *err) {
  if (strcmp(key, "poolSize") == 0) {
    if (!(v >= 0 && v <= LR_MAX_SAFE_INTEGER) || floor(v) != v)
      return lr__errf(err, "config: poolSize must be a non-negative safe integer (0 .. 2^53-1)");
    return 0;
  }
  if (!(v >= 1 && v <= LR_MAX_SAFE_INTEGER) || floor(v) != v)
    return lr__errf(err, "config: %s must be a positive safe integer (1 .. 2^53-1)", key);
  if (strcmp(key, "maxOutputBytes") == 0 && v < 4)
    return lr__errf(err, "config: maxOutputBytes must be at least 4");
  if (strcmp(key, "maxWallMs") == 0 && v > (double)LR_MAX_WALL_MS)
    return lr__errf(err, "config: maxWallMs must be at most 2147483647");
  return 0;
}

/* The keys that are neither numbers nor free strings. */
static bool lr__special_key(const char *key) {
  return strcmp(key, "isolation") == 0 || strcmp(key, "backend") == 0 || strcmp(key, "network") == 0 ||
         strcmp(key, "allowChildProcesses") == 0 || strcmp(key, "mounts") == 0;
}

static int lr__special_type(const char *key, const char *got, char *err) {
  if (strcmp(key, "isolation") == 0)
    return lr__errf(err, "config: isolation must be \"bwrap\" or \"none\", got %s", got);
  if (strcmp(key, "backend") == 0)
    return lr__errf(err, "config: backend must be \"local\" or \"e2b\", got %s", got);
  if (strcmp(key, "network") == 0)
    return lr__errf(err, "config: network must be \"none\" or \"host\", got %s", got);
  if (strcmp(key, "allowChildProcesses") == 0)
    return lr__errf(err, "config: allowChildProcesses must be a boolean (true or false), got %s", got);
  return lr__errf(err, "config: mounts must be a list of { host = \"/abs/path\", at = \"/abs/path\", write = false } "
                       "tables (in a config file or lunarun.runtime{}), got %s", got);
}

int lr__config_set_bool(lr_config *c, const char *key, bool value, char *err) {
  if (strcmp(key, "allowChildProcesses") == 0) {
    c->allow_child_processes = value;
    return 0;
  }
  if (lr__special_key(key)) return lr__special_type(key, "a boolean", err);
  if (lr__find(lr__string_keys, LR_COUNT(lr__string_keys), key))
    return lr__errf(err, "config: %s must be a string", key);
  if (lr__find(lr__numeric_keys, LR_COUNT(lr__numeric_keys), key))
    return lr__errf(err, "config: %s must be a number, got a boolean", key);
  return lr__unknown_key(key, err);
}

/* isolation, backend, network, allowChildProcesses from text (as --set gives them). */
static int lr__set_special(lr_config *c, const char *key, const char *value, char *err) {
  char got[LR_ERR_MAX / 2];
  snprintf(got, sizeof got, "\"%.200s\"", value);
  if (strcmp(key, "isolation") == 0) {
    if (strcmp(value, "bwrap") == 0) c->isolation = LR_ISOLATION_BWRAP;
    else if (strcmp(value, "none") == 0) c->isolation = LR_ISOLATION_NONE;
    else return lr__special_type(key, got, err);
  } else if (strcmp(key, "backend") == 0) {
    if (strcmp(value, "local") == 0) c->backend = LR_BACKEND_LOCAL;
    else if (strcmp(value, "e2b") == 0) c->backend = LR_BACKEND_E2B;
    else return lr__special_type(key, got, err);
  } else if (strcmp(key, "network") == 0) {
    if (strcmp(value, "none") == 0) c->network_host = false;
    else if (strcmp(value, "host") == 0) c->network_host = true;
    else return lr__special_type(key, got, err);
  } else if (strcmp(key, "allowChildProcesses") == 0) {
    if (strcmp(value, "true") == 0) c->allow_child_processes = true;
    else if (strcmp(value, "false") == 0) c->allow_child_processes = false;
    else return lr__special_type(key, got, err);
  } else {
    return lr__special_type(key, "a string", err);
  }
  return 0;
}

static bool lr__under(const char *path, const char *dir) {
  size_t n = strlen(dir);
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* An absolute path without "." or ".." components, empty components or a
 * trailing slash: what the sandbox shows must be what the check saw. */
static bool lr__clean_abs_path(const char *p) {
  if (p[0] != '/') return false;
  for (const char *s = p; *s;) {
    s++; /* past '/' */
    size_t n = strcspn(s, "/");
    if (n == 0 && (*s == '/' || (*s == '\0' && s - p > 1))) return false;
    if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.')) return false;
    s += n;
  }
  return true;
}

int lr_config_add_mount(lr_config *c, const char *host, const char *at, bool write, char *err) {
  if (!host || !lr__clean_abs_path(host))
    return lr__errf(err, "config: mounts: host \"%.200s\" must be an absolute path (no \".\", \"..\" or "
                         "trailing \"/\")", host ? host : "");
  if (!at || !lr__clean_abs_path(at))
    return lr__errf(err, "config: mounts: at \"%.200s\" must be an absolute path (no \".\", \"..\" or "
                         "trailing \"/\")", at ? at : "");
  struct stat st;
  if (stat(host, &st) != 0)
    return lr__errf(err, "config: mounts: host \"%.200s\" does not exist", host);
  static const char *const reserved[] = {"/proc", "/dev", "/usr", "/opt/lunarun", "/opt/node"};
  if (strcmp(at, "/") == 0 || strcmp(at, "/tmp") == 0)
    return lr__errf(err, "config: mounts: at \"%s\" is not allowed (the sandbox's own)", at);
  for (size_t i = 0; i < LR_COUNT(reserved); i++)
    if (lr__under(at, reserved[i]))
      return lr__errf(err, "config: mounts: at \"%.200s\" is not allowed (under %s, the sandbox's own)", at,
                      reserved[i]);
  c->mounts = lr__xrealloc(c->mounts, (c->nmounts + 1) * sizeof *c->mounts);
  c->mounts[c->nmounts].host = lr__xstrdup(host);
  c->mounts[c->nmounts].at = lr__xstrdup(at);
  c->mounts[c->nmounts].write = write;
  c->nmounts++;
  return 0;
}

int lr_config_set_number(lr_config *c, const char *key, double value, char *err) {
  const lr_config_key *k = lr__find(lr__numeric_keys, LR_COUNT(lr__numeric_keys), key);
  if (!k) {
    if (lr__find(lr__string_keys, LR_COUNT(lr__string_keys), key))
      return lr__errf(err, "config: %s must be a string", key);
    if (lr__special_key(key)) return lr__special_type(key, "a number", err);
    return lr__unknown_key(key, err);
  }
  if (lr__check_value(key, value, err)) return -1;
  *(uint64_t *)((char *)c + k->offset) = (uint64_t)value;
  return 0;
}

int lr_config_set(lr_config *c, const char *key, const char *value, char *err) {
  const lr_config_key *k = lr__find(lr__string_keys, LR_COUNT(lr__string_keys), key);
  if (k) {
    if (!*value) return lr__errf(err, "config: %s must not be empty", key);
    char **slot = (char **)((char *)c + k->offset);
    free(*slot);
    *slot = lr__xstrdup(value);
    return 0;
  }
  if (lr__special_key(key)) return lr__set_special(c, key, value, err);
  if (!lr__find(lr__numeric_keys, LR_COUNT(lr__numeric_keys), key)) return lr__unknown_key(key, err);
  /* Digits only: "1e3", "0x10", " 5" or "5ms" are refused rather than guessed. */
  const char *p = value;
  const char *what = strcmp(key, "poolSize") == 0 ? "non-negative" : "positive";
  if (!*p) return lr__errf(err, "config: %s must be a %s safe integer, got an empty value", key, what);
  for (; *p; p++)
    if (*p < '0' || *p > '9')
      return lr__errf(err, "config: %s must be a %s safe integer, got \"%.200s\"", key, what, value);
  if (strlen(value) > 16)
    return lr__errf(err, "config: %s must be a %s safe integer (%s .. 2^53-1), got \"%.200s\"", key, what,
                    *what == 'n' ? "0" : "1", value);
  return lr_config_set_number(c, key, strtod(value, NULL), err);
}

int lr_config_check(const lr_config *c, char *err) {
  for (size_t i = 0; i < LR_COUNT(lr__numeric_keys); i++) {
    uint64_t v = *(const uint64_t *)((const char *)c + lr__numeric_keys[i].offset);
    if (v > (uint64_t)LR_MAX_SAFE_INTEGER) v = 0; /* makes the check below fail */
    if (lr__check_value(lr__numeric_keys[i].name, (double)v, err)) return -1;
  }
  if (c->isolation != LR_ISOLATION_BWRAP && c->isolation != LR_ISOLATION_NONE)
    return lr__errf(err, "config: isolation must be \"bwrap\" or \"none\"");
  if (c->backend != LR_BACKEND_LOCAL && c->backend != LR_BACKEND_E2B)
    return lr__errf(err, "config: backend must be \"local\" or \"e2b\"");
  if (c->max_frame_bytes < c->max_output_bytes)
    return lr__errf(err, "config: maxFrameBytes (%llu) must be at least maxOutputBytes (%llu)",
                    (unsigned long long)c->max_frame_bytes, (unsigned long long)c->max_output_bytes);
  return 0;
}

void lr_config_copy(lr_config *dst, const lr_config *src) {
  *dst = *src;
  for (size_t i = 0; i < LR_COUNT(lr__string_keys); i++) {
    char **slot = (char **)((char *)dst + lr__string_keys[i].offset);
    if (*slot) *slot = lr__xstrdup(*slot);
  }
  dst->mounts = NULL;
  dst->nmounts = 0;
  if (src->nmounts) {
    dst->mounts = lr__xcalloc(src->nmounts, sizeof *dst->mounts);
    for (size_t i = 0; i < src->nmounts; i++) {
      dst->mounts[i].host = lr__xstrdup(src->mounts[i].host);
      dst->mounts[i].at = lr__xstrdup(src->mounts[i].at);
      dst->mounts[i].write = src->mounts[i].write;
    }
    dst->nmounts = src->nmounts;
  }
}

void lr_config_free(lr_config *c) {
  for (size_t i = 0; i < LR_COUNT(lr__string_keys); i++) {
    char **slot = (char **)((char *)c + lr__string_keys[i].offset);
    free(*slot);
    *slot = NULL;
  }
  for (size_t i = 0; i < c->nmounts; i++) {
    free(c->mounts[i].host);
    free(c->mounts[i].at);
  }
  free(c->mounts);
  c->mounts = NULL;
  c->nmounts = 0;
}
