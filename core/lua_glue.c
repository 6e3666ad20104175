/* Bindings files and config files in Lua, and calling their handlers: each
 * call runs in a coroutine of its own, which may wait (lunarun.wait) on the
 * host's libuv loop, shared with luv. Every call from C into Lua is
 * protected; a Lua error never unwinds through C that holds memory, and a
 * handler can never take the host down: errors reject the call, a busy loop
 * is cut by an instruction-count hook, a call that outlives its run is
 * cancelled. */
#include "lua_glue.h"

#include <lauxlib.h>
#include <lualib.h>
#include <luv/luv.h>
#include <stdlib.h>
#include <string.h>

#include "isolation.h"
#include "json.h"
#include "lua_values.h"
#include "runtime_ext.h"

/* The embedded Lua modules of lua/lunarun (made by cmake/embed.cmake). */
struct lr_embedded {
  const char *name;
  const char *data;
  size_t len;
};
extern const struct lr_embedded lr__lua_modules[];

/* lua_http.c: {request, parse_url} on libcurl, on the state's luv loop. */
int lr__lua_open_http(lua_State *L);

typedef struct lr_lua_call lr_lua_call;

#define LR_IDLE_COROUTINES 32

struct lr_lua {
  lua_State *L;         /* the main thread */
  uv_loop_t *loop;
  bool owned;           /* made by lr_lua_new: lr_lua_close closes the state */
  bool closed;          /* the state is closing or closed */
  int refs;             /* the state's anchor, namespaces, runs in flight */
  int disposals;        /* runtimes being disposed */
  lr_lua_call *running; /* the call whose coroutine runs now */
  lr_lua_call *calls;   /* every call in flight */
  uint64_t next_serial;
  int loader_ref;       /* require("lunarun.loader") */
  /* Coroutines of calls that returned, kept (in one table, idle_ref) for
   * the next calls: a new thread per call costs more than the rest of the
   * host's work on it. */
  int idle_ref;
  int nidle;
};

/* The registry key of a state's lr_lua (a light userdata), and the
 * metatable of the anchor whose __gc tells the lr_lua its state is closing. */
static const char lr__lua_key = 0;
#define LR_LUA_ANCHOR "lunarun.anchor"

/* One namespace of a bindings file: its normalized table (loader.lua). */
typedef struct lr_lua_namespace {
  lr_lua *lua;
  int ns_ref;
  uint64_t *busy_ns; /* per member: the longest a handler may run without waiting */
} lr_lua_namespace;

/* One binding call in flight. Its coroutine is pinned by co_ref. */
struct lr_lua_call {
  lr_lua *lua;
  lr_lua_namespace *ns;
  lr_call *call;
  lua_State *co;
  int co_ref, member_ref, info_ref;
  uint64_t serial;      /* names the call to `done` closures, which may outlive it */
  uint64_t wait_token;  /* which lunarun.wait a `done` belongs to */
  int cancel_ref;       /* what the current wait returned to cancel it */
  int early_ref;        /* values `done` got before the wait yielded */
  bool waiting, in_starter, early, busy_exceeded;
  bool ending;          /* running its cancel function or after hook: no waiting */
  bool co_reusable;     /* its coroutine returned: another call may run in it */
  uint64_t slice_start, busy_ns;
  const char *global, *member; /* for messages; owned by the namespace */
  size_t member_len;
  lr_lua_call *next, *prev;
};

static lr_lua *lr__lua_of(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &lr__lua_key);
  lr_lua *lua = lua_touserdata(L, -1);
  lua_pop(L, 1);
  return lua;
}

void lr__lua_retain(lr_lua *lua) { lua->refs++; }

void lr__lua_release(lr_lua *lua) {
  if (--lua->refs == 0) free(lua);
}

bool lr__lua_closed(const lr_lua *lua) { return lua->closed; }
void lr__lua_disposal_begin(lr_lua *lua) { lua->disposals++; }
void lr__lua_disposal_end(lr_lua *lua) { lua->disposals--; }
lua_State *lr__lua_state(const lr_lua *lua) { return lua->L; }
uv_loop_t *lr__lua_loop(const lr_lua *lua) { return lua->loop; }

static int lr__traceback(lua_State *L) {
  /* Keep non-string errors (tables with `message`) as they are. */
  if (lua_type(L, 1) == LUA_TSTRING) luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

/* lua_pcall with the traceback handler. */
int lr__lua_pcall(lua_State *L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, lr__traceback);
  lua_insert(L, base);
  int rc = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  return rc;
}

/* luv's callbacks come through here: an error in one is reported, never
 * fatal. */
static int lr__luv_pcall(lua_State *L, int nargs, int nresults, int flags) {
  (void)flags;
  int top = lua_gettop(L) - nargs - 1;
  int rc = lr__lua_pcall(L, nargs, nresults);
  if (rc != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "lunarun: error in a Lua callback: %s\n", msg ? msg : "(not a string)");
    lua_settop(L, top);
    return -rc;
  }
  if (nresults == LUA_MULTRET) nresults = lua_gettop(L) - top;
  return nresults;
}

/* ---- the lunarun module inside the host's state ------------------------- */

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

static lr_lua_call *lr__find_call(lr_lua *lua, uint64_t serial) {
  for (lr_lua_call *c = lua->calls; c; c = c->next)
    if (c->serial == serial) return c;
  return NULL;
}

static void lr__call_resume(lr_lua_call *lc, int nargs);

/* done(...): ends the wait it was made for, once; later calls and calls
 * after the binding call is over do nothing. */
static int lr__done(lua_State *L) {
  lr_lua *lua = lr__lua_of(L);
  uint64_t serial = (uint64_t)lua_tointeger(L, lua_upvalueindex(1));
  uint64_t token = (uint64_t)lua_tointeger(L, lua_upvalueindex(2));
  lr_lua_call *lc = lr__find_call(lua, serial);
  if (!lc || lc->wait_token != token || lc->early || !(lc->waiting || lc->in_starter)) return 0;
  int n = lua_gettop(L);
  if (lc->in_starter) {
    /* Finished before the starter returned: keep the values for wait. */
    lua_createtable(L, n, 1);
    lua_insert(L, 1);
    for (int i = n; i >= 1; i--) lua_rawseti(L, 1, i);
    lua_pushinteger(L, n);
    lua_setfield(L, 1, "n");
    lc->early_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lc->early = true;
    return 0;
  }
  lc->waiting = false;
  luaL_unref(L, LUA_REGISTRYINDEX, lc->cancel_ref);
  lc->cancel_ref = LUA_NOREF;
  if (!lua_checkstack(lc->co, n + 4)) return luaL_error(L, "lunarun: too many values for done");
  lua_xmove(L, lc->co, n);
  lr__call_resume(lc, n);
  return 0;
}

/* A wait outside binding calls (a Lua program's own coroutine, with the
 * `lunarun` module): its state lives in a userdata that `done` holds. */
typedef struct lr_plain_wait {
  bool waiting, in_starter, finished;
  int early_ref; /* values done got before the coroutine yielded */
} lr_plain_wait;

static int lr__plain_done(lua_State *L) {
  lr_plain_wait *w = lua_touserdata(L, lua_upvalueindex(1));
  lua_State *co = lua_tothread(L, lua_upvalueindex(2));
  if (w->finished) return 0;
  w->finished = true;
  int n = lua_gettop(L);
  if (w->in_starter) {
    lua_createtable(L, n, 1);
    lua_insert(L, 1);
    for (int i = n; i >= 1; i--) lua_rawseti(L, 1, i);
    lua_pushinteger(L, n);
    lua_setfield(L, 1, "n");
    w->early_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
  }
  w->waiting = false;
  if (!lua_checkstack(co, n + 4)) return luaL_error(L, "lunarun: too many values for done");
  lua_xmove(L, co, n);
  int nres;
  int st = lua_resume(co, L, n, &nres);
  if (st != LUA_OK && st != LUA_YIELD) {
    const char *msg = lua_tostring(co, -1);
    luaL_traceback(L, co, msg ? msg : "(error object is not a string)", 0);
    fprintf(stderr, "lunarun: error in a coroutine resumed by lunarun.wait: %s\n", lua_tostring(L, -1));
    lua_pop(L, 1);
  } else {
    lua_pop(co, nres);
  }
  return 0;
}

/* Returns the values stored by an early done (table at the top). */
static int lr__unpack_early(lua_State *L) {
  int t = lua_gettop(L);
  lua_getfield(L, t, "n");
  int n = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  luaL_checkstack(L, n, "lunarun: too many values for done");
  for (int i = 1; i <= n; i++) lua_rawgeti(L, t, i);
  return n;
}

static int lr__plain_wait(lua_State *L) {
  if (!lua_isyieldable(L)) return luaL_error(L, "lunarun.wait must be called from a coroutine");
  lr_plain_wait *w = lua_newuserdatauv(L, sizeof *w, 0);
  memset(w, 0, sizeof *w);
  w->early_ref = LUA_NOREF;
  lua_pushthread(L);
  lua_pushcclosure(L, lr__plain_done, 2);
  w->in_starter = true;
  int rc = lua_pcall(L, 1, 1, 0); /* starter(done) */
  w->in_starter = false;
  if (rc != LUA_OK) return lua_error(L);
  lua_pop(L, 1); /* a cancel function has no use here: nothing cancels a plain wait */
  if (w->early_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, w->early_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, w->early_ref);
    return lr__unpack_early(L);
  }
  w->waiting = true;
  return lua_yield(L, 0);
}

/* lunarun.wait(starter): starter(done) begins asynchronous work and may
 * return a function that cancels it; the coroutine yields until done(...)
 * is called, and wait returns what done got. In a binding call the glue
 * resumes the handler and can cancel the wait; elsewhere (any coroutine of
 * a Lua program using the module) done resumes that coroutine. */
static int lr__wait(lua_State *L) {
  lr_lua *lua = lr__lua_of(L);
  lr_lua_call *lc = lua ? lua->running : NULL;
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_settop(L, 1);
  if (!lc || lc->co != L) {
    if (lc) return luaL_error(L, "lunarun.wait must be called from the binding handler's own coroutine");
    return lr__plain_wait(L);
  }
  if (lc->ending) return luaL_error(L, "lunarun.wait cannot be used once the call is over (cancel functions, after hooks)");
  lc->wait_token++;
  lc->early = false;
  lua_pushinteger(L, (lua_Integer)lc->serial);
  lua_pushinteger(L, (lua_Integer)lc->wait_token);
  lua_pushcclosure(L, lr__done, 2);
  lc->in_starter = true;
  int rc = lua_pcall(L, 1, 1, 0);
  lc->in_starter = false;
  if (rc != LUA_OK) return lua_error(L);
  if (lua_isfunction(L, -1)) lc->cancel_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  else lua_pop(L, 1);
  if (lc->early) {
    lc->early = false;
    luaL_unref(L, LUA_REGISTRYINDEX, lc->cancel_ref);
    lc->cancel_ref = LUA_NOREF;
    lua_rawgeti(L, LUA_REGISTRYINDEX, lc->early_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, lc->early_ref);
    lc->early_ref = LUA_NOREF;
    return lr__unpack_early(L);
  }
  lc->waiting = true;
  return lua_yield(L, 0);
}

static void lr__push_busy_message(lua_State *L, lr_lua_call *lc) {
  lua_pushfstring(L, "binding \"%s.%s\" ran for more than %d ms without waiting", lc->global, lc->member,
                  (int)(lc->busy_ns / 1000000));
}

/* The instruction-count hook: a handler that runs longer than its busy
 * budget without waiting is stopped. Where it can, the hook yields the
 * coroutine for good (lr__call_resume then rejects the call): no code of
 * the handler runs after that, not a pcall's continuation nor an xpcall's
 * message handler (which would run with hooks off, as the error would be
 * raised inside this hook). Where a yield is impossible (inside a C
 * function's callback: a sort comparator, a gsub function...) it raises,
 * and keeps firing on every instruction, so a pcall cannot swallow it. */
static void lr__busy_hook(lua_State *L, lua_Debug *ar) {
  (void)ar;
  lr_lua *lua = lr__lua_of(L);
  lr_lua_call *lc = lua ? lua->running : NULL;
  if (!lc) return;
  if (!lc->busy_exceeded && uv_hrtime() - lc->slice_start <= lc->busy_ns) return;
  if (!lc->busy_exceeded) {
    lc->busy_exceeded = true;
    lua_sethook(lc->co, lr__busy_hook, LUA_MASKCOUNT, 1);
  }
  lua_sethook(L, lr__busy_hook, LUA_MASKCOUNT, 1);
  if (lua_isyieldable(L)) {
    lua_yield(L, 0); /* a hook that yields returns right after */
    return;
  }
  lr__push_busy_message(L, lc);
  lua_error(L);
}

void lr__lua_open_helpers(lua_State *L) {
  lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_NULL);
  lua_setfield(L, -2, "null");
  lua_pushcfunction(L, lr__array);
  lua_setfield(L, -2, "array");
  lua_pushcfunction(L, lr__is_array);
  lua_setfield(L, -2, "is_array");
  lua_pushcfunction(L, lr__wait);
  lua_setfield(L, -2, "wait");
  lua_pushcfunction(L, lr__lua_json_encode);
  lua_setfield(L, -2, "json_encode");
  lua_pushcfunction(L, lr__lua_json_decode);
  lua_setfield(L, -2, "json_decode");
  lua_pushcfunction(L, lr__lua_release_handle);
  lua_setfield(L, -2, "_release_handle");
  lr__lua_open_http(L);
  lua_setfield(L, -2, "http_client");
  /* The Lua-written helpers (sleep, exec, ...) take the table and fill it. */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lunarun.helpers");
  lua_call(L, 1, 1);
  lua_pushvalue(L, -2);
  lua_call(L, 1, 0);
}

static int lr__load_embedded(lua_State *L) {
  const struct lr_embedded *e = lua_touserdata(L, lua_upvalueindex(1));
  char chunkname[128];
  snprintf(chunkname, sizeof chunkname, "=lua/%s.lua", e->name);
  for (char *p = chunkname + 5; *p; p++)
    if (*p == '.' && strcmp(p, ".lua") != 0) *p = '/';
  if (luaL_loadbufferx(L, e->data, e->len, chunkname, "t") != LUA_OK) return lua_error(L);
  lua_pushvalue(L, 1);
  lua_call(L, 1, 1);
  return 1;
}

static void lr__cancel_all(lr_lua *lua);

/* The state is closing: from now on nothing touches Lua. */
static int lr__anchor_gc(lua_State *L) {
  lr_lua **slot = lua_touserdata(L, 1);
  lr_lua *lua = *slot;
  if (!lua) return 0;
  *slot = NULL;
  lua->closed = true;
  /* A Lua program that exits without disposing its runtimes: their __gc
   * (run before this one, as they were made after it) started disposal;
   * finish it now, while the loop and luv still exist. Nothing calls into
   * Lua any more (closed is set). */
  if (!lua->owned)
    while (lua->disposals > 0 && uv_run(lua->loop, UV_RUN_ONCE)) {
    }
  lr__lua_release(lua);
  return 0;
}

/* Sets up lua on L (its main thread): the registry entries, the embedded
 * modules, luv on the loop, the loader. Raises on failure. */
static void lr__lua_init(lua_State *L, lr_lua *lua) {
  lua->refs = 1; /* the anchor's */
  lua->loader_ref = lua->idle_ref = LUA_NOREF;
  lr_lua **anchor = lua_newuserdatauv(L, sizeof *anchor, 0);
  *anchor = lua;
  if (luaL_newmetatable(L, LR_LUA_ANCHOR)) {
    lua_pushcfunction(L, lr__anchor_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  lua_setfield(L, LUA_REGISTRYINDEX, LR_LUA_ANCHOR ".self"); /* not the metatable's key */
  lua_pushlightuserdata(L, lua);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &lr__lua_key);
  lr__lua_values_init(L);
  luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
  for (const struct lr_embedded *e = lr__lua_modules; e->name; e++) {
    lua_pushlightuserdata(L, (void *)e);
    lua_pushcclosure(L, lr__load_embedded, 1);
    lua_setfield(L, -2, e->name);
  }
  lua_pushcfunction(L, luaopen_lunarun);
  lua_setfield(L, -2, "lunarun");
  lua_pop(L, 1);
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lunarun.loader");
  lua_call(L, 1, 1);
  lua->loader_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  lua_createtable(L, LR_IDLE_COROUTINES, 0);
  lua->idle_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

static int lr__lua_init_protected(lua_State *L) {
  lr__lua_init(L, lua_touserdata(L, 1));
  return 0;
}

lr_lua *lr_lua_new(uv_loop_t *loop) {
  lr_lua *lua = calloc(1, sizeof *lua);
  if (!lua) return NULL;
  lua_State *L = luaL_newstate();
  if (!L) {
    free(lua);
    return NULL;
  }
  lua->L = L;
  lua->loop = loop;
  lua->owned = true;
  luaL_openlibs(L);
  /* luv on the engine's loop, so handlers can wait on timers, processes... */
  luv_set_loop(L, loop);
  luv_set_callback(L, lr__luv_pcall);
  luaL_requiref(L, "luv", luaopen_luv, 0);
  lua_pop(L, 1);
  lua_pushcfunction(L, lr__lua_init_protected);
  lua_pushlightuserdata(L, lua);
  if (lr__lua_pcall(L, 1, 0) != LUA_OK) {
    fprintf(stderr, "lunarun: cannot set up Lua: %s\n", lua_tostring(L, -1));
    lua_close(L); /* the anchor, if made, releases lua */
    return NULL;
  }
  return lua;
}

lr_lua *lr__lua_get(lua_State *L) {
  lr_lua *lua = lr__lua_of(L);
  if (lua) return lua;
  /* A caller's state: share luv's loop (require "luv" makes it if needed). */
  lua_getglobal(L, "require");
  lua_pushliteral(L, "luv");
  lua_call(L, 1, 0);
  uv_loop_t *loop = luv_loop(L);
  if (!loop) luaL_error(L, "lunarun: luv has no loop");
  lua = calloc(1, sizeof *lua);
  if (!lua) luaL_error(L, "not enough memory");
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  lua->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  lua->loop = loop;
  lr__lua_init(L, lua);
  return lua;
}

void lr_lua_close(lr_lua *lua) {
  if (!lua) return;
  lr__lua_retain(lua);
  lr__cancel_all(lua);
  lua_close(lua->L); /* the anchor's __gc marks it closed */
  lr__lua_release(lua);
}

/* ---- calls ---------------------------------------------------------------- */

static void lr__call_free(lr_lua_call *lc) {
  lr_lua *lua = lc->lua;
  if (lc->prev) lc->prev->next = lc->next;
  else lua->calls = lc->next;
  if (lc->next) lc->next->prev = lc->prev;
  if (!lua->closed) {
    lua_State *L = lua->L;
    if (lc->co_reusable && lua->nidle < LR_IDLE_COROUTINES && lua_status(lc->co) == LUA_OK) {
      lua_settop(lc->co, 0);
      lua_rawgeti(L, LUA_REGISTRYINDEX, lua->idle_ref);
      lua_rawgeti(L, LUA_REGISTRYINDEX, lc->co_ref);
      lua_rawseti(L, -2, ++lua->nidle);
      lua_pop(L, 1);
    }
    luaL_unref(L, LUA_REGISTRYINDEX, lc->co_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, lc->member_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, lc->info_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, lc->cancel_ref);
    luaL_unref(L, LUA_REGISTRYINDEX, lc->early_ref);
  }
  free(lc);
}

/* The state is about to close: every call in flight fails now. */
static void lr__cancel_all(lr_lua *lua) {
  while (lua->calls) {
    lr_lua_call *lc = lua->calls;
    static const char msg[] = "the bindings' Lua state was closed";
    lr_call_reject(lc->call, msg, sizeof msg - 1);
    lr__call_free(lc);
  }
}

static void lr__reject_with_error(lua_State *co, lr_call *call) {
  size_t len = 0;
  const char *msg = NULL;
  if (lua_type(co, -1) == LUA_TSTRING || lua_type(co, -1) == LUA_TNUMBER) {
    msg = lua_tolstring(co, -1, &len);
  } else if (lua_type(co, -1) == LUA_TTABLE) {
    lua_getfield(co, -1, "message");
    if (lua_type(co, -1) == LUA_TSTRING) msg = lua_tolstring(co, -1, &len);
    else lua_pop(co, 1);
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

/* Runs the function under nargs values at the top of the main thread (which
 * pops them) in a coroutine of its own, under the call's busy budget like the
 * handler: a wait's cancel function or an after hook that loops cannot hang
 * the host. It cannot wait. Failures are reported on stderr as `what`. */
static void lr__call_guarded(lr_lua_call *lc, int nargs, const char *what) {
  lr_lua *lua = lc->lua;
  lua_State *L = lua->L;
  lua_State *co = lua_newthread(L);
  lua_insert(L, -(nargs + 2));
  lua_xmove(L, co, nargs + 1);
  lua_sethook(co, lr__busy_hook, LUA_MASKCOUNT, 1000);
  lua_State *handler_co = lc->co;
  lr_lua_call *outer = lua->running;
  lc->co = co;
  lc->ending = true;
  lc->busy_exceeded = false;
  lc->slice_start = uv_hrtime();
  lua->running = lc;
  int nres = 0;
  int status = lua_resume(co, L, nargs, &nres);
  lua->running = outer;
  if (status == LUA_YIELD && lc->busy_exceeded) {
    lr__push_busy_message(co, lc);
    fprintf(stderr, "lunarun: %s was stopped: %s\n", what, lua_tostring(co, -1));
  } else if (status == LUA_YIELD) {
    fprintf(stderr, "lunarun: %s yielded; it was dropped\n", what);
  } else if (status != LUA_OK) {
    const char *msg = lua_tostring(co, -1);
    fprintf(stderr, "lunarun: %s failed: %s\n", what, msg ? msg : "(the error is not a string)");
  }
  lc->co = handler_co;
  lua_pop(L, 1); /* the thread */
}

/* The after hook of a call whose handler did not finish: loader.cancelled. */
static void lr__call_after_cancelled(lr_lua_call *lc, const char *reason, size_t len) {
  lua_State *L = lc->lua->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, lc->lua->loader_ref);
  lua_getfield(L, -1, "cancelled");
  lua_remove(L, -2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, lc->member_ref);
  lua_rawgeti(L, LUA_REGISTRYINDEX, lc->info_ref);
  lua_pushlstring(L, reason, len);
  lr__call_guarded(lc, 3, "an after hook");
}

/* Resumes the call's coroutine with nargs values on its stack, and
 * completes the call when the coroutine ends. */
static void lr__call_resume(lr_lua_call *lc, int nargs) {
  lr_lua *lua = lc->lua;
  lua_State *co = lc->co;
  lr_lua_call *outer = lua->running;
  lua->running = lc;
  lc->slice_start = uv_hrtime();
  int nres = 0;
  int status = lua_resume(co, lua->L, nargs, &nres);
  lua->running = outer;
  if (status == LUA_YIELD) {
    lua_pop(co, nres);
    if (lc->waiting) return;
    /* Stopped by the busy hook, or a yield of its own: the coroutine is
     * never resumed. The after hook hears of it, then the program. */
    size_t len;
    const char *msg;
    if (lc->busy_exceeded) {
      lr__push_busy_message(co, lc);
      msg = lua_tolstring(co, -1, &len);
    } else {
      lua_pushliteral(co, "the binding yielded outside lunarun.wait; nothing can resume it");
      msg = lua_tolstring(co, -1, &len);
    }
    lr__call_after_cancelled(lc, msg, len);
    lr_call_reject(lc->call, msg, len);
  } else if (status == LUA_OK) {
    lc->co_reusable = true;
    lr_json value;
    char err[LR_ERR_MAX];
    if (nres == 0) lua_pushnil(co);
    if (lr__lua_to_json(co, -1, &value, err) != 0) lr_call_reject_lossy(lc->call);
    else lr_call_resolve(lc->call, &value);
  } else {
    lr__reject_with_error(co, lc->call);
  }
  lr__call_free(lc);
}

static void lr__lua_call(void *ud, lr_call *call) {
  lr_lua_namespace *ns = ud;
  lr_lua *lua = ns->lua;
  lua_State *L = lua->L;
  if (lua->closed) {
    static const char msg[] = "the bindings' Lua state is closed";
    lr_call_reject(call, msg, sizeof msg - 1);
    return;
  }
  lr_lua_call *lc = calloc(1, sizeof *lc);
  if (!lc) {
    lr_call_reject(call, "out of memory", 13);
    return;
  }
  size_t index = lr_call_member_index(call);
  lc->lua = lua;
  lc->ns = ns;
  lc->call = call;
  lc->global = lr_call_global(call);
  lc->member = lr_call_member(call, &lc->member_len);
  lc->serial = ++lua->next_serial;
  lc->cancel_ref = lc->early_ref = LUA_NOREF;
  lc->busy_ns = ns->busy_ns[index];
  lc->next = lua->calls;
  if (lua->calls) lua->calls->prev = lc;
  lua->calls = lc;
  lr_call_set_user(call, lc);

  if (lua->nidle > 0) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, lua->idle_ref);
    lua_rawgeti(L, -1, lua->nidle);
    lc->co = lua_tothread(L, -1);
    lc->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushnil(L);
    lua_rawseti(L, -2, lua->nidle--);
    lua_pop(L, 1);
  } else {
    lc->co = lua_newthread(L);
    lc->co_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_sethook(lc->co, lr__busy_hook, LUA_MASKCOUNT, 1000);
  }
  lua_State *co = lc->co;
  /* loader.invoke(member, args, info) */
  lua_rawgeti(co, LUA_REGISTRYINDEX, lua->loader_ref);
  lua_getfield(co, -1, "invoke");
  lua_remove(co, -2);
  lua_rawgeti(co, LUA_REGISTRYINDEX, ns->ns_ref);
  lua_getfield(co, -1, "members");
  lua_rawgeti(co, -1, (lua_Integer)index + 1);
  lua_pushvalue(co, -1);
  lc->member_ref = luaL_ref(co, LUA_REGISTRYINDEX);
  lua_replace(co, -3);
  lua_pop(co, 1);
  lr__lua_push_json(co, lr_call_args(call));
  lua_createtable(co, 0, 5);
  lua_pushstring(co, lr_call_global(call));
  lua_setfield(co, -2, "namespace");
  size_t mlen;
  const char *member = lr_call_member(call, &mlen);
  lua_pushlstring(co, member, mlen);
  lua_setfield(co, -2, "name");
  lua_pushinteger(co, (lua_Integer)lr_call_run_id(call));
  lua_setfield(co, -2, "run");
  lua_pushinteger(co, (lua_Integer)lr_call_id(call));
  lua_setfield(co, -2, "id");
  lua_pushvalue(co, -1);
  lc->info_ref = luaL_ref(co, LUA_REGISTRYINDEX);
  lr__call_resume(lc, 3);
}

/* The engine is done with the call (timeout, or its run ended): cancel the
 * wait in progress, tell the after hook, drop the coroutine. */
static void lr__lua_cancel(void *ud, lr_call *call) {
  lr_lua_namespace *ns = ud;
  lr_lua_call *lc = lr_call_user(call);
  lua_State *L = ns->lua->L;
  if (ns->lua->closed) {
    lr_call_reject(call, "cancelled", 9);
    lr__call_free(lc);
    return;
  }
  int top = lua_gettop(L);
  if (lc->cancel_ref != LUA_NOREF) {
    lua_rawgeti(L, LUA_REGISTRYINDEX, lc->cancel_ref);
    lr__call_guarded(lc, 0, "a wait's cancel function");
  }
  const char *reason = lr_call_cancel_reason(call);
  if (!reason) reason = "the call was cancelled";
  lr__call_after_cancelled(lc, reason, strlen(reason));
  lua_settop(L, top);
  lr_call_reject(call, "cancelled", 9); /* sends nothing now; frees the call */
  lr__call_free(lc);
}

/* A call of this namespace the engine refused (maxCalls, lossy arguments):
 * the after hook hears of it, as `refused`. It runs guarded like a cancelled
 * call's hook, under the member's busy budget. */
static void lr__lua_refused(void *ud, const lr_call_refusal *r) {
  lr_lua_namespace *ns = ud;
  lr_lua *lua = ns->lua;
  if (lua->closed) return;
  lua_State *L = lua->L;
  int top = lua_gettop(L);
  lr_lua_call pseudo = {.lua = lua, .ns = ns, .busy_ns = ns->busy_ns[r->member]};
  lua_rawgeti(L, LUA_REGISTRYINDEX, lua->loader_ref);
  lua_getfield(L, -1, "refused");
  lua_rawgeti(L, LUA_REGISTRYINDEX, ns->ns_ref);
  lua_getfield(L, -1, "members");
  lua_rawgeti(L, -1, (lua_Integer)r->member + 1);
  lua_getfield(L, -1, "global");
  pseudo.global = lua_tostring(L, -1);
  lua_getfield(L, -2, "name");
  pseudo.member = lua_tolstring(L, -1, &pseudo.member_len);
  int member_idx = lua_gettop(L) - 2;
  /* loader.refused(member, info, message) */
  lua_pushvalue(L, top + 2);
  lua_pushvalue(L, member_idx);
  lua_createtable(L, 0, 5);
  lua_pushstring(L, pseudo.global);
  lua_setfield(L, -2, "namespace");
  lua_pushlstring(L, pseudo.member, pseudo.member_len);
  lua_setfield(L, -2, "name");
  lua_pushinteger(L, (lua_Integer)r->run_id);
  lua_setfield(L, -2, "run");
  lua_pushinteger(L, (lua_Integer)r->call_id);
  lua_setfield(L, -2, "id");
  if (r->args) {
    lr__lua_push_json(L, r->args);
    lua_setfield(L, -2, "args");
  }
  lua_pushstring(L, r->message);
  lr__call_guarded(&pseudo, 3, "an after hook");
  lua_settop(L, top);
}

static void lr__lua_namespace_free(void *ud) {
  lr_lua_namespace *ns = ud;
  if (!ns->lua->closed) luaL_unref(ns->lua->L, LUA_REGISTRYINDEX, ns->ns_ref);
  lr__lua_release(ns->lua);
  free(ns->busy_ns);
  free(ns);
}

/* ---- config and bindings files ------------------------------------------- */

static void lr__mounts_free(lr_mount *mounts, size_t n) {
  for (size_t i = 0; i < n; i++) {
    free(mounts[i].host);
    free(mounts[i].at);
  }
  free(mounts);
}

/* mounts = { { host = "/abs", at = "/abs", write = false }, ... }: replaces
 * the mounts set so far. Unknown fields are misuse, naming the field. */
static int lr__lua_mounts(lua_State *L, int idx, lr_config *cfg, char *err) {
  if (!lua_istable(L, idx))
    return lr__errf(err, "config: mounts must be a list of { host = \"/abs/path\", at = \"/abs/path\", write = false } "
                         "tables, got %s", luaL_typename(L, idx));
  lua_Integer n = luaL_len(L, idx);
  size_t count = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    count++;
    bool ok = lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && lua_tointeger(L, -2) <= n;
    lua_pop(L, 1);
    if (!ok) {
      lua_pop(L, 1);
      return lr__errf(err, "config: mounts must be a list (keys 1, 2, ...)");
    }
  }
  if ((lua_Integer)count != n) return lr__errf(err, "config: mounts must be a list (keys 1, 2, ...)");
  lr_config fresh = *cfg;
  fresh.mounts = NULL;
  fresh.nmounts = 0;
  int rc = 0;
  for (lua_Integer i = 1; rc == 0 && i <= n; i++) {
    lua_rawgeti(L, idx, i);
    int m = lua_gettop(L);
    if (!lua_istable(L, m)) {
      rc = lr__errf(err, "config: mounts[%lld] must be a table { host = ..., at = ..., write = ... }, got %s",
                    (long long)i, luaL_typename(L, m));
    } else {
      const char *host = NULL, *at = NULL;
      bool write = false;
      lua_pushnil(L);
      while (rc == 0 && lua_next(L, m)) {
        const char *f = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (f && (strcmp(f, "host") == 0 || strcmp(f, "at") == 0)) {
          if (lua_type(L, -1) != LUA_TSTRING)
            rc = lr__errf(err, "config: mounts[%lld].%s must be a string, got %s", (long long)i, f,
                          luaL_typename(L, -1));
          else if (f[0] == 'h')
            host = lua_tostring(L, -1);
          else
            at = lua_tostring(L, -1);
        } else if (f && strcmp(f, "write") == 0) {
          if (lua_type(L, -1) != LUA_TBOOLEAN)
            rc = lr__errf(err, "config: mounts[%lld].write must be a boolean, got %s", (long long)i,
                          luaL_typename(L, -1));
          else
            write = lua_toboolean(L, -1);
        } else {
          rc = lr__errf(err, "config: mounts[%lld]: unknown field \"%s\" (known: host, at, write)", (long long)i,
                        f ? f : luaL_typename(L, -2));
        }
        lua_pop(L, 1);
      }
      if (rc != 0) lua_pop(L, 1); /* the key lua_next left */
      else if (!host || !at)
        rc = lr__errf(err, "config: mounts[%lld] needs %s", (long long)i, !host ? "host" : "at");
      else {
        char inner[LR_ERR_MAX];
        if (lr_config_add_mount(&fresh, host, at, write, inner) != 0)
          rc = lr__errf(err, "config: mounts[%lld]: %s", (long long)i, inner + (strncmp(inner, "config: mounts: ", 16) == 0 ? 16 : 0));
      }
    }
    lua_settop(L, m - 1);
  }
  if (rc != 0) {
    lr__mounts_free(fresh.mounts, fresh.nmounts);
    return -1;
  }
  /* Replace the old list with the new one. */
  lr__mounts_free(cfg->mounts, cfg->nmounts);
  cfg->mounts = fresh.mounts;
  cfg->nmounts = fresh.nmounts;
  return 0;
}

int lr__lua_config_from_table(lua_State *L, int idx, lr_config *cfg, const char *where, char *err) {
  idx = lua_absindex(L, idx);
  int top = lua_gettop(L);
  int rc = 0;
  lua_pushnil(L);
  while (rc == 0 && lua_next(L, idx)) {
    char inner[LR_ERR_MAX];
    if (lua_type(L, -2) != LUA_TSTRING) {
      rc = lr__errf(err, "%s: keys must be strings", where);
    } else {
      const char *key = lua_tostring(L, -2);
      int t = lua_type(L, -1);
      if (strcmp(key, "mounts") == 0)
        rc = lr__lua_mounts(L, lua_gettop(L), cfg, inner);
      else if (t != LUA_TBOOLEAN && strcmp(key, "allowChildProcesses") == 0)
        rc = lr__errf(inner, "config: allowChildProcesses must be a boolean (true or false), got %s%s%.100s%s",
                      luaL_typename(L, -1), t == LUA_TSTRING ? " \"" : "", t == LUA_TSTRING ? lua_tostring(L, -1) : "",
                      t == LUA_TSTRING ? "\"" : "");
      else if (t == LUA_TNUMBER)
        rc = lr_config_set_number(cfg, key, lua_tonumber(L, -1), inner);
      else if (t == LUA_TSTRING)
        rc = lr_config_set(cfg, key, lua_tostring(L, -1), inner);
      else if (t == LUA_TBOOLEAN)
        rc = lr__config_set_bool(cfg, key, lua_toboolean(L, -1), inner);
      else
        rc = lr__errf(inner, "config: %s must be a number or a string, got %s", key, luaL_typename(L, -1));
      if (rc) lr__errf(err, "%s: %s", where, inner);
    }
    lua_pop(L, 1);
  }
  lua_settop(L, top);
  return rc;
}

/* A config file: a Lua chunk returning {key = value}, run in a state of its
 * own (it needs nothing of the host's). */
int lr_config_load_file(lr_config *cfg, const char *path, char *err) {
  lua_State *L = luaL_newstate();
  if (!L) return lr__errf(err, "config file %s: cannot make a Lua state", path);
  luaL_openlibs(L);
  int rc = 0;
  char where[LR_ERR_MAX];
  snprintf(where, sizeof where, "config file %s", path);
  if (luaL_loadfilex(L, path, "t") != LUA_OK) {
    rc = lr__errf(err, "config file %s", lua_tostring(L, -1));
  } else if (lr__lua_pcall(L, 0, 1) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    rc = lr__errf(err, "config file %s failed: %.*s", path, msg ? (int)strcspn(msg, "\n") : 0, msg ? msg : "");
  } else if (!lua_istable(L, -1)) {
    rc = lr__errf(err, "config file %s must return a table of settings, got %s", path, luaL_typename(L, -1));
  } else {
    rc = lr__lua_config_from_table(L, -1, cfg, where, err);
  }
  lua_close(L);
  return rc;
}

static lua_Integer lr__int_field(lua_State *L, int t, const char *key) {
  lua_getfield(L, t, key);
  lua_Integer v = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
  lua_pop(L, 1);
  return v;
}

/* The def of the normalized namespace at stack index t (loader.lua). Its
 * strings live as long as that table stays on the stack; the arrays are the
 * caller's to free. */
static void lr__namespace_def(lua_State *L, int t, lr_namespace_def *def, uint64_t **busy) {
  int top = lua_gettop(L);
  memset(def, 0, sizeof *def);
  lua_getfield(L, t, "global");
  def->global = lua_tostring(L, -1);
  lua_pop(L, 1); /* still referenced by the table */
  if (lua_getfield(L, t, "errorClass") == LUA_TTABLE) {
    lua_getfield(L, -1, "name");
    def->error_class = lua_tostring(L, -1);
    lua_getfield(L, -2, "memberNameProperty");
    def->member_name_property = lua_tostring(L, -1);
  }
  lua_settop(L, top);
  lua_getfield(L, t, "members");
  int mt = lua_gettop(L);
  size_t n = (size_t)luaL_len(L, mt);
  const char **members = calloc(n + 1, sizeof *members);
  lr_member_policy *policies = calloc(n + 1, sizeof *policies);
  *busy = calloc(n + 1, sizeof **busy);
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, mt, (lua_Integer)i + 1);
    int m = lua_gettop(L);
    lua_getfield(L, m, "name");
    members[i] = lua_tostring(L, -1); /* kept alive by the members table */
    lua_getfield(L, m, "readOnly");
    policies[i].read_only = lua_toboolean(L, -1);
    policies[i].timeout_ms = (uint64_t)lr__int_field(L, m, "timeoutMs");
    policies[i].max_calls = (uint64_t)lr__int_field(L, m, "maxCalls");
    (*busy)[i] = (uint64_t)lr__int_field(L, m, "maxBusyMs") * 1000000u;
    lua_settop(L, mt);
  }
  lua_settop(L, top);
  def->members = members;
  def->nmembers = n;
  def->policies = policies;
  def->call = lr__lua_call;
  def->cancel = lr__lua_cancel;
  def->refused = lr__lua_refused;
  def->free_ud = lr__lua_namespace_free;
}

/* Adds one normalized namespace (at the top of the stack) to rt. */
static int lr__add_namespace(lr_lua *lua, lr_runtime *rt, const char *where, char *err) {
  lua_State *L = lua->L;
  int t = lua_gettop(L);
  lr_namespace_def def;
  lr_lua_namespace *ns = calloc(1, sizeof *ns);
  lr__namespace_def(L, t, &def, &ns->busy_ns);
  ns->lua = lua;
  lr__lua_retain(lua);
  lua_pushvalue(L, t);
  ns->ns_ref = luaL_ref(L, LUA_REGISTRYINDEX);
  def.ud = ns;
  char inner[LR_ERR_MAX];
  int rc = 0;
  if (lr_runtime_add_namespace(rt, &def, inner) != 0) {
    rc = lr__errf(err, "%s: %s", where, inner);
    lr__lua_namespace_free(ns);
  }
  free((void *)def.members);
  free((void *)def.policies);
  lua_settop(L, t);
  return rc;
}

/* Runs loader.load(path), leaving the list of namespaces on the stack. */
static int lr__load_file(lr_lua *lua, const char *path, char *err) {
  lua_State *L = lua->L;
  lua_rawgeti(L, LUA_REGISTRYINDEX, lua->loader_ref);
  lua_getfield(L, -1, "load");
  lua_remove(L, -2);
  lua_pushstring(L, path);
  if (lr__lua_pcall(L, 1, 1) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    lr__errf(err, "%.*s", msg ? (int)strcspn(msg, "\n") : 0, msg ? msg : "bindings file failed to load");
    lua_pop(L, 1);
    return -1;
  }
  return 0;
}

static int lr__lua_describe(lr_lua *lua, const char *const *paths, size_t npaths, char **out, char *err) {
  lua_State *L = lua->L;
  int top = lua_gettop(L);
  *out = NULL;
  lua_getglobal(L, "require");
  lua_pushliteral(L, "lunarun.describe");
  if (lr__lua_pcall(L, 1, 1) != LUA_OK) {
    lr__errf(err, "describe: %s", lua_tostring(L, -1));
    lua_settop(L, top);
    return -1;
  }
  lua_getfield(L, -1, "render");
  lua_newtable(L);
  int all = lua_gettop(L);
  lua_newtable(L); /* globals and class names seen: one scope in the program */
  int taken = lua_gettop(L);
  for (size_t p = 0; p < npaths; p++) {
    if (lr__load_file(lua, paths[p], err) != 0) {
      lua_settop(L, top);
      return -1;
    }
    int list = lua_gettop(L);
    for (lua_Integer i = 1; i <= luaL_len(L, list); i++) {
      lua_rawgeti(L, list, i);
      lr_namespace_def def;
      uint64_t *busy;
      lr__namespace_def(L, lua_gettop(L), &def, &busy);
      char inner[LR_ERR_MAX];
      int rc = lr_namespace_def_check(&def, inner);
      free((void *)def.members);
      free((void *)def.policies);
      free(busy);
      const char *names[2] = {def.global, def.error_class};
      for (int k = 0; rc == 0 && k < 2 && names[k]; k++) {
        if (lua_getfield(L, taken, names[k]) != LUA_TNIL)
          rc = lr__errf(inner, "namespace \"%s\": \"%s\" is already used by another namespace or error class",
                        def.global, names[k]);
        lua_pop(L, 1);
        lua_pushboolean(L, 1);
        lua_setfield(L, taken, names[k]);
      }
      if (rc != 0) {
        lr__errf(err, "bindings file %s: %s", paths[p], inner);
        lua_settop(L, top);
        return -1;
      }
      lua_rawseti(L, all, luaL_len(L, all) + 1);
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* taken */
  if (lr__lua_pcall(L, 1, 1) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    lr__errf(err, "%.*s", msg ? (int)strcspn(msg, "\n") : 0, msg ? msg : "describe failed");
    lua_settop(L, top);
    return -1;
  }
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  *out = malloc(len + 1);
  if (*out) memcpy(*out, text, len + 1);
  lua_settop(L, top);
  return 0;
}

/* Adds every namespace of the normalized list at the top of the stack. */
static int lr__add_list(lr_lua *lua, lr_runtime *rt, const char *where, char *err) {
  lua_State *L = lua->L;
  int list = lua_gettop(L);
  int rc = 0;
  for (lua_Integer i = 1; rc == 0 && i <= luaL_len(L, list); i++) {
    lua_rawgeti(L, list, i);
    rc = lr__add_namespace(lua, rt, where, err);
    lua_pop(L, 1);
  }
  return rc;
}

int lr__lua_add_namespaces(lr_lua *lua, lr_runtime *rt, int idx, const char *where, char *err) {
  lua_State *L = lua->L;
  idx = lua_absindex(L, idx);
  int top = lua_gettop(L);
  lua_rawgeti(L, LUA_REGISTRYINDEX, lua->loader_ref);
  lua_getfield(L, -1, "normalize");
  lua_remove(L, -2);
  lua_pushvalue(L, idx);
  lua_pushstring(L, where);
  int rc;
  if (lr__lua_pcall(L, 2, 1) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    rc = lr__errf(err, "%.*s", msg ? (int)strcspn(msg, "\n") : 0, msg ? msg : "bad namespaces");
  } else {
    rc = lr__add_list(lua, rt, where, err);
  }
  lua_settop(L, top);
  return rc;
}

int lr__lua_load_bindings(lr_lua *lua, lr_runtime *rt, const char *path, char *err) {
  lua_State *L = lua->L;
  int top = lua_gettop(L);
  if (lr__load_file(lua, path, err) != 0) return -1;
  char where[LR_ERR_MAX];
  snprintf(where, sizeof where, "bindings file %s", path);
  int rc = lr__add_list(lua, rt, where, err);
  lua_settop(L, top);
  return rc;
}

static void lr__close_runtime_lua(void *ext) {
  lr_lua *lua = ext;
  lr_lua_close(lua);
}

int lr_runtime_load_bindings(lr_runtime *rt, const char *path, char *err) {
  lr_lua *lua = lr__runtime_ext(rt);
  if (!lua) {
    lua = lr_lua_new(lr_runtime_loop(rt));
    if (!lua) return lr__errf(err, "bindings file %s: cannot make a Lua state", path);
    lr__runtime_set_ext(rt, lua, lr__close_runtime_lua);
  }
  return lr__lua_load_bindings(lua, rt, path, err);
}

int lr_describe(const char *const *paths, size_t npaths, char **out, char *err) {
  /* The files' top-level code may start luv handles: give them a loop of
   * their own, run it dry afterwards. */
  uv_loop_t loop;
  uv_loop_init(&loop);
  lr_lua *lua = lr_lua_new(&loop);
  int rc = lua ? lr__lua_describe(lua, paths, npaths, out, err) : lr__errf(err, "describe: cannot make a Lua state");
  if (lua) lr_lua_close(lua);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
  return rc;
}
