/* Configuration rules of SPEC §2: every value a positive safe integer, and
 * the rules between keys. Messages name the key. */
#include "lunarun.h"
#include "util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
};

static const lr_config_key lr__string_keys[] = {
    {"nodePath", offsetof(lr_config, node_path)},
    {"runtimeRoot", offsetof(lr_config, runtime_root)},
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
                  "runtimeRoot)",
                  key);
}

/* Each value alone: a positive safe integer, and the per-key bounds. */
static int lr__check_value(const char *key, double v, char *err) {
  if (!(v >= 1 && v <= LR_MAX_SAFE_INTEGER) || floor(v) != v)
    return lr__errf(err, "config: %s must be a positive safe integer (1 .. 2^53-1)", key);
  if (strcmp(key, "maxOutputBytes") == 0 && v < 4)
    return lr__errf(err, "config: maxOutputBytes must be at least 4");
  if (strcmp(key, "maxWallMs") == 0 && v > (double)LR_MAX_WALL_MS)
    return lr__errf(err, "config: maxWallMs must be at most 2147483647");
  return 0;
}

int lr_config_set_number(lr_config *c, const char *key, double value, char *err) {
  const lr_config_key *k = lr__find(lr__numeric_keys, LR_COUNT(lr__numeric_keys), key);
  if (!k) {
    if (lr__find(lr__string_keys, LR_COUNT(lr__string_keys), key))
      return lr__errf(err, "config: %s must be a string", key);
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
  if (!lr__find(lr__numeric_keys, LR_COUNT(lr__numeric_keys), key)) return lr__unknown_key(key, err);
  /* Digits only: "1e3", "0x10", " 5" or "5ms" are refused rather than guessed. */
  const char *p = value;
  if (!*p) return lr__errf(err, "config: %s must be a positive safe integer, got an empty value", key);
  for (; *p; p++)
    if (*p < '0' || *p > '9')
      return lr__errf(err, "config: %s must be a positive safe integer, got \"%s\"", key, value);
  if (strlen(value) > 16)
    return lr__errf(err, "config: %s must be a positive safe integer (1 .. 2^53-1), got \"%s\"", key, value);
  return lr_config_set_number(c, key, strtod(value, NULL), err);
}

int lr_config_check(const lr_config *c, char *err) {
  for (size_t i = 0; i < LR_COUNT(lr__numeric_keys); i++) {
    uint64_t v = *(const uint64_t *)((const char *)c + lr__numeric_keys[i].offset);
    if (v > (uint64_t)LR_MAX_SAFE_INTEGER) v = 0; /* makes the check below fail */
    if (lr__check_value(lr__numeric_keys[i].name, (double)v, err)) return -1;
  }
  if (c->max_frame_bytes < c->max_output_bytes)
    return lr__errf(err, "config: maxFrameBytes (%llu) must be at least maxOutputBytes (%llu)",
                    (unsigned long long)c->max_frame_bytes, (unsigned long long)c->max_output_bytes);
  return 0;
}

void lr_config_copy(lr_config *dst, const lr_config *src) {
  *dst = *src;
  dst->node_path = src->node_path ? lr__xstrdup(src->node_path) : NULL;
  dst->runtime_root = src->runtime_root ? lr__xstrdup(src->runtime_root) : NULL;
}

void lr_config_free(lr_config *c) {
  free(c->node_path);
  free(c->runtime_root);
  c->node_path = c->runtime_root = NULL;
}
