/* Placeholder until the bubblewrap layer lands: isolation = none only. */
#include "isolation.h"

#include <stdio.h>
#include <stdlib.h>

static char *lr__join(const char *dir, const char *name) {
  lr_buf b = {0};
  lr__buf_append_str(&b, dir);
  lr__buf_append_char(&b, '/');
  lr__buf_append_str(&b, name);
  return lr__buf_steal(&b, NULL);
}

int lr__sandbox_command(const lr_sandbox_cmd_spec *spec, lr_sandbox_cmd *out, char err[LR_ERR_MAX]) {
  char as_arg[48];
  snprintf(as_arg, sizeof as_arg, "--as=%llu", (unsigned long long)spec->cfg->max_process_memory_mb * 1024 * 1024);
  size_t nextra = 0;
  while (spec->script_args && spec->script_args[nextra]) nextra++;
  char **argv = lr__xcalloc(9 + nextra, sizeof *argv);
  size_t n = 0;
  argv[n++] = lr__xstrdup(spec->prlimit_path);
  argv[n++] = lr__xstrdup(as_arg);
  argv[n++] = lr__xstrdup("--core=0");
  argv[n++] = lr__xstrdup("--");
  argv[n++] = lr__xstrdup(spec->node_path);
  argv[n++] = lr__xstrdup("--disable-warning=ExperimentalWarning");
  argv[n++] = lr__join(spec->runtime_dir, spec->script);
  for (size_t i = 0; i < nextra; i++) argv[n++] = lr__xstrdup(spec->script_args[i]);
  out->argv = argv;
  out->uid = out->gid = -1;
  return 0;
}

void lr__sandbox_cmd_free(lr_sandbox_cmd *cmd) {
  for (size_t i = 0; cmd->argv && cmd->argv[i]; i++) free(cmd->argv[i]);
  free(cmd->argv);
  cmd->argv = NULL;
}
