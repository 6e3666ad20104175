/* The command that starts a sandbox process: without isolation, Node under
 * prlimit; with isolation = bwrap, Node inside bubblewrap's namespaces. */
#ifndef LR_ISOLATION_H
#define LR_ISOLATION_H

#include "lunarun.h"
#include "util.h"

typedef struct lr_sandbox_cmd {
  char **argv;  /* NULL-terminated, malloc'd; argv[0] is the file to exec */
  int uid, gid; /* >= 0: the child sets them before exec; -1 = keep */
} lr_sandbox_cmd;

typedef struct lr_sandbox_cmd_spec {
  const lr_config *cfg;
  const char *node_path;
  const char *runtime_dir;
  const char *bwrap_path;
  const char *prlimit_path;
  const char *script;
  const char *const *script_args;
  int info_fd;
} lr_sandbox_cmd_spec;

int lr__sandbox_command(const lr_sandbox_cmd_spec *spec, lr_sandbox_cmd *out, char err[LR_ERR_MAX]);
void lr__sandbox_cmd_free(lr_sandbox_cmd *cmd);

#endif
