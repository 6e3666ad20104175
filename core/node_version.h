/* The Node a runtime uses must be new enough for lunarun (module.
 * stripTypeScriptTypes and the stable permission model: Node >= 22.13):
 * checked once, when the runtime is made, so an old Node is misuse at
 * startup rather than a failure of every run. */
#ifndef LR_NODE_VERSION_H
#define LR_NODE_VERSION_H

#include "util.h"

/* The oldest Node lunarun runs on, as the messages name it. */
#define LR_NODE_MIN_TEXT "22.13"

/* Runs `node --version` (which exits before Node starts V8: a few ms) and
 * refuses an older Node, or a program that does not answer like Node, with
 * one line naming the path, the version found and the version needed. A
 * binary that passed is remembered (per thread, by path, inode, size and
 * modification time) and not run again. */
int lr__node_check_version(const char *node_path, char err[LR_ERR_MAX]);

/* The same check on a version text ("v24.1.0"): true when it is new enough. */
bool lr__node_version_ok(const char *text);

#endif
