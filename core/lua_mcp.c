/* `lunarun mcp`: the Model Context Protocol server on stdio. The protocol
 * itself is Lua (lua/lunarun/mcp_server.lua, on luv and the `lunarun`
 * module); this file gives it the runtime the CLI made, a way to describe
 * the loaded bindings, and the descriptors it speaks on. */
#include <lauxlib.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <luv/lhandle.h>

#include "lua_glue.h"
#include "util.h"

/* Pushes require(name)[field]; raises on failure (called under pcall). */
static void lr__push_module_field(lua_State *L, const char *name, const char *field) {
  lua_getglobal(L, "require");
  lua_pushstring(L, name);
  lua_call(L, 1, 1);
  lua_getfield(L, -1, field);
  lua_remove(L, -2);
}

static int lr__catalog_protected(lua_State *L) {
  lr__push_module_field(L, "lunarun.mcp_server", "catalog");
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

/* The loaded bindings as JSON text (mcp_server.catalog): each file runs
 * once more in a state and on a loop of its own, as `lunarun describe` does,
 * so nothing of it touches the server's loop (which it blocks meanwhile). */
static char *lr__mcp_catalog(const char *const *paths, size_t npaths, char *err) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  lr_lua *lua = lr_lua_new(&loop);
  char *text = NULL;
  if (!lua) {
    snprintf(err, LR_ERR_MAX, "mcp: cannot make a Lua state");
  } else {
    lua_State *L = lr__lua_state(lua);
    lua_pushcfunction(L, lr__catalog_protected);
    lua_createtable(L, (int)npaths, 0);
    for (size_t i = 0; i < npaths; i++) {
      lua_pushstring(L, paths[i]);
      lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    if (lr__lua_pcall(L, 1, 1) != LUA_OK) {
      const char *msg = lua_tostring(L, -1);
      snprintf(err, LR_ERR_MAX, "mcp: %.*s", msg ? (int)strcspn(msg, "\n") : 0, msg ? msg : "cannot describe the bindings");
    } else {
      text = strdup(lua_tostring(L, -1));
    }
    lr_lua_close(lua);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return text;
}

/* opts.catalog(): the catalog, made on first use (a client's probe, which
 * only asks server/discover, does not pay for loading the files again).
 * Upvalue 1: the list of paths. Raises on failure. */
static int lr__catalog_closure(lua_State *L) {
  size_t n = (size_t)luaL_len(L, lua_upvalueindex(1));
  const char **paths = calloc(n + 1, sizeof *paths);
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, lua_upvalueindex(1), (lua_Integer)i + 1);
    paths[i] = lua_tostring(L, -1); /* kept alive by the upvalue */
    lua_pop(L, 1);
  }
  char err[LR_ERR_MAX];
  char *text = lr__mcp_catalog(paths, n, err);
  free(paths);
  if (!text) return luaL_error(L, "%s", err);
  lua_pushstring(L, text);
  free(text);
  return 1;
}

static void lr__set_integer(lua_State *L, const char *key, uint64_t v) {
  lua_pushinteger(L, (lua_Integer)v);
  lua_setfield(L, -2, key);
}

static int lr__serve_protected(lua_State *L) {
  lr__push_module_field(L, "lunarun.mcp_server", "serve");
  lua_pushvalue(L, 1);
  lua_call(L, 1, 0);
  return 0;
}

int lr_mcp_serve(lr_runtime *rt, const char *const *paths, size_t npaths, int in_fd, int out_fd, char *err) {
  uv_loop_t *loop = lr_runtime_loop(rt);
  /* A client that went away must not kill the server mid-write. */
  signal(SIGPIPE, SIG_IGN);

  lr_lua *lua = lr_lua_new(loop);
  if (!lua) {
    snprintf(err, LR_ERR_MAX, "mcp: cannot make a Lua state");
    lr_runtime_dispose(rt, NULL, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    return -1;
  }
  lua_State *L = lr__lua_state(lua);
  const lr_config *cfg = lr_runtime_config(rt);
  /* The runtime handle's metatable comes with the module. */
  luaL_requiref(L, "lunarun", luaopen_lunarun, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, lr__serve_protected);
  lua_createtable(L, 0, 8);
  lr__lua_push_runtime(L, rt);
  lua_setfield(L, -2, "runtime");
  lua_createtable(L, (int)npaths, 0);
  for (size_t i = 0; i < npaths; i++) {
    lua_pushstring(L, paths[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushcclosure(L, lr__catalog_closure, 1);
  lua_setfield(L, -2, "catalog");
  lr__set_integer(L, "input_fd", (uint64_t)in_fd);
  lr__set_integer(L, "output_fd", (uint64_t)out_fd);
  lua_createtable(L, 0, 4);
  lr__set_integer(L, "computeMs", cfg->compute_ms);
  lr__set_integer(L, "maxWallMs", cfg->max_wall_ms);
  lr__set_integer(L, "maxOutputBytes", cfg->max_output_bytes);
  lr__set_integer(L, "maxOldGenerationSizeMb", cfg->max_old_generation_size_mb);
  lua_setfield(L, -2, "limits");
  lua_pushboolean(L, cfg->network_host);
  lua_setfield(L, -2, "network_host");
  int rc = 0;
  if (lr__lua_pcall(L, 1, 0) != LUA_OK) {
    snprintf(err, LR_ERR_MAX, "mcp: %s", lua_tostring(L, -1));
    lua_pop(L, 1);
    rc = -1;
  } else {
    uv_run(loop, UV_RUN_DEFAULT); /* until the client leaves and the runtime is gone */
  }
  /* Closing the state disposes the runtime if the server could not start;
   * the loop then finishes what that began. */
  lr_lua_close(lua);
  uv_run(loop, UV_RUN_DEFAULT);
  return rc;
}

static void lr__free_released_handle(uv_handle_t *handle) { free(handle); }

/* lunarun._release_handle(h): closes a luv handle without calling back into
 * Lua. For handles still open when their state closes (the processes of
 * MCP servers): luv's own collection would run its close callback after the
 * state is gone. Call it from a __gc that runs before the handle's. */
int lr__lua_release_handle(lua_State *L) {
  void **udata = lua_touserdata(L, 1);
  if (!udata || luaL_getmetafield(L, 1, "__name") != LUA_TSTRING || strncmp(lua_tostring(L, -1), "uv_", 3) != 0)
    return luaL_argerror(L, 1, "a luv handle expected");
  uv_handle_t *handle = *udata;
  if (!handle || uv_is_closing(handle)) return 0;
  *udata = NULL; /* luv's __gc has nothing left to do */
  luv_handle_t *data = handle->data;
  if (data) {
    if (data->extra_gc) data->extra_gc(data->extra);
    free(data);
    handle->data = NULL;
  }
  uv_close(handle, lr__free_released_handle);
  return 0;
}
