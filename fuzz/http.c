/* Fuzz target: where core/http.c parses a response. libcurl hands a
 * response over through callbacks (one per header line, then body chunks),
 * so the target calls those callbacks directly with what a hostile server
 * could make curl deliver, finishes the request as curl would, and checks
 * what the caller gets; then it builds the Lua table core/lua_http.c gives
 * a handler from it. One input in four is a URL for lr__http_url_parse
 * instead (the parser the client connects with).
 *
 * The static functions are reached by including the two files: they stay
 * static in the engine, and this executable does not link their objects. */
#include "../core/http.c"
#include "../core/lua_http.c"

#include <lualib.h>

#include "fuzz_input.h"

/* A fresh state per input: one kept across inputs would keep memory
 * libFuzzer's leak check then takes for a leak on every input. */
static lua_State *L;
static lr_http_client lr_fuzz_client;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  char err[LR_ERR_MAX];
  if (lr__http_global_init(err)) abort();
  lr_fuzz_client.multi = curl_multi_init();
  return 0;
}

typedef struct lr_fuzz_expect {
  size_t body_len;     /* bytes the body callback accepted */
  size_t max_bytes;
  bool called;
} lr_fuzz_expect;

static void lr_fuzz_done(void *ud, const lr_http_response *res, const lr_http_error *e) {
  lr_fuzz_expect *x = ud;
  x->called = true;
  LR_FUZZ_ASSERT((res == NULL) != (e == NULL), "exactly one of response and error");
  if (e) {
    LR_FUZZ_ASSERT(e->message && e->message[0], "an error without a message");
    LR_FUZZ_ASSERT(strcmp(lr__http_err_name(e->code), "EUNKNOWN") != 0, "error code %d", e->code);
    return;
  }
  LR_FUZZ_ASSERT(res->body_len == x->body_len && res->body[res->body_len] == '\0', "body");
  LR_FUZZ_ASSERT(!x->max_bytes || res->body_len <= x->max_bytes, "body over the limit");
  for (size_t i = 0; i < res->nheaders; i++) {
    const lr_http_header *h = &res->headers[i];
    LR_FUZZ_ASSERT(h->name_len > 0 && h->name[h->name_len] == '\0' && !memchr(h->name, ':', h->name_len),
                   "header name %zu", i);
    LR_FUZZ_ASSERT(h->value[h->value_len] == '\0', "header value %zu", i);
    LR_FUZZ_ASSERT(!memchr(h->name, '\n', h->name_len) && !memchr(h->value, '\n', h->value_len),
                   "a newline inside header %zu", i);
  }
  int top = lua_gettop(L);
  lr__lua_http_push_response(L, res);
  LR_FUZZ_ASSERT(lua_gettop(L) == top + 1 && lua_istable(L, -1), "the response table");
  lua_settop(L, top);
}

static void lr_fuzz_url(const uint8_t *p, size_t n) {
  char *url = lr__xmemdup(p, n);
  lr_http_url u;
  char err[LR_ERR_MAX] = "";
  if (lr__http_url_parse(url, &u, err) == 0) {
    LR_FUZZ_ASSERT(strcmp(u.scheme, "http") == 0 || strcmp(u.scheme, "https") == 0, "scheme %s", u.scheme);
    LR_FUZZ_ASSERT(u.host[0] && strlen(u.host) < sizeof u.host, "host");
    for (const char *c = u.host; *c; c++) LR_FUZZ_ASSERT(!(*c >= 'A' && *c <= 'Z'), "host not lowercased");
  } else {
    LR_FUZZ_ASSERT(err[0], "a refusal without a message");
  }
  free(url);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lr_fuzz_in in = {data, size};
  uint8_t flags = lr_fuzz_u8(&in);
  if (flags % 4 == 3) { /* no Lua state needed */
    lr_fuzz_url(in.p, in.n);
    return 0;
  }
  L = luaL_newstate();
  lr_fuzz_expect x = {.max_bytes = flags & 4 ? lr_fuzz_u8(&in) * 16u : 0};
  lr_http_request *r = lr__xcalloc(1, sizeof *r);
  r->client = &lr_fuzz_client;
  r->easy = curl_easy_init();
  r->cb = lr_fuzz_done;
  r->ud = &x;
  r->max_bytes = x.max_bytes;
  lr_fuzz_client.requests = r;

  /* Records: a kind byte, a length byte, then that many bytes. Even kinds
   * are header lines (curl passes each with its CRLF), odd ones body
   * chunks; a refused chunk ends the transfer as curl does. */
  CURLcode rc = CURLE_OK;
  while (in.n && rc == CURLE_OK) {
    uint8_t kind = lr_fuzz_u8(&in);
    size_t len;
    const uint8_t *p = lr_fuzz_bytes(&in, 255, &len);
    if (kind % 2 == 0) { /* curl cuts header lines at LF: none inside one */
      const uint8_t *lf = memchr(p, '\n', len);
      if (lf) len = (size_t)(lf - p) + 1;
    }
    char *chunk = lr__xmemdup(p, len); /* curl's buffer, exactly this long */
    if (kind % 2 == 0) {
      size_t got = lr__http_on_header(chunk, 1, len, r);
      LR_FUZZ_ASSERT(got == len, "the header callback took %zu of %zu", got, len);
    } else if (len) { /* curl never calls with an empty chunk */
      size_t got = lr__http_on_body(chunk, 1, len, r);
      if (got == len) x.body_len += len;
      else rc = CURLE_WRITE_ERROR;
    }
    free(chunk);
  }
  if (rc == CURLE_OK && flags & 8) rc = (CURLcode)(1 + (flags >> 4)); /* a failure of curl's own */
  lr__http_finish(r, rc); /* calls back and frees r */
  LR_FUZZ_ASSERT(x.called, "the callback did not run");
  LR_FUZZ_ASSERT(lr_fuzz_client.requests == NULL, "the request stayed listed");
  lua_close(L);
  return 0;
}
