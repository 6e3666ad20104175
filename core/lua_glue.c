/* Bindings files and config files in Lua, and calling their handlers. Every
 * call from C into Lua goes through lr__pcall (a traceback handler), so a
 * Lua error never unwinds through C that holds memory. */
#include "lua_glue.h"

#include <lauxlib.h>
#include <lualib.h>
#include <luv/luv.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lua_values.h"

struct lr_lua {
  lua_State *L;
  uv_loop_t *loop;
};

/* One namespace of a bindings file: its functions table, by registry ref. */
typedef struct lr_lua_namespace {
  lr_lua *lua;
  int functions_ref;
  char *global;
} lr_lua_namespace;

static int lr__traceback(lua_State *L) {
  /* Keep non-string errors (tables with `message`) as they are. */
  if (lua_type(L, 1) == LUA_TSTRING) luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

/* lua_pcall with the traceback handler. */
static int lr__pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, lr__traceback);
  lua_insert(L, base);
  int rc = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  return rc;
}

static int lr__array(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  }
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_ARRAY);
  lua_setmetatable(L, 1);
  return 1;
}

static int lr__is_array(lua_State *L) {
  int marked = 0;
  if (lua_type(L, 1) == LUA_TTABLE && lua_getmetatable(L, 1)) {
    lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_ARRAY);
    marked = lua_rawequal(L, -1, -2);
  }
  lua_pushboolean(L, marked);
  return 1;
}

/* require "lunarun" inside a bindings file. */
static int lr__open_module(lua_State *L) {
  lua_createtable(L, 0, 4);
  lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_NULL);
  lua_setfield(L, -2, "null");
  lua_pushcfunction(L, lr__array);
  lua_setfield(L, -2, "array");
  lua_pushcfunction(L, lr__is_array);
  lua_setfield(L, -2, "is_array");
  return 1;
}

lr_lua *lr_lua_new(uv_loop_t *loop) {
  lr_lua *lua = calloc(1, sizeof *lua);
  if (!lua) return NULL;
  lua->L = luaL_newstate();
  lua->loop = loop;
  lua_State *L = lua->L;
  luaL_openlibs(L);
  lr__lua_values_init(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  lua_pushcfunction(L, lr__open_module);
  lua_setfield(L, -2, "lunarun");
  lua_pop(L, 1);
  /* luv on the engine's loop, so handlers can wait on timers, processes... */
  luv_set_loop(L, loop);
  luaL_requiref(L, "luv", luaopen_luv, 0);
  lua_pop(L, 1);
  return lua;
}

void lr_lua_close(lr_lua *lua) {
  if (!lua) return;
  lua_close(lua->L);
  free(lua);
}

/* Runs the chunk in path and leaves its first result on the stack. */
static int lr__run_file(lua_State *L, const char *path, const char *what, char *err) {
  if (luaL_loadfilex(L, path, "t") != LUA_OK) {
    lr__errf(err, "%s %s: %s", what, path, lua_tostring(L, -1));
    lua_pop(L, 1);
    return -1;
  }
  if (lr__pcall(L, 0, 1) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    /* One line is enough for misuse; the traceback follows the first. */
    size_t n = msg ? strcspn(msg, "\n") : 0;
    lr__errf(err, "%s %s failed: %.*s", what, path, (int)n, msg ? msg : "(error object is not a string)");
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

int lr_lua_load_config(lr_lua *lua, const char *path, lr_config *cfg, char *err) {
  lua_State *L = lua->L;
  int top = lua_gettop(L);
  if (lr__run_file(L, path, "config file", err) != 0) return -1;
  int rc = 0;
  if (!lua_istable(L, -1)) {
    rc = lr__errf(err, "config file %s must return a table of settings, got %s", path, luaL_typename(L, -1));
  } else {
    lua_pushnil(L);
    while (rc == 0 && lua_next(L, -2)) {
      char inner[LR_ERR_MAX];
      if (lua_type(L, -2) != LUA_TSTRING) {
        rc = lr__errf(err, "config file %s: keys must be strings", path);
      } else {
        const char *key = lua_tostring(L, -2);
        int t = lua_type(L, -1);
        if (t == LUA_TNUMBER)
          rc = lr_config_set_number(cfg, key, lua_tonumber(L, -1), inner);
        else if (t == LUA_TSTRING)
          rc = lr_config_set(cfg, key, lua_tostring(L, -1), inner);
        else
          rc = lr__errf(inner, "config: %s must be a number or a string, got %s", key, luaL_typename(L, -1));
        if (rc) lr__errf(err, "config file %s: %s", path, inner);
      }
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
  return rc;
}

/* ---- calls ---------------------------------------------------------------- */

/* The message a rejected call carries: a string as it is, a table's
 * `message`, anything else described. */
static void lr__reject_with_error(lua_State *co, lr_call *call) {
  size_t len = 0;
  const char *msg = NULL;
  if (lua_type(co, -1) == LUA_TSTRING || lua_type(co, -1) == LUA_TNUMBER) {
    msg = lua_tolstring(co, -1, &len);
  } else if (lua_type(co, -1) == LUA_TTABLE) {
    lua_getfield(co, -1, "message");
    if (lua_type(co, -1) == LUA_TSTRING) msg = lua_tolstring(co, -1, &len);
  }
  if (!msg) {
    size_t mlen;
    const char *member = lr_call_member(call, &mlen);
    lua_pushfstring(co, "binding \"%s.%s\" failed with a %s error value", lr_call_global(call), member,
                    luaL_typename(co, -1));
    msg = lua_tolstring(co, -1, &len);
  }
  lr_call_reject(call, msg, len);
}

static void lr__lua_call(void *ud, lr_call *call) {
  lr_lua_namespace *ns = ud;
  lua_State *L = ns->lua->L;
  int top = lua_gettop(L);
  /* Each call runs in a coroutine of its own. */
  lua_State *co = lua_newthread(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ns->functions_ref);
  size_t mlen;
  const char *member = lr_call_member(call, &mlen);
  lua_pushlstring(L, member, mlen);
  lua_rawget(L, -2);
  lua_xmove(L, co, 1); /* the handler */
  lr__lua_push_json(co, lr_call_args(call));
  int nres = 0;
  int status = lua_resume(co, L, 1, &nres);
  if (status == LUA_OK) {
    lr_json value;
    char err[LR_ERR_MAX];
    if (nres == 0) lua_pushnil(co);
    if (lr__lua_to_json(co, nres ? -nres : -1, &value, err) != 0)
      lr_call_reject_lossy(call);
    else
      lr_call_resolve(call, &value);
  } else if (status == LUA_YIELD) {
    /* Waiting inside a handler needs the async helpers of the bindings
     * layer; a bare yield has nobody to resume it. */
    lua_resetthread(co);
    static const char msg[] = "the binding yielded, but nothing can resume it (use a lunarun async helper)";
    lr_call_reject(call, msg, sizeof msg - 1);
  } else {
    lr__reject_with_error(co, call);
  }
  lua_settop(L, top); /* drops the coroutine: the collector takes it */
}

static void lr__lua_namespace_free(void *ud) {
  lr_lua_namespace *ns = ud;
  luaL_unref(ns->lua->L, LUA_REGISTRYINDEX, ns->functions_ref);
  free(ns->global);
  free(ns);
}

/* ---- bindings files ----------------------------------------------------- */

/* Checks one namespace table at the top of the stack and adds it. */
static int lr__add_namespace(lr_lua *lua, lr_runtime *rt, const char *path, int index, char *err) {
  lua_State *L = lua->L;
  int t = lua_gettop(L);
  char where[256];
  snprintf(where, sizeof where, "bindings file %s: namespace %d", path, index);
  if (!lua_istable(L, t)) return lr__errf(err, "%s must be a table, got %s", where, luaL_typename(L, t));
  /* Unknown fields are misuse: a typo must not silently drop a setting. */
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!k || (strcmp(k, "global") && strcmp(k, "errorClass") && strcmp(k, "functions") &&
               strcmp(k, "description"))) {
      int rc = lr__errf(err, "%s: unknown field %s%s%s (known: global, errorClass, functions, description)",
                        where, k ? "\"" : "", k ? k : luaL_typename(L, -1), k ? "\"" : "");
      lua_settop(L, t);
      return rc;
    }
  }
  if (lua_getfield(L, t, "global") != LUA_TSTRING)
    return lr__errf(err, "%s: field \"global\" must be a string", where);
  const char *global = lua_tostring(L, -1);
  snprintf(where, sizeof where, "bindings file %s: namespace \"%s\"", path, global);
  const char *error_class = NULL, *member_prop = NULL;
  int et = lua_getfield(L, t, "errorClass");
  if (et == LUA_TTABLE) {
    if (lua_getfield(L, -1, "name") != LUA_TSTRING)
      return lr__errf(err, "%s: field \"errorClass.name\" must be a string", where);
    error_class = lua_tostring(L, -1);
    if (lua_getfield(L, -2, "memberNameProperty") != LUA_TSTRING)
      return lr__errf(err, "%s: field \"errorClass.memberNameProperty\" must be a string", where);
    member_prop = lua_tostring(L, -1);
  } else if (et != LUA_TNIL) {
    return lr__errf(err, "%s: field \"errorClass\" must be a table {name=..., memberNameProperty=...}", where);
  }
  if (lua_getfield(L, t, "functions") != LUA_TTABLE)
    return lr__errf(err, "%s: field \"functions\" must be a table of functions", where);
  int ft = lua_gettop(L);
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, ft)) {
    lua_pop(L, 1);
    n++;
  }
  const char **members = calloc(n ? n : 1, sizeof *members);
  size_t i = 0;
  int rc = 0;
  lua_pushnil(L);
  while (lua_next(L, ft)) {
    if (lua_type(L, -2) != LUA_TSTRING) {
      rc = lr__errf(err, "%s: field \"functions\" has a %s key; member names are strings", where,
                    luaL_typename(L, -2));
    } else if (lua_type(L, -1) != LUA_TFUNCTION) {
      rc = lr__errf(err, "%s: field \"functions.%s\" must be a function, got %s", where,
                    lua_tostring(L, -2), luaL_typename(L, -1));
    } else {
      size_t klen;
      const char *k = lua_tolstring(L, -2, &klen);
      if (strlen(k) != klen) rc = lr__errf(err, "%s: a member name contains a NUL byte", where);
      members[i++] = k; /* kept alive by the functions table, on the stack */
    }
    lua_pop(L, 1);
    if (rc) {
      lua_pop(L, 1);
      break;
    }
  }
  if (rc == 0) {
    lr_lua_namespace *ns = calloc(1, sizeof *ns);
    ns->lua = lua;
    ns->global = strdup(global);
    lua_pushvalue(L, ft);
    ns->functions_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lr_namespace_def def = {
        .global = global,
        .error_class = error_class,
        .member_name_property = member_prop,
        .members = members,
        .nmembers = i,
        .call = lr__lua_call,
        .ud = ns,
        .free_ud = lr__lua_namespace_free,
    };
    char inner[LR_ERR_MAX];
    if (lr_runtime_add_namespace(rt, &def, inner) != 0) {
      rc = lr__errf(err, "bindings file %s: %s", path, inner);
      lr__lua_namespace_free(ns);
    }
  }
  free(members);
  lua_settop(L, t);
  return rc;
}

int lr_lua_load_bindings(lr_lua *lua, lr_runtime *rt, const char *path, char *err) {
  lua_State *L = lua->L;
  int top = lua_gettop(L);
  if (lr__run_file(L, path, "bindings file", err) != 0) return -1;
  int rc = 0;
  int r = lua_gettop(L);
  if (!lua_istable(L, r)) {
    rc = lr__errf(err, "bindings file %s must return a namespace table or a list of them, got %s", path,
                  luaL_typename(L, r));
  } else if (lua_getfield(L, r, "global") != LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushvalue(L, r);
    rc = lr__add_namespace(lua, rt, path, 1, err);
  } else {
    lua_pop(L, 1);
    lua_Integer n = luaL_len(L, r);
    if (n == 0)
      rc = lr__errf(err, "bindings file %s returned a table with neither \"global\" nor a list of namespaces", path);
    for (lua_Integer i = 1; rc == 0 && i <= n; i++) {
      lua_rawgeti(L, r, i);
      rc = lr__add_namespace(lua, rt, path, (int)i, err);
      lua_pop(L, 1);
    }
  }
  lua_settop(L, top);
  return rc;
}
