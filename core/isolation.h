/* Isolation of the local sandbox (README, "Isolation"; docs/DECISIONS.md):
 * the command line that starts a sandbox process, with bubblewrap
 * (isolation = "bwrap") or as a plain Node process (isolation = "none"),
 * the check that bwrap works here, and the files a sandbox's /etc gets.
 * No libuv and no Lua here: the caller spawns what lr__sandbox_command
 * describes. */
#ifndef LR_ISOLATION_H
#define LR_ISOLATION_H

#include "lunarun.h"
#include "util.h"

/* The uid and gid the sandbox runs as when the host is root (dropped before
 * bwrap: RLIMIT_NPROC is never enforced for uid 0), and the identity its
 * programs see inside (user "sandbox", mapped by bwrap's --uid/--gid). */
#define LR_SANDBOX_HOST_UID 65534
#define LR_SANDBOX_HOST_GID 65534
#define LR_SANDBOX_UID 1000
#define LR_SANDBOX_GID 1000

/* Once, when a runtime is created with isolation = bwrap: finds bwrap and
 * runs it once, as the uid the sandboxes will use, with the namespaces and
 * mounts a sandbox gets, to see that they can be made here. On success
 * *bwrap_path is a malloc'd absolute path. On failure err is one line saying
 * why (bwrap missing; user namespaces refused, e.g. Ubuntu >= 23.10's
 * AppArmor restriction) and naming isolation = "none" as the explicit
 * opt-out. Never a silent fallback. Blocks for the few milliseconds bwrap
 * takes; a success is remembered for the life of the process. */
int lr__isolation_check(const lr_config *cfg, char **bwrap_path, char err[LR_ERR_MAX]);

/* Writes into dir/etc the files a sandbox's /etc gets (passwd with the
 * sandbox user and nobody, group, hosts with localhost, a files-only
 * nsswitch.conf), world-readable, and makes dir itself 0711 so that a
 * dropped uid can reach them (and the runner files) without listing it. */
int lr__isolation_prepare(const lr_config *cfg, const char *dir, char err[LR_ERR_MAX]);

/* Removes what lr__isolation_prepare wrote into dir (dir itself stays). */
void lr__isolation_cleanup(const char *dir);

/* When the host is root, the sandbox's uid must be able to read path
 * (every folder above it searchable by others, the file readable by
 * others): err says which folder or file is not. what names it ("Node"). */
int lr__isolation_readable(const char *path, const char *what, char err[LR_ERR_MAX]);

/* A process to start: argv[0] is the file to exec. */
typedef struct lr_sandbox_cmd {
  char **argv;  /* NULL-terminated, malloc'd (each string too) */
  int uid, gid; /* >= 0: the child sets them before exec (libuv's
                   UV_PROCESS_SETUID/SETGID, which also clear supplementary
                   groups); -1 = keep */
} lr_sandbox_cmd;

typedef struct lr_sandbox_cmd_spec {
  const lr_config *cfg;
  const char *node_path;    /* host path of Node */
  const char *runtime_dir;  /* host folder holding the runner files and the /etc files of lr__isolation_prepare */
  const char *bwrap_path;   /* from lr__isolation_check (NULL with isolation = none) */
  const char *prlimit_path; /* util-linux prlimit */
  const char *script;       /* a runner file name inside runtime_dir, e.g. "runner.mjs" */
  const char *const *script_args; /* NULL-terminated extra argv after the script, may be NULL */
  int info_fd;              /* >= 0: pass `--info-fd N` to bwrap; -1: none */
} lr_sandbox_cmd_spec;

/* The command that starts one sandbox process running script. With
 * isolation = bwrap the sandbox sees script at /opt/lunarun/<script> and
 * Node at /opt/node/bin/node. */
int lr__sandbox_command(const lr_sandbox_cmd_spec *spec, lr_sandbox_cmd *out, char err[LR_ERR_MAX]);
void lr__sandbox_cmd_free(lr_sandbox_cmd *cmd);

/* bool keys from Lua (allowChildProcesses); the text form is lr_config_set. */
int lr__config_set_bool(lr_config *c, const char *key, bool value, char *err);

#endif
