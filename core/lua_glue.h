/* The Lua side of the host, seen from C: one Lua state per runtime that
 * holds the bindings files' handlers. These files are the only ones that
 * include Lua's headers; they use only the engine's public API (and json.h,
 * the value tree the engine hands over). */
#ifndef LR_LUA_GLUE_H
#define LR_LUA_GLUE_H

#include "lunarun.h"

typedef struct lr_lua lr_lua;

/* A Lua state on the runtime's loop (luv shares it), with `require
 * "lunarun"` giving null, array, ... */
lr_lua *lr_lua_new(uv_loop_t *loop);

/* Runs a bindings file (SPEC §10: one namespace or a list of them) and adds
 * its namespaces to rt. Misuse names the file, the namespace and the field. */
int lr_lua_load_bindings(lr_lua *lua, lr_runtime *rt, const char *path, char *err);

/* The TypeScript declarations (and usage note) for the namespaces of the
 * given bindings files, checked as a run would check them. *out is
 * malloc'd (the caller frees it). */
int lr_lua_describe(lr_lua *lua, const char *const *paths, size_t npaths, char **out, char *err);

/* Runs a config file (a Lua chunk returning {key = value}) into cfg. */
int lr_lua_load_config(lr_lua *lua, const char *path, lr_config *cfg, char *err);

/* Closes the state. Call after the runtime that used its namespaces is
 * disposed. */
void lr_lua_close(lr_lua *lua);

#endif
