/* Lua values <-> the engine's JSON tree. Both directions walk with explicit
 * stacks: a value 5000 levels deep must not overflow the C stack. */
#include "lua_values.h"

#include <lauxlib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int lr__null_tostring(lua_State *L) {
  lua_pushliteral(L, "lunarun.null");
  return 1;
}

void lr__lua_values_init(lua_State *L) {
  if (lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_NULL) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_newtable(L); /* the sentinel: an empty table nobody else has */
    lua_createtable(L, 0, 3);
    lua_pushliteral(L, "lunarun.null");
    lua_setfield(L, -2, "__name");
    lua_pushcfunction(L, lr__null_tostring);
    lua_setfield(L, -2, "__tostring");
    lua_pushliteral(L, "lunarun.null");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, LR_LUA_NULL);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "lunarun.array");
    lua_setfield(L, -2, "__name");
    lua_setfield(L, LUA_REGISTRYINDEX, LR_LUA_ARRAY);
  } else {
    lua_pop(L, 1);
  }
}

static void lr__push_scalar(lua_State *L, const lr_json *v, int null_idx) {
  switch (v->type) {
    case LR_JNULL: lua_pushvalue(L, null_idx); break;
    case LR_JFALSE: lua_pushboolean(L, 0); break;
    case LR_JTRUE: lua_pushboolean(L, 1); break;
    case LR_JNUMBER: {
      double d = v->u.num;
      if (d == floor(d) && fabs(d) <= 9007199254740992.0)
        lua_pushinteger(L, (lua_Integer)d);
      else
        lua_pushnumber(L, d);
      break;
    }
    case LR_JSTRING: lua_pushlstring(L, v->u.str, v->len); break;
    default: lua_pushnil(L); break;
  }
}

/* An object's key order, as its metatable: { __name = "lunarun.object",
 * key1, key2, ... }. Lua tables forget the order of their keys; this
 * brings it back when the object is converted again (lr__lua_to_json). */
static void lr__push_key_order(lua_State *L, const lr_json *object) {
  lua_createtable(L, (int)object->len, 1);
  for (size_t i = 0; i < object->len; i++) {
    const lr_json *key = &object->u.items[2 * i];
    lua_pushlstring(L, key->u.str, key->len);
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  lua_pushliteral(L, LR_LUA_OBJECT);
  lua_setfield(L, -2, "__name");
}

/* True when objects a and b have the same keys in the same order. */
static bool lr__same_keys(const lr_json *a, const lr_json *b) {
  if (a->len != b->len) return false;
  for (size_t i = 0; i < a->len; i++) {
    const lr_json *x = &a->u.items[2 * i], *y = &b->u.items[2 * i];
    if (x->len != y->len || memcmp(x->u.str, y->u.str, x->len) != 0) return false;
  }
  return true;
}

typedef struct lr_push_frame {
  const lr_json *node;
  size_t i;
} lr_push_frame;

/* The value on top goes into the container below it (under the key below
 * it for an object). */
static void lr__assign(lua_State *L, lr_push_frame *parent) {
  if (parent->node->type == LR_JOBJECT)
    lua_rawset(L, -3);
  else
    lua_rawseti(L, -2, (lua_Integer)parent->i + 1);
  parent->i++;
}

void lr__lua_push_json(lua_State *L, const lr_json *root) {
  luaL_checkstack(L, 5, "lunarun: value too deep");
  lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_NULL);
  lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_ARRAY);
  lua_pushnil(L); /* the key order of the last object, shared by the next of the same keys */
  int null_idx = lua_gettop(L) - 2, array_idx = null_idx + 1, order_idx = null_idx + 2;
  const lr_json *order_of = NULL; /* the object order_idx was made for */
  lr_push_frame *stack = NULL;
  size_t depth = 0, cap = 0;
  const lr_json *v = root;
  for (;;) {
    luaL_checkstack(L, 3, "lunarun: value too deep");
    if (v->type == LR_JARRAY || v->type == LR_JOBJECT) {
      bool arr = v->type == LR_JARRAY;
      lua_createtable(L, arr ? (int)v->len : 0, arr ? 0 : (int)v->len);
      if (arr) {
        lua_pushvalue(L, array_idx);
        lua_setmetatable(L, -2);
      } else if (v->len > 1) {
        /* Records of one shape (a list of rows) share one key order. */
        if (!order_of || !lr__same_keys(order_of, v)) {
          lr__push_key_order(L, v);
          lua_replace(L, order_idx);
          order_of = v;
        }
        lua_pushvalue(L, order_idx);
        lua_setmetatable(L, -2);
      }
      if (depth == cap) {
        cap = cap ? cap * 2 : 32;
        lr_push_frame *s = realloc(stack, cap * sizeof *stack);
        if (!s) {
          free(stack);
          luaL_error(L, "not enough memory");
        }
        stack = s;
      }
      stack[depth++] = (lr_push_frame){v, 0};
    } else {
      lr__push_scalar(L, v, null_idx);
      if (depth == 0) break;
      lr__assign(L, &stack[depth - 1]);
    }
    /* Finish the containers that are full, then descend into the next child. */
    while (depth > 0 && stack[depth - 1].i == stack[depth - 1].node->len) {
      depth--;
      if (depth > 0) lr__assign(L, &stack[depth - 1]);
    }
    if (depth == 0) break;
    lr_push_frame *f = &stack[depth - 1];
    if (f->node->type == LR_JOBJECT) {
      const lr_json *key = &f->node->u.items[2 * f->i];
      lua_pushlstring(L, key->u.str, key->len);
      v = &f->node->u.items[2 * f->i + 1];
    } else {
      v = &f->node->u.items[f->i];
    }
  }
  free(stack);
  /* Leave only the value: drop null, array and the key order below it. */
  lua_replace(L, null_idx);
  lua_settop(L, null_idx);
}

/* ---- Lua -> JSON --------------------------------------------------------- */

typedef struct lr_to_frame {
  lr_json *node;
  int tidx;      /* the table's stack index */
  size_t i;
} lr_to_frame;

static int lr__key_cmp(const void *a, const void *b) {
  const lr_json *x = a, *y = b;
  size_t n = x->len < y->len ? x->len : y->len;
  int c = memcmp(x->u.str, y->u.str, n);
  return c ? c : (x->len < y->len ? -1 : x->len > y->len);
}

/* Index of the key s[0..len) among the n sorted keys of items (pairs), or
 * n when it is not there. */
static size_t lr__find_key(const lr_json *items, size_t n, const char *s, size_t len) {
  lr_json probe = {.type = LR_JSTRING, .len = len};
  probe.u.str = (char *)s;
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = lr__key_cmp(&items[2 * mid], &probe);
    if (c == 0) return mid;
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  return n;
}

/* When the table at idx has a key-order metatable (an object that came
 * from JSON): puts its n sorted keys in that order, those the order does
 * not name (added since) after them, still sorted. Names that are gone, not
 * strings or repeated are skipped, so the keys stay exactly the table's. */
static void lr__apply_key_order(lua_State *L, int idx, lr_json *node) {
  size_t n = node->len;
  luaL_checkstack(L, 3, "lunarun: value too deep");
  if (n < 2 || !lua_getmetatable(L, idx)) return;
  int mt = lua_gettop(L);
  lua_pushliteral(L, "__name");
  lua_rawget(L, mt);
  size_t name_len;
  const char *name = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &name_len) : NULL;
  bool ordered = name && name_len == strlen(LR_LUA_OBJECT) && memcmp(name, LR_LUA_OBJECT, name_len) == 0;
  lua_pop(L, 1);
  if (!ordered) {
    lua_pop(L, 1);
    return;
  }
  /* Objects are small as a rule: their scratch space is on the stack. */
  enum { SMALL = 16 };
  size_t order_small[SMALL];
  bool placed_small[SMALL] = {false};
  lr_json keys_small[2 * SMALL];
  bool small = n <= SMALL;
  size_t *order = small ? order_small : lr__xmalloc(n * sizeof *order);
  bool *placed = small ? placed_small : lr__xcalloc(n, sizeof *placed);
  size_t placed_n = 0;
  lua_Integer remembered = (lua_Integer)lua_rawlen(L, mt);
  for (lua_Integer i = 1; i <= remembered && placed_n < n; i++) {
    if (lua_rawgeti(L, mt, i) == LUA_TSTRING) {
      size_t len;
      const char *s = lua_tolstring(L, -1, &len);
      size_t k = lr__find_key(node->u.items, n, s, len);
      if (k < n && !placed[k]) {
        placed[k] = true;
        order[placed_n++] = k;
      }
    }
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* the metatable */
  for (size_t k = 0; k < n; k++)
    if (!placed[k]) order[placed_n++] = k;
  lr_json *sorted = small ? keys_small : lr__xmalloc(2 * n * sizeof *sorted);
  memcpy(sorted, node->u.items, 2 * n * sizeof *sorted);
  for (size_t j = 0; j < n; j++) {
    node->u.items[2 * j] = sorted[2 * order[j]];
    node->u.items[2 * j + 1] = sorted[2 * order[j] + 1];
  }
  if (!small) {
    free(sorted);
    free(placed);
    free(order);
  }
}

/* Looks at the table at idx: an array (keys 1..n, or empty and marked) or
 * an object (string keys only: sorted so output is stable, or in the order
 * the object came with, see lr__apply_key_order). Fills *node (keys
 * included for objects). */
static int lr__classify(lua_State *L, int idx, int array_idx, lr_json *node, char *err) {
  size_t nint = 0, nstr = 0;
  lua_Integer maxint = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING) {
      nstr++;
    } else if (lua_isinteger(L, -1) && lua_tointeger(L, -1) >= 1) {
      nint++;
      if (lua_tointeger(L, -1) > maxint) maxint = lua_tointeger(L, -1);
    } else {
      lr__errf(err, "a table key of type %s", luaL_typename(L, -1));
      lua_pop(L, 1);
      return -1;
    }
  }
  bool marked = false;
  if (lua_getmetatable(L, idx)) {
    marked = lua_rawequal(L, -1, array_idx);
    lua_pop(L, 1);
  }
  if (nint && nstr) return lr__errf(err, "a table that mixes array and object keys");
  if (nint && (lua_Integer)nint != maxint) return lr__errf(err, "a sparse array");
  if (marked && nstr) return lr__errf(err, "an array with string keys");
  if (nint || marked) {
    *node = lr__json_array(nint);
    return 0;
  }
  *node = lr__json_object(nstr);
  size_t k = 0;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    size_t len;
    const char *s = lua_tolstring(L, -1, &len); /* a string key: no conversion happens */
    if (!lr__utf8_valid(s, len, true)) {
      lua_pop(L, 1);
      return lr__errf(err, "an object key that is not UTF-8");
    }
    node->u.items[2 * k++] = lr__json_string(s, len);
  }
  /* Keys sorted by bytes: the order of a Lua table is arbitrary. The pairs
   * are (key, null) now, so sorting pairs by key is sorting keys. */
  if (nstr > 1) qsort(node->u.items, nstr, 2 * sizeof(lr_json), lr__key_cmp);
  lr__apply_key_order(L, idx, node);
  return 0;
}

static int lr__scalar(lua_State *L, int idx, int null_idx, lr_json *out, char *err) {
  switch (lua_type(L, idx)) {
    case LUA_TNIL: *out = lr__json_null(); return 0;
    case LUA_TBOOLEAN: *out = lr__json_bool(lua_toboolean(L, idx)); return 0;
    case LUA_TNUMBER:
      if (lua_isinteger(L, idx)) {
        lua_Integer i = lua_tointeger(L, idx);
        if (i > 9007199254740992LL || i < -9007199254740992LL)
          return lr__errf(err, "an integer beyond +-2^53");
        *out = lr__json_number_value((double)i);
      } else {
        double d = lua_tonumber(L, idx);
        if (isnan(d) || isinf(d)) return lr__errf(err, "NaN or infinity");
        if (d == 0 && signbit(d)) return lr__errf(err, "-0");
        *out = lr__json_number_value(d);
      }
      return 0;
    case LUA_TSTRING: {
      size_t len;
      const char *s = lua_tolstring(L, idx, &len);
      if (!lr__utf8_valid(s, len, true)) return lr__errf(err, "a string that is not UTF-8");
      *out = lr__json_string(s, len);
      return 0;
    }
    case LUA_TTABLE:
      if (lua_rawequal(L, idx, null_idx)) {
        *out = lr__json_null();
        return 0;
      }
      return 1; /* a container */
    default:
      return lr__errf(err, "a %s", luaL_typename(L, idx));
  }
}

int lr__lua_to_json(lua_State *L, int idx, lr_json *out, char err[LR_ERR_MAX]) {
  idx = lua_absindex(L, idx);
  int base = lua_gettop(L);
  luaL_checkstack(L, 8, "lunarun: value too deep");
  lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_NULL);
  lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_ARRAY);
  lua_newtable(L); /* tables on the current path, for cycles */
  int null_idx = base + 1, array_idx = base + 2, path_idx = base + 3;
  *out = lr__json_null();
  lr_to_frame *stack = NULL;
  size_t depth = 0, cap = 0;
  int rc = 0;
  lua_pushvalue(L, idx);
  lr_json *dst = out;
  for (;;) {
    /* The value to convert is on top; dst is where it goes. */
    int r = lr__scalar(L, -1, null_idx, dst, err);
    if (r < 0) {
      rc = -1;
      break;
    }
    if (r == 0) {
      lua_pop(L, 1);
    } else {
      lua_pushvalue(L, -1);
      if (lua_rawget(L, path_idx) != LUA_TNIL) {
        rc = lr__errf(err, "a cycle");
        break;
      }
      lua_pop(L, 1);
      lua_pushvalue(L, -1);
      lua_pushboolean(L, 1);
      lua_rawset(L, path_idx);
      if (lr__classify(L, lua_gettop(L), array_idx, dst, err) != 0) {
        rc = -1;
        break;
      }
      luaL_checkstack(L, 4, "lunarun: value too deep");
      if (depth == cap) {
        cap = cap ? cap * 2 : 32;
        lr_to_frame *s = realloc(stack, cap * sizeof *stack);
        if (!s) {
          free(stack);
          lr__json_free(out);
          lua_settop(L, base);
          luaL_error(L, "not enough memory");
        }
        stack = s;
      }
      stack[depth++] = (lr_to_frame){dst, lua_gettop(L), 0};
    }
    /* Next child of the innermost container, finishing those that are done. */
    while (depth > 0) {
      lr_to_frame *f = &stack[depth - 1];
      if (f->i < f->node->len) break;
      lua_pushvalue(L, f->tidx);
      lua_pushnil(L);
      lua_rawset(L, path_idx); /* off the path: shared references are fine */
      lua_settop(L, f->tidx - 1);
      depth--;
    }
    if (depth == 0) break;
    lr_to_frame *f = &stack[depth - 1];
    if (f->node->type == LR_JARRAY) {
      lua_rawgeti(L, f->tidx, (lua_Integer)f->i + 1);
      dst = &f->node->u.items[f->i];
    } else {
      lr_json *key = &f->node->u.items[2 * f->i];
      lua_pushlstring(L, key->u.str, key->len);
      lua_rawget(L, f->tidx);
      dst = &f->node->u.items[2 * f->i + 1];
    }
    f->i++;
  }
  free(stack);
  if (rc != 0) lr__json_free(out);
  lua_settop(L, base);
  return rc;
}

/* lunarun.json_encode(v) -> text | nil, message: compact JSON, keys sorted
 * (or in the order an object decoded from JSON came with). */
int lr__lua_json_encode(lua_State *L) {
  luaL_checkany(L, 1);
  lr_json tree;
  char err[LR_ERR_MAX];
  if (lr__lua_to_json(L, 1, &tree, err) != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
  }
  lr_buf out = {0};
  lr__json_write(&tree, &out);
  lr__json_free(&tree);
  lua_pushlstring(L, out.data ? out.data : "", out.len);
  lr__buf_free(&out);
  return 1;
}

/* lunarun.json_decode(text) -> value | nil, message (arrays marked, null as
 * lunarun.null). */
int lr__lua_json_decode(lua_State *L) {
  size_t len;
  const char *text = luaL_checklstring(L, 1, &len);
  lr_json tree;
  char err[LR_ERR_MAX];
  if (lr__json_parse(text, len, &tree, err) != 0) {
    luaL_pushfail(L);
    lua_pushstring(L, err);
    return 2;
  }
  lr__lua_push_json(L, &tree);
  lr__json_free(&tree);
  return 1;
}
