/* Fuzz target: values between Lua and the engine's JSON tree
 * (core/lua_values.c), both ways, with a real lua_State.
 *
 * Mode 0: the input is JSON. Pushed into Lua and converted back, a lossless
 * value comes out as itself, its objects' keys in the order the text gave
 * them (the converter remembers it); anything else must not crash.
 * Mode 1: the input is a little program that builds Lua values (tables,
 * marked arrays, the null sentinel, shared references, cycles, functions,
 * any number or string). Converting one ends in a clean refusal or a value
 * that is lossless on the wire and converts back and forth to itself. */
#include <lauxlib.h>
#include <lualib.h>

#include "lua_values.h"
#include "wire.h"
#include "fuzz_input.h"

/* A fresh state per input: one kept across inputs would keep memory
 * libFuzzer's leak check then takes for a leak on every input. */
static lua_State *L;

static void lr_fuzz_text(const lr_json *v, lr_buf *out) {
  out->len = 0;
  lr__json_write(v, out);
}

/* Converts the value at idx; on success checks that it is lossless and a
 * fixed point of Lua -> JSON -> Lua -> JSON. Returns the conversion's rc. */
static int lr_fuzz_roundtrip(int idx, lr_buf *t1) {
  char err[LR_ERR_MAX] = "";
  int top = lua_gettop(L);
  lr_json v;
  int rc = lr__lua_to_json(L, idx, &v, err);
  LR_FUZZ_ASSERT(lua_gettop(L) == top, "the stack moved from %d to %d", top, lua_gettop(L));
  if (rc) {
    LR_FUZZ_ASSERT(v.type == LR_JNULL && err[0], "a refusal without a message or with a value");
    return rc;
  }
  lr_fuzz_text(&v, t1);
  lr_buf w = {0}, t2 = {0};
  LR_FUZZ_ASSERT(lr__wire_write(&v, &w, err) == 0, "Lua gave a value that is not lossless: %s", err);
  lr__lua_push_json(L, &v);
  lr_json back;
  rc = lr__lua_to_json(L, -1, &back, err);
  LR_FUZZ_ASSERT(rc == 0, "a pushed value does not convert back: %s", err);
  lua_pop(L, 1);
  lr_fuzz_text(&back, &t2);
  LR_FUZZ_ASSERT(t1->len == t2.len && memcmp(t1->data, t2.data, t2.len) == 0, "not a fixed point:\n  %s\n  %s",
                 t1->data, t2.data);
  lr__json_free(&back);
  lr__json_free(&v);
  lr__buf_free(&w);
  lr__buf_free(&t2);
  return 0;
}

static int lr_fuzz_cfunc(lua_State *L) { return 0; }

/* Mode 1: builds values on the stack from the input, then converts them. */
static void lr_fuzz_build(lr_fuzz_in *in) {
  int base = lua_gettop(L);
  /* The C API only grows the stack when asked: room for 48 values and the
   * two a step may add, or the pushes overrun it. */
  luaL_checkstack(L, 52, "fuzz");
  while (in->n) {
    uint8_t op = lr_fuzz_u8(in);
    int n = lua_gettop(L) - base;
    if (n >= 48) break;
    switch (op % 16) {
      case 0: lua_pushnil(L); break;
      case 1: lua_pushboolean(L, op & 16); break;
      case 2: lua_pushinteger(L, (lua_Integer)lr_fuzz_u64(in)); break;
      case 3: lua_pushinteger(L, (int8_t)lr_fuzz_u8(in)); break;
      case 4: {
        uint64_t bits = lr_fuzz_u64(in);
        double d;
        memcpy(&d, &bits, sizeof d);
        lua_pushnumber(L, d);
        break;
      }
      case 5: {
        size_t len;
        const uint8_t *s = lr_fuzz_bytes(in, 64, &len);
        lua_pushlstring(L, (const char *)s, len);
        break;
      }
      case 6: lua_newtable(L); break;
      case 7: /* a marked array */
        lua_newtable(L);
        luaL_getmetatable(L, LR_LUA_ARRAY);
        lua_setmetatable(L, -2);
        break;
      case 8: lua_getfield(L, LUA_REGISTRYINDEX, LR_LUA_NULL); break;
      case 9: /* t[k] = v with t, k, v the top three; keys Lua refuses are skipped */
        if (n >= 3 && lua_istable(L, -3) && !lua_isnil(L, -2) &&
            !(lua_type(L, -2) == LUA_TNUMBER && lua_tonumber(L, -2) != lua_tonumber(L, -2))) {
          lua_rawset(L, -3);
        }
        break;
      case 10: /* t[i] = v with a small index */
        if (n >= 2 && lua_istable(L, -2)) lua_rawseti(L, -2, (int8_t)lr_fuzz_u8(in));
        break;
      case 11: /* a shared reference (or a cycle, once stored inside itself) */
        if (n) lua_pushvalue(L, base + 1 + lr_fuzz_u8(in) % n);
        break;
      case 12: lua_pushcfunction(L, lr_fuzz_cfunc); break;
      case 13: lua_pushlightuserdata(L, (void *)L); break;
      case 14: /* some other metatable */
        if (n && lua_istable(L, -1)) {
          lua_newtable(L);
          lua_setmetatable(L, -2);
        }
        break;
      case 15:
        if (n) lua_pop(L, 1);
        break;
    }
  }
  lr_buf t = {0};
  int n = lua_gettop(L) - base;
  for (int i = 1; i <= n && i <= 8; i++) lr_fuzz_roundtrip(base + i, &t);
  lr__buf_free(&t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lr_fuzz_in in = {data, size};
  uint8_t mode = lr_fuzz_u8(&in);
  L = luaL_newstate();
  lr__lua_values_init(L);
  if (mode & 1) {
    lr_fuzz_build(&in);
  } else {
    char err[LR_ERR_MAX];
    lr_json v;
    if (lr__json_parse((const char *)in.p, in.n, &v, err) == 0) {
      lr__lua_push_json(L, &v);
      LR_FUZZ_ASSERT(lua_gettop(L) == 1, "push left %d values", lua_gettop(L));
      lr_buf want = {0}, got = {0}, w = {0};
      bool lossless = lr__wire_write(&v, &w, err) == 0;
      int rc = lr_fuzz_roundtrip(1, &got);
      if (lossless) {
        LR_FUZZ_ASSERT(rc == 0, "a lossless value did not come back from Lua");
        lr__json_write(&v, &want);
        LR_FUZZ_ASSERT(want.len == got.len && memcmp(want.data, got.data, got.len) == 0,
                       "Lua changed the value:\n  %s\n  %s", want.data, got.data);
      }
      lr__buf_free(&want);
      lr__buf_free(&got);
      lr__buf_free(&w);
      lr__json_free(&v);
    }
  }
  lua_close(L);
  return 0;
}
