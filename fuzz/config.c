/* Fuzz target: the config rules of SPEC §2 (core/config.c) through the
 * entry points users reach: a Lua table of settings (a config file,
 * lunarun.runtime{}) read by lr__lua_config_from_table, and `--set
 * key=value` texts read by lr_config_set.
 *
 * The table is built from the input: known and unknown keys, numbers of
 * every kind, strings, booleans, functions, mount lists right and wrong.
 * Every call ends in success or one clean message that says where; the
 * stack is left as it was; a config that lr_config_check accepts keeps
 * every rule of §2. */
#include <lauxlib.h>
#include <lualib.h>
#include <math.h>

#include "lua_glue.h"
#include "util.h"
#include "fuzz_input.h"

/* A fresh state per input: one kept across inputs would keep memory
 * libFuzzer's leak check then takes for a leak on every input. */
static lua_State *L;

static const char *const lr_fuzz_keys[] = {
    "computeMs", "maxWallMs", "maxOutputBytes", "maxOldGenerationSizeMb", "maxFrameBytes", "killGraceMs",
    "maxProcessMemoryMb", "nodePath", "runtimeRoot", "isolation", "network", "tmpMb", "maxProcesses",
    "allowChildProcesses", "mounts", "poolSize", "poolIdleMs"};
#define LR_FUZZ_NKEYS (sizeof lr_fuzz_keys / sizeof lr_fuzz_keys[0])

static const char *const lr_fuzz_words[] = {
    "bwrap", "none", "host", "true", "false", "1", "0", "4", "9007199254740991", "9007199254740992",
    "2147483647", "2147483648", "/tmp", "/usr/lib", "/", "/proc/x", "/etc", "/etc/", "/a/../b", "", "1e3", " 5"};
#define LR_FUZZ_NWORDS (sizeof lr_fuzz_words / sizeof lr_fuzz_words[0])

static const double lr_fuzz_numbers[] = {0, 1, 3, 4, 60000, 2147483647, 2147483648.0, 9007199254740991.0,
                                         9007199254740992.0, -1, 0.5, -0.0, 1e300, INFINITY, NAN, 268435456};

static void lr_fuzz_push_string(lr_fuzz_in *in) {
  uint8_t how = lr_fuzz_u8(in);
  if (how & 1) {
    lua_pushstring(L, lr_fuzz_words[(how >> 1) % LR_FUZZ_NWORDS]);
  } else {
    size_t len;
    const uint8_t *s = lr_fuzz_bytes(in, 40, &len);
    lua_pushlstring(L, (const char *)s, len);
  }
}

/* Pushes one value of any type the input picks; depth bounds mount tables. */
static void lr_fuzz_push_value(lr_fuzz_in *in, int depth) {
  uint8_t t = lr_fuzz_u8(in);
  luaL_checkstack(L, 4, "fuzz"); /* a key, a value, and room below them */
  switch (t % 9) {
    case 0: lua_pushinteger(L, (lua_Integer)lr_fuzz_u64(in)); break;
    case 1: lua_pushnumber(L, lr_fuzz_numbers[lr_fuzz_u8(in) % 16]); break;
    case 2: {
      uint64_t bits = lr_fuzz_u64(in);
      double d;
      memcpy(&d, &bits, sizeof d);
      lua_pushnumber(L, d);
      break;
    }
    case 3: lua_pushinteger(L, lr_fuzz_u32(in) % 70000); break;
    case 4: lr_fuzz_push_string(in); break;
    case 5: lua_pushboolean(L, t & 16); break;
    case 6: lua_pushcfunction(L, luaopen_base); break;
    default: /* a table: a mounts list, one mount, or anything */
      if (depth > 3) {
        lua_pushnil(L);
        break;
      }
      lua_newtable(L);
      for (int n = lr_fuzz_u8(in) % 5; n > 0; n--) {
        uint8_t k = lr_fuzz_u8(in);
        if (k % 4 == 0) lua_pushinteger(L, (int8_t)lr_fuzz_u8(in));
        else if (k % 4 == 1) lua_pushstring(L, (const char *[]){"host", "at", "write", "other"}[(k >> 2) % 4]);
        else lua_pushinteger(L, (k >> 2) % 4 + 1);
        lr_fuzz_push_value(in, depth + 1);
        if (lua_isnil(L, -1)) lua_pop(L, 2);
        else lua_rawset(L, -3);
      }
      break;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lr_fuzz_in in = {data, size};
  L = luaL_newstate();
  lua_newtable(L);
  for (int n = lr_fuzz_u8(&in) % 12; n > 0 && in.n; n--) {
    uint8_t k = lr_fuzz_u8(&in);
    if (k % 8 == 7) lr_fuzz_push_string(&in); /* an unknown (or known) key */
    else if (k % 8 == 6) lua_pushinteger(L, k); /* not a string key */
    else lua_pushstring(L, lr_fuzz_keys[k % LR_FUZZ_NKEYS]);
    lr_fuzz_push_value(&in, 0);
    if (lua_isnil(L, -1)) lua_pop(L, 2);
    else lua_rawset(L, 1);
  }

  lr_config cfg;
  lr_config_init(&cfg);
  char err[LR_ERR_MAX] = "";
  int rc = lr__lua_config_from_table(L, 1, &cfg, "fuzz", err);
  LR_FUZZ_ASSERT(lua_gettop(L) == 1, "the stack moved to %d", lua_gettop(L));
  LR_FUZZ_ASSERT(rc == 0 || rc == -1, "rc %d", rc);
  if (rc) LR_FUZZ_ASSERT(strncmp(err, "fuzz: ", 6) == 0 && err[6], "message \"%s\"", err);

  /* The rest of the input as `--set key=value` lines. */
  while (in.n) {
    const uint8_t *nl = memchr(in.p, '\n', in.n);
    size_t len = nl ? (size_t)(nl - in.p) : in.n;
    char *line = lr__xmemdup(in.p, len);
    in.p += len + (nl != NULL), in.n -= len + (nl != NULL);
    char *eq = strchr(line, '=');
    if (eq) {
      *eq = '\0';
      err[0] = '\0';
      if (lr_config_set(&cfg, line, eq + 1, err))
        LR_FUZZ_ASSERT(strncmp(err, "config: ", 8) == 0, "message \"%s\"", err);
    }
    free(line);
  }

  if (lr_config_check(&cfg, err) == 0) {
    const uint64_t max = 9007199254740991ull;
    LR_FUZZ_ASSERT(cfg.compute_ms >= 1 && cfg.compute_ms <= max, "computeMs");
    LR_FUZZ_ASSERT(cfg.max_wall_ms >= 1 && cfg.max_wall_ms <= 2147483647ull, "maxWallMs");
    LR_FUZZ_ASSERT(cfg.max_output_bytes >= 4 && cfg.max_output_bytes <= max, "maxOutputBytes");
    LR_FUZZ_ASSERT(cfg.max_frame_bytes >= cfg.max_output_bytes && cfg.max_frame_bytes <= max, "maxFrameBytes");
    LR_FUZZ_ASSERT(cfg.pool_size <= max, "poolSize");
    for (size_t i = 0; i < cfg.nmounts; i++)
      LR_FUZZ_ASSERT(cfg.mounts[i].host[0] == '/' && cfg.mounts[i].at[0] == '/', "a mount that is not absolute");
  } else {
    LR_FUZZ_ASSERT(strncmp(err, "config: ", 8) == 0, "message \"%s\"", err);
  }
  lr_config copy;
  lr_config_copy(&copy, &cfg);
  lr_config_free(&copy);
  lr_config_free(&cfg);
  lua_close(L);
  return 0;
}
