/* require "lunarun": the helpers a handler uses (lua_glue.c) and, for Lua
 * programs that embed lunarun, runtimes on luv's loop:
 *
 *   local uv = require("luv")
 *   local lunarun = require("lunarun")
 *   local rt = lunarun.runtime({ computeMs = 5000 })
 *   rt:add({ global = "tools", functions = { inc = function(a) return a.v + 1 end } })
 *   coroutine.wrap(function()
 *     local r = rt:run("return await tools.inc({ v: 1 })")   -- yields until done
 *     print(r.value)
 *     rt:dispose()
 *   end)()
 *   uv.run()
 *
 * Misuse raises; a run always ends with a result table. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lua_glue.h"
#include "lua_values.h"

#define LR_LUA_RUNTIME "lunarun.runtime"
#define LR_LUA_RUN "lunarun.run"

/* A runtime seen from Lua. The userdata holds a pointer: disposal is
 * asynchronous and may end after the userdata is collected. */
typedef struct lr_lua_rt {
  lr_runtime *rt;
  lr_lua *lua;
  int done_ref;        /* what to call (or resume) once disposed */
  bool done_is_thread;
  bool disposing, orphaned; /* orphaned: the userdata is gone; free on disposal */
} lr_lua_rt;

/* One run started from Lua. */
typedef struct lr_lua_run {
  lr_lua *lua;
  lr_run *run;
  int done_ref;        /* the callback, or the coroutine to resume */
  bool done_is_thread;
  int log_ref;
  struct lr_lua_run **handle; /* the handle userdata's slot, while it lives */
} lr_lua_run;

static lr_lua_rt *lr__check_rt(lua_State *L) {
  lr_lua_rt **slot = luaL_checkudata(L, 1, LR_LUA_RUNTIME);
  if (!*slot || !(*slot)->rt || (*slot)->disposing) luaL_error(L, "lunarun: the runtime is disposed");
  return *slot;
}

/* ---- results --------------------------------------------------------------- */

static void lr__push_result(lua_State *L, const lr_result *r) {
  lua_createtable(L, 0, 6);
  lua_pushboolean(L, r->kind == LR_OK);
  lua_setfield(L, -2, "ok");
  if (r->value_json) {
    lr_json value;
    char err[LR_ERR_MAX];
    if (lr__json_parse(r->value_json, r->value_len, &value, err) == 0) {
      lr__lua_push_json(L, &value);
      lr__json_free(&value);
      lua_setfield(L, -2, "value");
    }
  }
  lua_createtable(L, (int)r->nlogs, 0);
  lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_ARRAY);
  lua_setmetatable(L, -2);
  for (size_t i = 0; i < r->nlogs; i++) {
    lua_pushlstring(L, r->logs[i], r->log_lens[i]);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_setfield(L, -2, "logs");
  if (r->kind != LR_OK) {
    lua_createtable(L, 0, 2);
    lua_pushstring(L, lr_kind_name(r->kind));
    lua_setfield(L, -2, "kind");
    lua_pushlstring(L, r->message, r->message_len);
    lua_setfield(L, -2, "message");
    lua_setfield(L, -2, "error");
  }
  lua_createtable(L, 0, 5);
  const struct { const char *key; uint64_t v; } stats[] = {
      {"wallMs", r->stats.wall_ms},           {"computeMs", r->stats.compute_ms},
      {"outputBytes", r->stats.output_bytes}, {"bindingCalls", r->stats.binding_calls},
      {"logEntries", r->stats.log_entries},
  };
  for (size_t i = 0; i < sizeof stats / sizeof stats[0]; i++) {
    lua_pushinteger(L, (lua_Integer)stats[i].v);
    lua_setfield(L, -2, stats[i].key);
  }
  lua_pushstring(L, lr_isolation_name(r->stats.isolation));
  lua_setfield(L, -2, "isolation");
  lua_setfield(L, -2, "stats");
  size_t len;
  char *json = lr_result_json(r, &len);
  lua_pushlstring(L, json, len);
  free(json);
  lua_setfield(L, -2, "json");
}

/* Calls the callback or resumes the coroutine at ref with the value on top
 * of the stack (popped). Errors are reported, never raised into C. */
static void lr__deliver(lua_State *L, int ref, bool is_thread) {
  if (ref == LUA_NOREF) {
    lua_pop(L, 1);
    return;
  }
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  if (is_thread) {
    lua_State *co = lua_tothread(L, -1);
    lua_pop(L, 1);
    lua_xmove(L, co, 1);
    int nres;
    int st = lua_resume(co, L, 1, &nres);
    if (st != LUA_OK && st != LUA_YIELD) {
      const char *msg = lua_tostring(co, -1);
      luaL_traceback(L, co, msg ? msg : "(error object is not a string)", 0);
      fprintf(stderr, "lunarun: error in a coroutine resumed with a result: %s\n", lua_tostring(L, -1));
      lua_pop(L, 1);
    }
    if (st == LUA_OK || st == LUA_YIELD) lua_pop(co, nres);
  } else {
    lua_insert(L, -2);
    if (lr__lua_pcall(L, 1, 0) != LUA_OK) {
      fprintf(stderr, "lunarun: error in a result callback: %s\n", lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
  luaL_unref(L, LUA_REGISTRYINDEX, ref);
}

/* The callback form takes a function; the coroutine form yields the caller.
 * Sets *ref and *is_thread, or raises. */
static void lr__take_continuation(lua_State *L, int fn_idx, int *ref, bool *is_thread, const char *what) {
  if (fn_idx && lua_isfunction(L, fn_idx)) {
    lua_pushvalue(L, fn_idx);
    *ref = luaL_ref(L, LUA_REGISTRYINDEX);
    *is_thread = false;
    return;
  }
  if (lua_pushthread(L)) {
    lua_pop(L, 1);
    luaL_error(L, "lunarun: %s needs a callback outside a coroutine", what);
  }
  *ref = luaL_ref(L, LUA_REGISTRYINDEX);
  *is_thread = true;
}

/* ---- runs ------------------------------------------------------------------ */

static void lr__run_log(void *ud, const char *text, size_t len) {
  lr_lua_run *lr = ud;
  if (lr->lua && !lr__lua_closed(lr->lua) && lr->log_ref != LUA_NOREF) {
    lua_State *L = lr__lua_state(lr->lua);
    lua_rawgeti(L, LUA_REGISTRYINDEX, lr->log_ref);
    lua_pushlstring(L, text, len);
    if (lr__lua_pcall(L, 1, 0) != LUA_OK) {
      fprintf(stderr, "lunarun: error in on_log: %s\n", lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  }
}

static void lr__run_done(void *ud, const lr_result *r) {
  lr_lua_run *lr = ud;
  lr_lua *lua = lr->lua;
  if (lr->handle) *lr->handle = NULL;
  if (!lr__lua_closed(lua)) {
    lua_State *L = lr__lua_state(lua);
    luaL_unref(L, LUA_REGISTRYINDEX, lr->log_ref);
    lr__push_result(L, r);
    lr__deliver(L, lr->done_ref, lr->done_is_thread);
  }
  lr__lua_release(lua);
  free(lr);
}

static int lr__handle_abort(lua_State *L) {
  lr_lua_run **slot = luaL_checkudata(L, 1, LR_LUA_RUN);
  if (*slot) lr_run_abort((*slot)->run);
  return 0;
}

static int lr__handle_id(lua_State *L) {
  lr_lua_run **slot = luaL_checkudata(L, 1, LR_LUA_RUN);
  if (!*slot) return 0;
  lua_pushinteger(L, (lua_Integer)lr_run_id((*slot)->run));
  return 1;
}

static int lr__handle_gc(lua_State *L) {
  lr_lua_run **slot = luaL_checkudata(L, 1, LR_LUA_RUN);
  if (*slot) (*slot)->handle = NULL;
  return 0;
}

/* rt:run(program [, opts] [, callback]) */
static int lr__rt_run(lua_State *L) {
  lr_lua_rt *lrt = lr__check_rt(L);
  size_t len;
  const char *program = luaL_checklstring(L, 2, &len);
  int opts = lua_istable(L, 3) ? 3 : 0;
  int cb = lua_isfunction(L, 3) ? 3 : (lua_isfunction(L, 4) ? 4 : 0);
  lr_run_options ro = {.on_done = lr__run_done, .on_log = lr__run_log};
  lr_config cfg;
  lr_config_init(&cfg);
  lr_config_copy(&cfg, lr_runtime_config(lrt->rt));
  const char **names = NULL;
  char err[LR_ERR_MAX];
  int log_ref = LUA_NOREF;
  if (opts) {
    if (lua_getfield(L, opts, "config") == LUA_TTABLE) {
      if (lr__lua_config_from_table(L, -1, &cfg, "run: opts.config", err) != 0) {
        lr_config_free(&cfg);
        return luaL_error(L, "lunarun: %s", err);
      }
    }
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "namespaces") == LUA_TTABLE) {
      size_t n = (size_t)luaL_len(L, -1);
      names = calloc(n + 1, sizeof *names);
      for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i + 1);
        names[i] = lua_tostring(L, -1); /* kept alive by the opts table */
        lua_pop(L, 1);
      }
      ro.namespaces = names;
      ro.nnamespaces = n;
    }
    lua_pop(L, 1);
    if (lua_getfield(L, opts, "on_log") == LUA_TFUNCTION) log_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    else lua_pop(L, 1);
  }
  lr_lua_run *lr = calloc(1, sizeof *lr);
  lr->lua = lrt->lua;
  lr->log_ref = log_ref;
  lr->done_ref = LUA_NOREF;
  ro.config = &cfg;
  ro.ud = lr;
  int rc = lr_run_start(lrt->rt, program, len, &ro, &lr->run, err);
  lr_config_free(&cfg);
  free(names);
  if (rc != 0) {
    luaL_unref(L, LUA_REGISTRYINDEX, log_ref);
    free(lr);
    return luaL_error(L, "lunarun: %s", err);
  }
  lr__lua_retain(lr->lua);
  /* Started: the continuation is taken last, so a raise above leaks nothing.
   * A run cannot end before this returns (results are delivered later). */
  if (cb) {
    lr__take_continuation(L, cb, &lr->done_ref, &lr->done_is_thread, "run");
    lr_lua_run **slot = lua_newuserdatauv(L, sizeof *slot, 0);
    *slot = lr;
    lr->handle = slot;
    luaL_setmetatable(L, LR_LUA_RUN);
    return 1;
  }
  if (lua_pushthread(L)) {
    lua_pop(L, 1);
    lr_run_abort(lr->run); /* ends with nobody to tell */
    return luaL_error(L, "lunarun: run needs a callback outside a coroutine");
  }
  lr->done_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lr->done_is_thread = true;
  return lua_yield(L, 0);
}

/* rt:add(namespace_or_list) */
static int lr__rt_add(lua_State *L) {
  lr_lua_rt *lrt = lr__check_rt(L);
  luaL_checktype(L, 2, LUA_TTABLE);
  char err[LR_ERR_MAX];
  /* The glue works on the state's main thread: the table goes there (rt:add
   * may be called from a coroutine, whose stack is not the main thread's). */
  lua_State *main = lr__lua_state(lrt->lua);
  if (main != L) {
    lua_pushvalue(L, 2);
    lua_xmove(L, main, 1);
  }
  int rc = lr__lua_add_namespaces(lrt->lua, lrt->rt, main != L ? -1 : 2, "namespaces", err);
  if (main != L) lua_pop(main, 1);
  if (rc != 0) return luaL_error(L, "lunarun: %s", err);
  lua_settop(L, 1);
  return 1;
}

/* rt:load(path) */
static int lr__rt_load(lua_State *L) {
  lr_lua_rt *lrt = lr__check_rt(L);
  const char *path = luaL_checkstring(L, 2);
  char err[LR_ERR_MAX];
  if (lr__lua_load_bindings(lrt->lua, lrt->rt, path, err) != 0) return luaL_error(L, "lunarun: %s", err);
  lua_settop(L, 1);
  return 1;
}

static void lr__rt_disposed(void *ud) {
  lr_lua_rt *lrt = ud;
  lrt->rt = NULL;
  lr_lua *lua = lrt->lua;
  lr__lua_disposal_end(lua);
  int ref = lrt->done_ref;
  bool is_thread = lrt->done_is_thread;
  lrt->done_ref = LUA_NOREF;
  /* lrt is not touched after the delivery: the Lua code it resumes may
   * collect the runtime's userdata, whose __gc then frees lrt. */
  bool orphaned = lrt->orphaned;
  if (orphaned) free(lrt);
  lr__lua_retain(lua);
  if (!lr__lua_closed(lua)) {
    lua_State *L = lr__lua_state(lua);
    lua_pushboolean(L, 1);
    lr__deliver(L, ref, is_thread);
  }
  if (orphaned) lr__lua_release(lua);
  lr__lua_release(lua);
}

/* rt:dispose([callback]): aborts the runs in flight and waits for them; in a
 * coroutine without a callback, yields until done. */
static int lr__rt_dispose(lua_State *L) {
  lr_lua_rt **slot = luaL_checkudata(L, 1, LR_LUA_RUNTIME);
  lr_lua_rt *lrt = *slot;
  if (!lrt || !lrt->rt || lrt->disposing) return 0;
  bool has_cb = lua_isfunction(L, 2);
  bool in_coroutine = !lua_pushthread(L);
  lua_pop(L, 1);
  bool wait = !has_cb && in_coroutine;
  lrt->done_ref = LUA_NOREF;
  if (has_cb || wait) lr__take_continuation(L, has_cb ? 2 : 0, &lrt->done_ref, &lrt->done_is_thread, "dispose");
  lrt->disposing = true;
  lr__lua_disposal_begin(lrt->lua);
  lr_runtime_dispose(lrt->rt, lr__rt_disposed, lrt);
  return wait ? lua_yield(L, 0) : 0;
}

static int lr__rt_gc(lua_State *L) {
  lr_lua_rt **slot = luaL_checkudata(L, 1, LR_LUA_RUNTIME);
  lr_lua_rt *lrt = *slot;
  if (!lrt) return 0;
  *slot = NULL;
  lrt->orphaned = true;
  if (lrt->rt && !lrt->disposing) {
    lrt->disposing = true;
    lr__lua_disposal_begin(lrt->lua);
    lr_runtime_dispose(lrt->rt, lr__rt_disposed, lrt);
  } else if (!lrt->rt) {
    lr__lua_release(lrt->lua);
    free(lrt);
  }
  return 0;
}

/* Points the handle userdata at slot to rt, which it owns from now on. */
static void lr__lua_adopt_runtime(lua_State *L, lr_lua_rt **slot, lr_runtime *rt) {
  lr_lua *lua = lr__lua_get(L);
  lr_lua_rt *lrt = calloc(1, sizeof *lrt);
  lrt->rt = rt;
  lrt->lua = lua;
  lrt->done_ref = LUA_NOREF;
  lr__lua_retain(lua);
  *slot = lrt;
}

/* lunarun.runtime([config]) */
static int lr__runtime_new(lua_State *L) {
  lr_lua *lua = lr__lua_get(L);
  lr_config cfg;
  lr_config_init(&cfg);
  char err[LR_ERR_MAX];
  if (!lua_isnoneornil(L, 1)) {
    luaL_checktype(L, 1, LUA_TTABLE);
    if (lr__lua_config_from_table(L, 1, &cfg, "runtime", err) != 0) {
      lr_config_free(&cfg);
      return luaL_error(L, "lunarun: %s", err);
    }
  }
  lr_lua_rt **slot = lua_newuserdatauv(L, sizeof *slot, 0);
  *slot = NULL;
  luaL_setmetatable(L, LR_LUA_RUNTIME);
  lr_runtime *rt;
  int rc = lr_runtime_new(lr__lua_loop(lua), &cfg, &rt, err);
  lr_config_free(&cfg);
  if (rc != 0) return luaL_error(L, "lunarun: %s", err);
  lr__lua_adopt_runtime(L, slot, rt);
  return 1;
}

void lr__lua_push_runtime(lua_State *L, lr_runtime *rt) {
  lr_lua_rt **slot = lua_newuserdatauv(L, sizeof *slot, 0);
  *slot = NULL;
  luaL_setmetatable(L, LR_LUA_RUNTIME);
  lr__lua_adopt_runtime(L, slot, rt);
}

/* lunarun.describe({paths...}) -> text */
static int lr__describe(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  size_t n = (size_t)luaL_len(L, 1);
  const char **paths = calloc(n + 1, sizeof *paths);
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, 1, (lua_Integer)i + 1);
    paths[i] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  char *out = NULL, err[LR_ERR_MAX];
  int rc = lr_describe(paths, n, &out, err);
  free(paths);
  if (rc != 0) return luaL_error(L, "lunarun: %s", err);
  lua_pushstring(L, out);
  free(out);
  return 1;
}

int luaopen_lunarun(lua_State *L) {
  lr__lua_get(L);
  if (luaL_newmetatable(L, LR_LUA_RUNTIME)) {
    static const luaL_Reg methods[] = {
        {"run", lr__rt_run}, {"add", lr__rt_add}, {"load", lr__rt_load}, {"dispose", lr__rt_dispose}, {NULL, NULL}};
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, lr__rt_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  if (luaL_newmetatable(L, LR_LUA_RUN)) {
    static const luaL_Reg methods[] = {{"abort", lr__handle_abort}, {"id", lr__handle_id}, {NULL, NULL}};
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, lr__handle_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 16);
  lr__lua_open_helpers(L);
  lua_pushcfunction(L, lr__runtime_new);
  lua_setfield(L, -2, "runtime");
  lua_pushcfunction(L, lr__describe);
  lua_setfield(L, -2, "describe");
  lua_pushliteral(L, "0.1.0");
  lua_setfield(L, -2, "version");
  return 1;
}
