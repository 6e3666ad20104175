/* The lunarun command: a thin user of the public API (lunarun.h), nothing
 * else. Exit 0: the run succeeded (or the MCP server ended); 1: it failed;
 * 2: misuse. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lunarun.h"

#define LR_EXIT_OK 0
#define LR_EXIT_FAILED 1
#define LR_EXIT_MISUSE 2

#ifndef LUNARUN_VERSION
#define LUNARUN_VERSION "unknown"
#endif

static const char lr__usage[] =
    "usage: lunarun run [--bindings F.lua]... [--config F.lua] [--set key=value]... [--json] [--stream] PROGRAM.ts|-\n"
    "       lunarun describe [--bindings F.lua]...\n"
    "       lunarun mcp [--bindings F.lua]... [--config F.lua] [--set key=value]...\n"
    "       lunarun --help | --version\n";

static const char lr__help[] =
    "\n"
    "Runs a model-written TypeScript program in a sandboxed Node worker; the\n"
    "program calls host functions (bindings) written in Lua.\n"
    "\n"
    "commands:\n"
    "  run        run one program (- reads it from standard input); exit 0 when\n"
    "             it succeeded, 1 when it failed, 2 on misuse\n"
    "  describe   print the TypeScript declarations of the bindings, for a model\n"
    "  mcp        serve the Model Context Protocol on stdio (a `run` tool)\n"
    "\n"
    "options:\n"
    "  --bindings F.lua  a Lua file returning a namespace or a list of them\n"
    "  --config F.lua    a Lua file returning { key = value } settings\n"
    "  --set key=value   one setting, over --config\n"
    "  --json            print the result as one JSON object\n"
    "                    {value?, logs, error?, stats}\n"
    "  --stream          print each log entry as it happens (with --json: one\n"
    "                    {\"log\":...} line per entry, then the result object)\n"
    "  -h, --help        this text\n"
    "  --version         the version\n"
    "\n"
    "settings (default):\n"
    "  computeMs (60000)  maxWallMs (600000)  maxOutputBytes (67108864)\n"
    "  maxOldGenerationSizeMb (512)  maxFrameBytes (268435456)  killGraceMs (2000)\n"
    "  maxProcessMemoryMb (4096)  nodePath (Node >= 22.13; or $LUNARUN_NODE)\n"
    "  runtimeRoot ($TMPDIR or /tmp)  isolation (bwrap | none)  network (none | host)\n"
    "  tmpMb (64)  maxProcesses (256)  allowChildProcesses (true)  mounts (config file)\n"
    "  poolSize (0 for run, 1 for mcp)  poolIdleMs (300000)  backend (local | e2b)\n"
    "  e2bTemplate  e2bDomain  e2bApiUrl  e2bSandboxUrl  e2bUser  e2bTimeoutMs\n"
    "\n"
    "More in the README (settings, bindings, isolation, E2B, MCP).\n";

/* --help and --version: on stdout, exit 0. */
static void lr__print_help(void) {
  fputs(lr__usage, stdout);
  fputs(lr__help, stdout);
}

static void lr__print_version(void) { puts("lunarun " LUNARUN_VERSION); }

typedef struct lr_cli {
  const char *command;
  const char **bindings;
  size_t nbindings;
  const char *config_file;
  const char **sets;
  size_t nsets;
  int json;
  int stream;
  const char *program_path;
  /* run state */
  uv_loop_t loop;
  lr_runtime *rt;
  lr_run *run;
  size_t logs_printed; /* with --stream: entries already printed */
  uv_signal_t sigint, sigterm;
  int exit_code;
} lr_cli;

/* The runtime of `run` and `mcp`, with the bindings files loaded; on a
 * failure nothing of it is left. */
static int lr__cli_runtime(lr_cli *cli, const lr_config *cfg, char *err) {
  if (lr_runtime_new(&cli->loop, cfg, &cli->rt, err) != 0) return -1;
  for (size_t i = 0; i < cli->nbindings; i++) {
    if (lr_runtime_load_bindings(cli->rt, cli->bindings[i], err) != 0) {
      lr_runtime_dispose(cli->rt, NULL, NULL);
      uv_run(&cli->loop, UV_RUN_DEFAULT);
      cli->rt = NULL;
      return -1;
    }
  }
  return 0;
}

static int lr__misuse(const char *fmt, const char *arg) {
  fputs("lunarun: ", stderr);
  fprintf(stderr, fmt, arg);
  fputc('\n', stderr);
  return LR_EXIT_MISUSE;
}

/* Takes the value of an option given as "--opt value" or "--opt=value". */
static const char *lr__option_value(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=') return argv[*i] + n + 1;
  if (strcmp(argv[*i], name) == 0 && *i + 1 < argc) return argv[++*i];
  return NULL;
}

static bool lr__is_option(const char *arg, const char *name) {
  size_t n = strlen(name);
  return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

static int lr__parse_args(lr_cli *cli, int argc, char **argv) {
  if (argc < 2) return lr__misuse("%s", "a command is required: run, describe or mcp (see lunarun --help)");
  cli->command = argv[1];
  if (strcmp(cli->command, "--help") == 0 || strcmp(cli->command, "-h") == 0) {
    lr__print_help();
    exit(LR_EXIT_OK);
  }
  if (strcmp(cli->command, "--version") == 0) {
    lr__print_version();
    exit(LR_EXIT_OK);
  }
  if (strcmp(cli->command, "run") != 0 && strcmp(cli->command, "describe") != 0 && strcmp(cli->command, "mcp") != 0)
    return lr__misuse("unknown command \"%s\" (use run, describe or mcp)", cli->command);
  bool run = strcmp(cli->command, "run") == 0;
  bool mcp = strcmp(cli->command, "mcp") == 0;
  bool configurable = run || mcp; /* takes --config and --set */
  cli->bindings = calloc((size_t)argc, sizeof *cli->bindings);
  cli->sets = calloc((size_t)argc, sizeof *cli->sets);
  bool no_more_options = false;
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v;
    if (no_more_options || a[0] != '-' || strcmp(a, "-") == 0) {
      if (!run) return lr__misuse(mcp ? "mcp takes no program (got \"%s\")" : "describe takes no program (got \"%s\")", a);
      if (cli->program_path) return lr__misuse("only one program can be run (got also \"%s\")", a);
      cli->program_path = a;
    } else if (strcmp(a, "--") == 0) {
      no_more_options = true;
    } else if (lr__is_option(a, "--bindings")) {
      if (!(v = lr__option_value(argc, argv, &i, "--bindings"))) return lr__misuse("%s needs a file", "--bindings");
      cli->bindings[cli->nbindings++] = v;
    } else if (configurable && lr__is_option(a, "--config")) {
      if (!(v = lr__option_value(argc, argv, &i, "--config"))) return lr__misuse("%s needs a file", "--config");
      if (cli->config_file) return lr__misuse("%s can be given once", "--config");
      cli->config_file = v;
    } else if (configurable && lr__is_option(a, "--set")) {
      if (!(v = lr__option_value(argc, argv, &i, "--set"))) return lr__misuse("%s needs key=value", "--set");
      if (!strchr(v, '=')) return lr__misuse("--set needs key=value, got \"%s\"", v);
      cli->sets[cli->nsets++] = v;
    } else if (run && strcmp(a, "--json") == 0) {
      cli->json = 1;
    } else if (run && strcmp(a, "--stream") == 0) {
      cli->stream = 1;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "--version") == 0) {
      if (strcmp(a, "--version") == 0) lr__print_version();
      else lr__print_help();
      free(cli->bindings);
      free(cli->sets);
      exit(LR_EXIT_OK);
    } else {
      return lr__misuse("unknown option \"%s\" (see lunarun --help)", a);
    }
  }
  if (run && !cli->program_path) return lr__misuse("%s", "run needs a program file, or - for standard input");
  return 0;
}

static char *lr__read_all(FILE *f, size_t *len) {
  size_t cap = 65536, n = 0;
  char *data = malloc(cap);
  size_t got;
  while (data && (got = fread(data + n, 1, cap - n, f)) > 0) {
    n += got;
    if (n == cap) {
      char *d = realloc(data, cap *= 2);
      if (!d) {
        free(data);
        return NULL;
      }
      data = d;
    }
  }
  if (!data || ferror(f)) {
    free(data);
    return NULL;
  }
  *len = n;
  return data;
}

/* One log entry as a line of the readable rendering. */
static void lr__print_log_text(const char *text, size_t len) {
  fwrite(text, 1, len, stdout);
  if (len == 0 || text[len - 1] != '\n') fputc('\n', stdout);
}

/* One log entry as an NDJSON event of --json --stream: {"log":"..."}. */
static void lr__print_log_event(const char *text, size_t len) {
  size_t n;
  char *json = lr_log_json(text, len, &n);
  fputs("{\"log\":", stdout);
  fwrite(json, 1, n, stdout);
  fputs("}\n", stdout);
  free(json);
}

static void lr__print_log(const lr_cli *cli, const char *text, size_t len) {
  if (cli->json) lr__print_log_event(text, len);
  else lr__print_log_text(text, len);
}

/* --stream: an entry the ledger admitted, printed at once. */
static void lr__on_log(void *ud, const char *text, size_t len) {
  lr_cli *cli = ud;
  lr__print_log(cli, text, len);
  cli->logs_printed++;
  fflush(stdout);
}

/* A readable rendering: the logs (those not streamed yet), then the value
 * or "error (kind): message". */
static void lr__print_text(const lr_cli *cli, const lr_result *r) {
  for (size_t i = cli->logs_printed; i < r->nlogs; i++) lr__print_log_text(r->logs[i], r->log_lens[i]);
  if (r->kind != LR_OK) {
    printf("error (%s): ", lr_kind_name(r->kind));
    fwrite(r->message, 1, r->message_len, stdout);
    fputc('\n', stdout);
  } else if (r->value_json) {
    fwrite(r->value_json, 1, r->value_len, stdout);
    fputc('\n', stdout);
  }
}

static void lr__on_disposed(void *ud) {
  lr_cli *cli = ud;
  cli->rt = NULL;
  uv_close((uv_handle_t *)&cli->sigint, NULL);
  uv_close((uv_handle_t *)&cli->sigterm, NULL);
}

static void lr__on_done(void *ud, const lr_result *r) {
  lr_cli *cli = ud;
  cli->run = NULL;
  if (cli->json) {
    /* --stream: the result's logs that were not streamed yet (the last ones
     * near the cap, a cut prefix), so the events are exactly its logs. */
    for (size_t i = cli->logs_printed; cli->stream && i < r->nlogs; i++) lr__print_log_event(r->logs[i], r->log_lens[i]);
    size_t len;
    char *json = lr_result_json(r, &len);
    fwrite(json, 1, len, stdout);
    fputc('\n', stdout);
    free(json);
  } else {
    lr__print_text(cli, r);
  }
  fflush(stdout);
  cli->exit_code = r->kind == LR_OK ? LR_EXIT_OK : LR_EXIT_FAILED;
  lr_runtime_dispose(cli->rt, lr__on_disposed, cli);
}

static void lr__on_signal(uv_signal_t *s, int signum) {
  lr_cli *cli = s->data;
  if (cli->run) lr_run_abort(cli->run);
}

int main(int argc, char **argv) {
  lr_cli cli = {0};
  int rc = lr__parse_args(&cli, argc, argv);
  if (rc) {
    free(cli.bindings);
    free(cli.sets);
    return rc;
  }
  char err[LR_ERR_MAX];
  lr_config cfg;
  lr_config_init(&cfg);
  /* One run: a warm pool would only cost a second sandbox. The MCP server
   * keeps one warm sandbox, so a call starts at once without every probe of
   * a client (a short-lived server process) starting several. A config file
   * or --set may change either. */
  cfg.pool_size = strcmp(cli.command, "mcp") == 0 ? 1 : 0;
  uv_loop_init(&cli.loop);
  int code = LR_EXIT_MISUSE;
  char *program = NULL;
  size_t program_len = 0;

  if (strcmp(cli.command, "describe") == 0) {
    char *text;
    if (lr_describe(cli.bindings, cli.nbindings, &text, err) != 0) goto misuse;
    fputs(text, stdout);
    free(text);
    code = LR_EXIT_OK;
    goto out;
  }

  if (cli.config_file && lr_config_load_file(&cfg, cli.config_file, err) != 0) goto misuse;
  for (size_t i = 0; i < cli.nsets; i++) {
    char key[128];
    const char *eq = strchr(cli.sets[i], '=');
    snprintf(key, sizeof key, "%.*s", (int)(eq - cli.sets[i]), cli.sets[i]);
    if (lr_config_set(&cfg, key, eq + 1, err) != 0) goto misuse;
  }
  if (lr_config_check(&cfg, err) != 0) goto misuse;

  if (strcmp(cli.command, "mcp") == 0) {
    /* The protocol gets the real standard output on a descriptor of its own
     * (closed on exec: no sandbox inherits it); descriptor 1 becomes
     * standard error before any bindings file runs, so a print in one, or
     * a stray write from anywhere, cannot corrupt the stream. */
    int protocol_fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (protocol_fd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      snprintf(err, sizeof err, "mcp: cannot set standard output aside: %s", strerror(errno));
      goto misuse;
    }
    if (lr__cli_runtime(&cli, &cfg, err) != 0) goto misuse;
    /* Until standard input ends or a signal: the server owns the runtime. */
    rc = lr_mcp_serve(cli.rt, cli.bindings, cli.nbindings, STDIN_FILENO, protocol_fd, err);
    close(protocol_fd);
    if (rc != 0) goto misuse;
    code = LR_EXIT_OK;
    goto out;
  }

  FILE *f = strcmp(cli.program_path, "-") == 0 ? stdin : fopen(cli.program_path, "rb");
  if (!f || !(program = lr__read_all(f, &program_len))) {
    snprintf(err, sizeof err, "cannot read the program %s: %s", cli.program_path, strerror(errno));
    if (f && f != stdin) fclose(f);
    goto misuse;
  }
  if (f != stdin) fclose(f);

  if (lr__cli_runtime(&cli, &cfg, err) != 0) goto misuse;

  uv_signal_init(&cli.loop, &cli.sigint);
  uv_signal_init(&cli.loop, &cli.sigterm);
  cli.sigint.data = cli.sigterm.data = &cli;
  uv_signal_start(&cli.sigint, lr__on_signal, SIGINT);
  uv_signal_start(&cli.sigterm, lr__on_signal, SIGTERM);

  lr_run_options opts = {.on_done = lr__on_done, .on_log = cli.stream ? lr__on_log : NULL, .ud = &cli};
  if (lr_run_start(cli.rt, program, program_len, &opts, &cli.run, err) != 0) {
    lr_runtime_dispose(cli.rt, lr__on_disposed, &cli);
    uv_run(&cli.loop, UV_RUN_DEFAULT);
    goto misuse;
  }
  uv_run(&cli.loop, UV_RUN_DEFAULT);
  code = cli.exit_code;
  goto out;

misuse:
  fprintf(stderr, "lunarun: %s\n", err);
  code = LR_EXIT_MISUSE;
out:
  free(program);
  lr_config_free(&cfg);
  /* Disposal closed the bindings' Lua state, which starts closing the
   * handles it owned (luv's, the HTTP client's); let their callbacks run. */
  uv_run(&cli.loop, UV_RUN_DEFAULT);
  /* Every handle must be closed by now; one left open is a bug to report. */
  if (uv_loop_close(&cli.loop) != 0) {
    fputs("lunarun: internal error: handles were left open on the loop\n", stderr);
    uv_print_all_handles(&cli.loop, stderr);
    code = 70;
  }
  free(cli.bindings);
  free(cli.sets);
  return code;
}
