/* A small C host that embeds lunarun: a runtime on the default libuv loop,
 * one binding written in C (host.greeting), the bindings of a Lua file, and
 * one run of the program given on the command line. Prints the result as
 * JSON; exits 0 when the run succeeded, 1 when it failed, 2 on misuse.
 *
 *   cc embed.c $(pkg-config --cflags --libs lunarun) -o embed
 *   ./embed examples/tools.lua 'return await tools.inc({ v: 41 })'
 */
#include <lunarun.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int status = 2;

/* Every call of a host.* member lands here. This one completes at once; a
 * handler may also keep `call` and complete it later from the loop. */
static void host_call(void *ud, lr_call *call) {
  (void)ud;
  const char *text = "\"hello from C\"";
  lr_call_resolve_json(call, text, strlen(text));
}

static void on_done(void *rt, const lr_result *r) {
  char *json = lr_result_json(r, NULL); /* ours to free; r is valid only here */
  puts(json);
  free(json);
  status = r->kind == LR_OK ? 0 : 1;
  lr_runtime_dispose(rt, NULL, NULL); /* uv_run returns once it is done */
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s BINDINGS.lua PROGRAM\n", argv[0]);
    return 2;
  }
  uv_loop_t *loop = uv_default_loop();
  char err[LR_ERR_MAX];
  lr_runtime *rt;
  if (lr_runtime_new(loop, NULL, &rt, err) != 0) { /* NULL: the default config */
    fprintf(stderr, "embed: %s\n", err);
    return 2;
  }
  static const char *const members[] = {"greeting"};
  lr_namespace_def host = {.global = "host", .members = members, .nmembers = 1, .call = host_call};
  lr_run_options opts = {.on_done = on_done, .ud = rt};
  if (lr_runtime_add_namespace(rt, &host, err) != 0 || lr_runtime_load_bindings(rt, argv[1], err) != 0 ||
      lr_run_start(rt, argv[2], strlen(argv[2]), &opts, NULL, err) != 0) {
    fprintf(stderr, "embed: %s\n", err);
    lr_runtime_dispose(rt, NULL, NULL);
  }
  uv_run(loop, UV_RUN_DEFAULT);
  uv_loop_close(loop);
  return status;
}
