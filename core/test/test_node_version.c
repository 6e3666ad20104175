/* The Node version check (core/node_version.c): the versions it accepts,
 * and lr_runtime_new refusing an old Node, a program that is not Node, and
 * a binary that changed since it passed. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "lunarun.h"
#include "node_version.h"

/* A shell script that answers --version with `version`. */
static void write_fake_node(const char *path, const char *version) {
  FILE *f = fopen(path, "w");
  fprintf(f, "#!/bin/sh\necho %s\n", version);
  fclose(f);
  chmod(path, 0755);
}

int main(void) {
  CHECK(lr__node_version_ok("v22.13.0"));
  CHECK(lr__node_version_ok("v22.22.1"));
  CHECK(lr__node_version_ok("v23.2.0"));
  CHECK(lr__node_version_ok("v24.0.0"));
  CHECK(lr__node_version_ok("v100.1.2"));
  CHECK(!lr__node_version_ok("v22.12.9"));
  CHECK(!lr__node_version_ok("v23.1.0")); /* before stripTypeScriptTypes on the 23 line */
  CHECK(!lr__node_version_ok("v20.20.2"));
  CHECK(!lr__node_version_ok("v8.17.0"));
  CHECK(!lr__node_version_ok("24.0.0"));
  CHECK(!lr__node_version_ok("v"));
  CHECK(!lr__node_version_ok("vx.y"));
  CHECK(!lr__node_version_ok(""));

  char dir[] = "/tmp/lunarun-node-version-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  char node[sizeof dir + 16];
  snprintf(node, sizeof node, "%s/node", dir);
  char err[LR_ERR_MAX];

  write_fake_node(node, "v20.11.1");
  CHECK(lr__node_check_version(node, err) == -1);
  char want[LR_ERR_MAX];
  snprintf(want, sizeof want,
           "Node %s is v20.11.1; lunarun needs Node >= 22.13 (set nodePath or $LUNARUN_NODE to a newer one)", node);
  CHECK_STR(err, want);

  /* lr_runtime_new refuses it the same way, and leaves nothing. */
  uv_loop_t loop;
  uv_loop_init(&loop);
  lr_config cfg;
  lr_config_init(&cfg);
  CHECK(lr_config_set(&cfg, "nodePath", node, err) == 0);
  lr_runtime *rt = (lr_runtime *)1;
  err[0] = '\0';
  CHECK(lr_runtime_new(&loop, &cfg, &rt, err) == -1);
  CHECK(rt == NULL);
  CHECK_STR(err, want);
  CHECK(uv_loop_close(&loop) == 0);

  /* A new enough one passes; the same binary, changed, is checked again. */
  write_fake_node(node, "v22.13.0");
  CHECK(lr__node_check_version(node, err) == 0);
  write_fake_node(node, "v22.12.10"); /* one byte longer: a new size */
  CHECK(lr__node_check_version(node, err) == -1);
  CHECK(strstr(err, "is v22.12.10;") != NULL);

  /* Not Node at all. */
  CHECK(lr__node_check_version("/bin/true", err) == -1);
  CHECK(strstr(err, "/bin/true is not a usable Node") != NULL);
  write_fake_node(node, "v24.0.0; exit 3");
  CHECK(lr__node_check_version(node, err) == -1);
  CHECK(strstr(err, "exited with status 3") != NULL);

  lr_config_free(&cfg);
  unlink(node);
  rmdir(dir);
  return CHECK_DONE();
}
