/* The HTTP client seen from Lua, callback style; the Lua layer wraps it with
 * lunarun.wait:
 *
 *   local http = <what lr__lua_open_http pushes>
 *   local cancel = http.request({ method = "POST", url = "http://...",
 *       headers = { ["Content-Type"] = "text/plain" }, body = "...",
 *       timeoutMs = 5000, maxBytes = 1048576 },
 *     function(res, err, code) ... end)
 *   -- res = { status = 200, headers = { ["content-type"] = "..." }, body = "..." }
 *   -- or res = nil, err = "request timed out after 5000 ms", code = "ETIMEDOUT"
 *   http.parse_url(url) -> { scheme =, host =, port = } | nil, message
 *
 * Misuse (a wrong opts field) raises; a failed transfer reaches the callback.
 * One client per Lua state, owned by a userdata in the registry whose __gc
 * closes it, so lua_close cancels what is in flight (the loop must then run
 * once more for the handles to close). Each request is a userdata pinned by
 * a registry ref while in flight; it holds the callback as its user value. */
#include <lauxlib.h>
#include <lua.h>
#include <luv/luv.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "http.h"

/* Metatable names, and the registry key of the state's one client. */
#define LR_LUA_HTTP_CLIENT "lunarun.http.client"
#define LR_LUA_HTTP_REQUEST "lunarun.http.request"
#define LR_LUA_HTTP_INSTANCE "lunarun.http"

typedef struct lr_lua_http_req lr_lua_http_req;

typedef struct lr_lua_http {
  lr_http_client *client; /* NULL once collected */
  lua_State *L;           /* the main thread: callbacks run on it */
  lr_lua_http_req *pending;
} lr_lua_http;

/* In owner->pending exactly while req is non-NULL. */
struct lr_lua_http_req {
  lr_lua_http *owner;
  lr_http_request *req;
  int ref; /* pins this userdata (and so the callback) while in flight */
  lr_lua_http_req *prev, *next;
};

static int lr__lua_http_traceback(lua_State *L) {
  if (lua_type(L, 1) == LUA_TSTRING) luaL_traceback(L, L, lua_tostring(L, 1), 1);
  return 1;
}

static void lr__lua_http_unlink(lr_lua_http_req *st) {
  lr_lua_http *owner = st->owner;
  if (st->prev)
    st->prev->next = st->next;
  else
    owner->pending = st->next;
  if (st->next) st->next->prev = st->prev;
  st->prev = st->next = NULL;
  st->req = NULL;
}

/* ---- completion ----------------------------------------------------------- */

static void lr__lua_http_push_response(lua_State *L, const lr_http_response *res) {
  lua_createtable(L, 0, 3);
  lua_pushinteger(L, (lua_Integer)res->status);
  lua_setfield(L, -2, "status");
  lua_createtable(L, 0, (int)res->nheaders);
  for (size_t i = 0; i < res->nheaders; i++) {
    const lr_http_header *h = &res->headers[i];
    luaL_Buffer b;
    char *name = luaL_buffinitsize(L, &b, h->name_len);
    for (size_t k = 0; k < h->name_len; k++) {
      char c = h->name[k];
      name[k] = (c >= 'A' && c <= 'Z') ? (char)(c + 32) : c;
    }
    luaL_pushresultsize(&b, h->name_len);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, -3) == LUA_TSTRING) {
      /* A repeated header: one value, joined as HTTP allows. */
      lua_pushliteral(L, ", ");
      lua_pushlstring(L, h->value, h->value_len);
      lua_concat(L, 3);
    } else {
      lua_pop(L, 1);
      lua_pushlstring(L, h->value, h->value_len);
    }
    lua_rawset(L, -3);
  }
  lua_setfield(L, -2, "headers");
  lua_pushlstring(L, res->body, res->body_len);
  lua_setfield(L, -2, "body");
}

/* Runs protected: (state, response, error) as light userdata. Builds the
 * arguments and calls the callback; errors go to the traceback handler. */
static int lr__lua_http_deliver(lua_State *L) {
  lr_lua_http_req *st = lua_touserdata(L, 1);
  const lr_http_response *res = lua_touserdata(L, 2);
  const lr_http_error *e = lua_touserdata(L, 3);
  lua_settop(L, 0);
  lua_rawgeti(L, LUA_REGISTRYINDEX, st->ref);
  luaL_unref(L, LUA_REGISTRYINDEX, st->ref); /* the stack holds it now */
  st->ref = LUA_NOREF;
  lua_getiuservalue(L, 1, 1);
  if (res) {
    lr__lua_http_push_response(L, res);
    lua_call(L, 1, 0);
  } else {
    lua_pushnil(L);
    lua_pushstring(L, e->message);
    lua_pushstring(L, lr__http_err_name(e->code));
    lua_call(L, 3, 0);
  }
  return 0;
}

/* The engine's callback: hands the outcome to Lua through lua_pcall. */
static void lr__lua_http_done(void *ud, const lr_http_response *res, const lr_http_error *e) {
  lr_lua_http_req *st = ud;
  lua_State *L = st->owner->L;
  lr__lua_http_unlink(st);
  if (!lua_checkstack(L, 8)) {
    fputs("lunarun: http callback not run: the Lua stack is full\n", stderr);
    luaL_unref(L, LUA_REGISTRYINDEX, st->ref);
    st->ref = LUA_NOREF;
    return;
  }
  int top = lua_gettop(L);
  lua_pushcfunction(L, lr__lua_http_traceback);
  lua_pushcfunction(L, lr__lua_http_deliver);
  lua_pushlightuserdata(L, st);
  lua_pushlightuserdata(L, (void *)res);
  lua_pushlightuserdata(L, (void *)e);
  if (lua_pcall(L, 3, 0, top + 1) != LUA_OK) {
    const char *msg = lua_tostring(L, -1);
    fprintf(stderr, "lunarun: error in an http callback: %s\n", msg ? msg : "(error object is not a string)");
  }
  lua_settop(L, top);
}

/* ---- request ---------------------------------------------------------------- */

static void lr__lua_http_stop(lua_State *L, lr_lua_http_req *st) {
  if (!st->req) return;
  lr__http_cancel(st->req);
  lr__lua_http_unlink(st);
  luaL_unref(L, LUA_REGISTRYINDEX, st->ref);
  st->ref = LUA_NOREF;
}

/* cancel(): idempotent, and harmless once the callback has run. */
static int lr__lua_http_cancel(lua_State *L) {
  lr__lua_http_stop(L, lua_touserdata(L, lua_upvalueindex(1)));
  return 0;
}

static int lr__lua_http_req_gc(lua_State *L) {
  lr_lua_http_req *st = lua_touserdata(L, 1);
  if (st->req) {
    /* Only at lua_close: a request in flight is pinned until then. */
    lr__http_cancel(st->req);
    lr__lua_http_unlink(st);
  }
  return 0;
}

static bool lr__lua_http_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool lr__lua_http_token(const char *s, size_t len) {
  if (len == 0) return false;
  for (size_t i = 0; i < len; i++)
    if (!lr__lua_http_tchar(s[i])) return false;
  return true;
}

/* A positive integer field, or 0 when absent. */
static lua_Integer lr__lua_http_opt_count(lua_State *L, int opts, const char *field) {
  lua_getfield(L, opts, field);
  lua_Integer v = 0;
  if (!lua_isnil(L, -1)) {
    int ok = 0;
    if (lua_type(L, -1) == LUA_TNUMBER) v = lua_tointegerx(L, -1, &ok);
    if (!ok || v <= 0)
      luaL_error(L, "http.request: opts.%s must be a positive integer, got %s", field,
                 lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1) : luaL_typename(L, -1));
  }
  lua_pop(L, 1);
  return v;
}

static const char *lr__lua_http_opt_string(lua_State *L, int opts, const char *field, size_t *len) {
  int t = lua_getfield(L, opts, field);
  if (t != LUA_TNIL && t != LUA_TSTRING)
    luaL_error(L, "http.request: opts.%s must be a string, got %s", field, luaL_typename(L, -1));
  /* The value stays on the stack, so the string stays valid. */
  return t == LUA_TSTRING ? lua_tolstring(L, -1, len) : NULL;
}

/* request(opts, callback) -> cancel */
static int lr__lua_http_request(lua_State *L) {
  lr_lua_http *h = luaL_checkudata(L, lua_upvalueindex(1), LR_LUA_HTTP_CLIENT);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  lua_settop(L, 2);
  static const char *const known[] = {"method", "url", "headers", "body", "timeoutMs", "maxBytes", NULL};
  lua_pushnil(L);
  while (lua_next(L, 1)) {
    lua_pop(L, 1);
    const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    int i = 0;
    while (k && known[i] && strcmp(k, known[i]) != 0) i++;
    if (!k || !known[i]) {
      if (k) return luaL_error(L, "http.request: unknown field opts.%s (known: method, url, headers, body, "
                                  "timeoutMs, maxBytes)", k);
      return luaL_error(L, "http.request: opts has a %s key; fields are strings", luaL_typename(L, -1));
    }
  }

  lr_http_options o = {0};
  size_t len;
  o.url = lr__lua_http_opt_string(L, 1, "url", &len); /* index 3 */
  if (!o.url) return luaL_error(L, "http.request: opts.url must be a string, got nil");
  char err[LR_ERR_MAX];
  lr_http_url parts;
  if (strlen(o.url) != len || lr__http_url_parse(o.url, &parts, err) != 0)
    return luaL_error(L, "http.request: opts.url: %s", strlen(o.url) != len ? "contains a NUL byte" : err);
  o.method = lr__lua_http_opt_string(L, 1, "method", &len); /* 4 */
  if (o.method && (!lr__lua_http_token(o.method, len) || len > 64))
    return luaL_error(L, "http.request: opts.method \"%s\" is not an HTTP method", o.method);
  o.body = lr__lua_http_opt_string(L, 1, "body", &o.body_len); /* 5 */
  o.timeout_ms = (uint64_t)lr__lua_http_opt_count(L, 1, "timeoutMs");
  o.max_response_bytes = (size_t)lr__lua_http_opt_count(L, 1, "maxBytes");

  /* Header lines live on the stack as Lua strings (index 7), their
   * pointers in a userdata (8): nothing to free if a check below raises. */
  int t = lua_getfield(L, 1, "headers"); /* 6 */
  if (t != LUA_TNIL && t != LUA_TTABLE)
    return luaL_error(L, "http.request: opts.headers must be a table of name = value, got %s", luaL_typename(L, 6));
  lua_newtable(L); /* 7 */
  size_t n = 0;
  if (t == LUA_TTABLE) {
    lua_pushnil(L);
    while (lua_next(L, 6)) {
      if (lua_type(L, -2) != LUA_TSTRING)
        return luaL_error(L, "http.request: opts.headers has a %s key; header names are strings",
                          luaL_typename(L, -2));
      size_t nlen, vlen;
      const char *name = lua_tolstring(L, -2, &nlen);
      if (!lr__lua_http_token(name, nlen))
        return luaL_error(L, "http.request: opts.headers: \"%s\" is not a header name", name);
      if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
        return luaL_error(L, "http.request: opts.headers[\"%s\"] must be a string, got %s", name,
                          luaL_typename(L, -1));
      const char *value = lua_tolstring(L, -1, &vlen); /* a number becomes a string on the stack only */
      if (strlen(value) != vlen || strpbrk(value, "\r\n"))
        return luaL_error(L, "http.request: opts.headers[\"%s\"] contains a line break or a NUL byte", name);
      /* curl sends "Name;" as a header with an empty value. */
      if (vlen)
        lua_pushfstring(L, "%s: %s", name, value);
      else
        lua_pushfstring(L, "%s;", name);
      lua_rawseti(L, 7, (lua_Integer)++n);
      lua_pop(L, 1);
    }
  }
  const char **lines = lua_newuserdatauv(L, (n ? n : 1) * sizeof *lines, 0); /* 8 */
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, 7, (lua_Integer)i + 1);
    lines[i] = lua_tostring(L, -1); /* kept alive by table 7 */
    lua_pop(L, 1);
  }
  o.headers = lines;
  o.nheaders = n;

  if (!h->client) return luaL_error(L, "http.request: the HTTP client is closed");
  lr_lua_http_req *st = lua_newuserdatauv(L, sizeof *st, 1); /* 9 */
  memset(st, 0, sizeof *st);
  st->owner = h;
  st->ref = LUA_NOREF;
  luaL_setmetatable(L, LR_LUA_HTTP_REQUEST);
  lua_pushvalue(L, 2);
  lua_setiuservalue(L, 9, 1);
  lua_pushvalue(L, 9);
  st->ref = luaL_ref(L, LUA_REGISTRYINDEX);
  /* Nothing below raises before the request is linked. */
  lr_http_request *req = lr__http_start(h->client, &o, lr__lua_http_done, st, err);
  if (!req) {
    luaL_unref(L, LUA_REGISTRYINDEX, st->ref);
    st->ref = LUA_NOREF;
    return luaL_error(L, "http.request: %s", err);
  }
  st->req = req;
  st->next = h->pending;
  if (h->pending) h->pending->prev = st;
  h->pending = st;
  lua_pushcclosure(L, lr__lua_http_cancel, 1); /* upvalue: the request */
  return 1;
}

/* parse_url(url) -> { scheme =, host =, port = } | nil, message */
static int lr__lua_http_parse_url(lua_State *L) {
  size_t len;
  const char *url = luaL_checklstring(L, 1, &len);
  char err[LR_ERR_MAX];
  lr_http_url parts;
  if (strlen(url) != len) {
    lua_pushnil(L);
    lua_pushstring(L, "invalid URL: contains a NUL byte");
    return 2;
  }
  if (lr__http_url_parse(url, &parts, err) != 0) {
    lua_pushnil(L);
    lua_pushstring(L, err);
    return 2;
  }
  lua_createtable(L, 0, 3);
  lua_pushstring(L, parts.scheme);
  lua_setfield(L, -2, "scheme");
  lua_pushstring(L, parts.host);
  lua_setfield(L, -2, "host");
  lua_pushinteger(L, parts.port);
  lua_setfield(L, -2, "port");
  return 1;
}

/* ---- the client --------------------------------------------------------------- */

static int lr__lua_http_client_gc(lua_State *L) {
  lr_lua_http *h = lua_touserdata(L, 1);
  /* The close below frees every request; forget them first. */
  while (h->pending) {
    lr_lua_http_req *st = h->pending;
    lr__lua_http_unlink(st);
    st->ref = LUA_NOREF;
  }
  if (h->client) lr__http_client_close(h->client, NULL, NULL);
  h->client = NULL;
  return 0;
}

/* Pushes the state's client userdata, making it on first use. */
static void lr__lua_http_client(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_HTTP_INSTANCE) == LUA_TUSERDATA) return;
  lua_pop(L, 1);
  uv_loop_t *loop = luv_loop(L);
  if (!loop) luaL_error(L, "http: luv has no loop (open luv after luv_set_loop)");
  if (luaL_newmetatable(L, LR_LUA_HTTP_REQUEST)) {
    lua_pushcfunction(L, lr__lua_http_req_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_pop(L, 1);
  lr_lua_http *h = lua_newuserdatauv(L, sizeof *h, 0);
  memset(h, 0, sizeof *h);
  if (luaL_newmetatable(L, LR_LUA_HTTP_CLIENT)) {
    lua_pushcfunction(L, lr__lua_http_client_gc);
    lua_setfield(L, -2, "__gc");
  }
  lua_setmetatable(L, -2);
  lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
  h->L = lua_tothread(L, -1);
  lua_pop(L, 1);
  char err[LR_ERR_MAX];
  /* Made last, once nothing else can raise, so a client never leaks. */
  if (!(h->client = lr__http_client_new(loop, err))) luaL_error(L, "http: %s", err);
  lua_pushvalue(L, -1);
  lua_setfield(L, LUA_REGISTRYINDEX, LR_LUA_HTTP_INSTANCE);
}

/* Pushes the http module table: { request = ..., parse_url = ... }. */
int lr__lua_open_http(lua_State *L) {
  lr__lua_http_client(L);
  lua_createtable(L, 0, 2);
  lua_pushvalue(L, -2);
  lua_pushcclosure(L, lr__lua_http_request, 1);
  lua_setfield(L, -2, "request");
  lua_pushcfunction(L, lr__lua_http_parse_url);
  lua_setfield(L, -2, "parse_url");
  lua_remove(L, -2);
  return 1;
}
