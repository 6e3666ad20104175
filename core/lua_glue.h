/* The Lua side of the host, seen from C (only core/lua_*.c include this):
 * the lr_lua that hosts bindings in a Lua state — one the glue owns (CLI, C
 * API) or the caller's own (the `lunarun` Lua module). These files are the
 * only ones that include Lua's headers; they use the engine's public API
 * (and json.h, the value tree the engine hands over). */
#ifndef LR_LUA_GLUE_H
#define LR_LUA_GLUE_H

#include <lua.h>
#include <stdbool.h>

#include "lunarun.h"

typedef struct lr_lua lr_lua;

/* A Lua state of our own on loop, with luv sharing the loop and `require
 * "lunarun"` available. NULL when it cannot be made. */
lr_lua *lr_lua_new(uv_loop_t *loop);

/* Closes a state made by lr_lua_new. Handles luv owned start closing: the
 * loop must run again for their close callbacks. */
void lr_lua_close(lr_lua *lua);

/* The lr_lua of a state, made on first use for a caller's state (its loop is
 * luv's). Raises a Lua error when luv has no loop. */
lr_lua *lr__lua_get(lua_State *L);

/* Keeps lua alive while C holds it; lr__lua_release drops that. The memory
 * goes when the state is closed and nothing holds it. */
void lr__lua_retain(lr_lua *lua);
void lr__lua_release(lr_lua *lua);

/* A runtime of the state is being disposed / is gone. When a caller's state
 * (the Lua module) closes with disposals still under way, the loop is run
 * until they end: a runtime's processes and handles must not outlive it. */
void lr__lua_disposal_begin(lr_lua *lua);
void lr__lua_disposal_end(lr_lua *lua);

/* True once the state is closing: no Lua may be touched any more. */
bool lr__lua_closed(const lr_lua *lua);

lua_State *lr__lua_state(const lr_lua *lua);
uv_loop_t *lr__lua_loop(const lr_lua *lua);

/* lua_pcall with a traceback handler. */
int lr__lua_pcall(lua_State *L, int nargs, int nresults);

/* Adds the namespaces of the value at idx (what a bindings file returns:
 * one namespace table or a list) to rt; `where` names it in messages. */
int lr__lua_add_namespaces(lr_lua *lua, lr_runtime *rt, int idx, const char *where, char *err);

/* Runs a bindings file and adds its namespaces to rt. */
int lr__lua_load_bindings(lr_lua *lua, lr_runtime *rt, const char *path, char *err);

/* Sets config keys from the table at idx ({key = number|string}). */
int lr__lua_config_from_table(lua_State *L, int idx, lr_config *cfg, const char *where, char *err);

/* The `lunarun` module: helpers for handlers, and runtimes for programs
 * that embed lunarun from Lua (lua_module.c). */
int luaopen_lunarun(lua_State *L);

/* Pushes a `lunarun` runtime handle for rt, made in C on the state's loop
 * (lunarun mcp); the handle owns rt from now on and disposes it. Needs
 * luaopen_lunarun to have run in the state. */
void lr__lua_push_runtime(lua_State *L, lr_runtime *rt);

/* lunarun._release_handle (lua_mcp.c). */
int lr__lua_release_handle(lua_State *L);

/* Fills the module table at the top of the stack with what handlers use
 * (null, array, is_array, wait, http_client, sleep, exec, ...). */
void lr__lua_open_helpers(lua_State *L);

#endif
