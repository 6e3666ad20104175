/* Values between Lua and the engine's JSON tree, losslessly (SPEC §6, the
 * Lua paragraph). Iterative both ways. */
#ifndef LR_LUA_VALUES_H
#define LR_LUA_VALUES_H

#include <lua.h>
#include "json.h"

/* Registry keys of the null sentinel and the array marker metatable. */
#define LR_LUA_NULL "lunarun.null"
#define LR_LUA_ARRAY "lunarun.array"
/* The __name of an object's key-order metatable (see lr__lua_push_json). */
#define LR_LUA_OBJECT "lunarun.object"

/* Makes the sentinel and the marker (once per state). */
void lr__lua_values_init(lua_State *L);

/* Pushes v. Arrays get the array marker; null is the sentinel; integers
 * within ±2^53 are Lua integers. An object of two keys or more gets a
 * metatable that remembers its key order: { __name = "lunarun.object",
 * key1, key2, ... } (objects of one value with the same keys in the same
 * order, e.g. rows of a list, share one). Raises only on out of memory. */
void lr__lua_push_json(lua_State *L, const lr_json *v);

/* Converts the value at idx. Returns 0, or -1 with err saying what is not
 * lossless (a function, a mixed or sparse table, an integer beyond ±2^53,
 * NaN, inf, -0, a string that is not UTF-8, a cycle, ...). Leaves the stack
 * as it was. Raises only on out of memory. An object's keys come out in
 * the order its key-order metatable remembers (those still present),
 * then the others sorted by bytes; an object without one has all its
 * keys sorted. So an object that came from JSON and was returned
 * unchanged keeps its order exactly. */
int lr__lua_to_json(lua_State *L, int idx, lr_json *out, char err[LR_ERR_MAX]);

/* lunarun.json_encode / lunarun.json_decode: lossless JSON text for Lua
 * (the MCP server and client speak JSON-RPC with them). */
int lr__lua_json_encode(lua_State *L);
int lr__lua_json_decode(lua_State *L);

#endif
