/* The HTTP client against a small HTTP/1.1 server on 127.0.0.1 that runs in
 * the same loop. Every test makes its own client and closes it; after each
 * close no handle of the client may be left on the loop, and at the end the
 * loop must close cleanly. */
#define _GNU_SOURCE /* memmem, strcasestr */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "check.h"
#include "http.h"

static uv_loop_t *loop;

/* ---- the server ----------------------------------------------------------- */

typedef struct srv_conn {
  uv_tcp_t tcp;
  uv_timer_t timer; /* holds back a /slow answer */
  lr_buf in;
  bool closing, busy;
  int handles; /* still to close */
  struct srv_conn *prev, *next;
} srv_conn;

static struct {
  uv_tcp_t listener;
  int port;
  srv_conn *conns; /* every connection until its handles have closed */
  int open_conns;
  int accepted;
  int slow_seen;
} srv;

typedef struct srv_write {
  uv_write_t req;
  char *data;
} srv_write;

static void srv_on_written(uv_write_t *req, int status) {
  srv_write *w = (srv_write *)req;
  free(w->data);
  free(w);
}

static void srv_send(srv_conn *conn, const void *data, size_t len) {
  if (conn->closing || len == 0) return;
  srv_write *w = lr__xcalloc(1, sizeof *w);
  w->data = lr__xmemdup(data, len);
  uv_buf_t b = uv_buf_init(w->data, (unsigned)len);
  if (uv_write(&w->req, (uv_stream_t *)&conn->tcp, &b, 1, srv_on_written) != 0) {
    free(w->data);
    free(w);
  }
}

static void srv_sendf(srv_conn *conn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void srv_sendf(srv_conn *conn, const char *fmt, ...) {
  char text[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  srv_send(conn, text, (size_t)n);
}

static void srv_on_conn_closed(uv_handle_t *h) {
  srv_conn *conn = h->data;
  if (--conn->handles > 0) return;
  if (conn->prev)
    conn->prev->next = conn->next;
  else
    srv.conns = conn->next;
  if (conn->next) conn->next->prev = conn->prev;
  lr__buf_free(&conn->in);
  free(conn);
  srv.open_conns--;
}

static void srv_conn_close(srv_conn *conn) {
  if (conn->closing) return;
  conn->closing = true;
  uv_close((uv_handle_t *)&conn->tcp, srv_on_conn_closed);
  uv_close((uv_handle_t *)&conn->timer, srv_on_conn_closed);
}

static char pattern(size_t i) {
  return (char)('a' + i % 26);
}

static void srv_send_pattern(srv_conn *conn, size_t n, bool chunked) {
  char *p = lr__xmalloc(n ? n : 1);
  for (size_t i = 0; i < n; i++) p[i] = pattern(i);
  if (!chunked) {
    srv_send(conn, p, n);
  } else {
    for (size_t off = 0; off < n; off += 16384) {
      size_t k = n - off < 16384 ? n - off : 16384;
      srv_sendf(conn, "%zx\r\n", k);
      srv_send(conn, p + off, k);
      srv_send(conn, "\r\n", 2);
    }
    srv_send(conn, "0\r\n\r\n", 5);
  }
  free(p);
}

static long query_num(const char *path, const char *key) {
  const char *q = strchr(path, '?');
  size_t klen = strlen(key);
  for (const char *p = q; p; p = strchr(p + 1, '&')) {
    if (strncmp(p + 1, key, klen) == 0 && p[1 + klen] == '=') return atol(p + 2 + klen);
  }
  return -1;
}

static void srv_process(srv_conn *conn);

static void srv_on_slow(uv_timer_t *t) {
  srv_conn *conn = t->data;
  srv_sendf(conn, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nslow");
  conn->busy = false;
  srv_process(conn);
}

/* Answers one request: the head is head_len bytes, the whole request len. */
static void srv_answer(srv_conn *conn, const char *req, size_t head_len, size_t len) {
  char method[16] = "", path[512] = "";
  sscanf(req, "%15s %511s", method, path);
  bool head = strcmp(method, "HEAD") == 0;
  size_t plen = strcspn(path, "?");
  if (plen == 6 && strncmp(path, "/hello", 6) == 0) {
    srv_sendf(conn,
              "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-Dup: a\r\nX-Dup: b\r\n"
              "X-Folded: one\r\n  two\r\nX-Blank:   \r\nContent-Length: 11\r\n\r\n%s",
              head ? "" : "hello world");
  } else if (strncmp(path, "/index", plen) == 0 && plen == 6) {
    char body[64];
    int n = snprintf(body, sizeof body, "index %ld", query_num(path, "i"));
    srv_sendf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", n, body);
  } else if (plen == 5 && strncmp(path, "/echo", 5) == 0) {
    srv_sendf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", len);
    srv_send(conn, req, len);
  } else if (plen == 7 && strncmp(path, "/status", 7) == 0) {
    long code = query_num(path, "code");
    srv_sendf(conn, "HTTP/1.1 %ld Whatever\r\nContent-Length: 10\r\n\r\nstatus %ld", code, code);
  } else if (plen == 4 && strncmp(path, "/big", 4) == 0) {
    long n = query_num(path, "n");
    srv_sendf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %ld\r\n\r\n", n);
    srv_send_pattern(conn, (size_t)n, false);
  } else if (plen == 11 && strncmp(path, "/bigchunked", 11) == 0) {
    srv_sendf(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    srv_send_pattern(conn, (size_t)query_num(path, "n"), true);
  } else if (plen == 8 && strncmp(path, "/chunked", 8) == 0) {
    srv_sendf(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    srv_sendf(conn, "2\r\nab\r\n");
    srv_sendf(conn, "3\r\ncde\r\n");
    srv_sendf(conn, "5\r\nfghij\r\n0\r\n\r\n");
  } else if (plen == 9 && strncmp(path, "/redirect", 9) == 0) {
    srv_sendf(conn, "HTTP/1.1 302 Found\r\nLocation: /hello\r\nContent-Length: 5\r\n\r\nmoved");
  } else if (plen == 5 && strncmp(path, "/slow", 5) == 0) {
    srv.slow_seen++;
    conn->busy = true;
    long ms = query_num(path, "ms");
    uv_timer_start(&conn->timer, srv_on_slow, ms < 0 ? 3000 : (uint64_t)ms, 0);
  } else {
    srv_sendf(conn, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
  }
}

/* Answers every complete request in the input, one at a time. */
static void srv_process(srv_conn *conn) {
  while (!conn->busy && !conn->closing) {
    char *end = conn->in.len ? memmem(conn->in.data, conn->in.len, "\r\n\r\n", 4) : NULL;
    if (!end) return;
    size_t head_len = (size_t)(end - conn->in.data) + 4;
    size_t body_len = 0;
    for (char *line = strstr(conn->in.data, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
      if (strncasecmp(line + 2, "Content-Length:", 15) == 0) body_len = (size_t)atol(line + 17);
    }
    if (conn->in.len < head_len + body_len) return;
    size_t len = head_len + body_len;
    srv_answer(conn, conn->in.data, head_len, len);
    memmove(conn->in.data, conn->in.data + len, conn->in.len - len + 1);
    conn->in.len -= len;
  }
}

static void srv_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  srv_conn *conn = h->data;
  lr__buf_reserve(&conn->in, 65536);
  *buf = uv_buf_init(conn->in.data + conn->in.len, 65536);
}

static void srv_on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  srv_conn *conn = s->data;
  if (n < 0) {
    srv_conn_close(conn);
    return;
  }
  conn->in.len += (size_t)n;
  conn->in.data[conn->in.len] = '\0';
  srv_process(conn);
}

static void srv_on_connection(uv_stream_t *server, int status) {
  if (status < 0) return;
  srv_conn *conn = lr__xcalloc(1, sizeof *conn);
  uv_tcp_init(loop, &conn->tcp);
  uv_timer_init(loop, &conn->timer);
  conn->tcp.data = conn->timer.data = conn;
  conn->handles = 2;
  conn->next = srv.conns;
  if (srv.conns) srv.conns->prev = conn;
  srv.conns = conn;
  srv.open_conns++;
  srv.accepted++;
  if (uv_accept(server, (uv_stream_t *)&conn->tcp) != 0) {
    srv_conn_close(conn);
    return;
  }
  uv_read_start((uv_stream_t *)&conn->tcp, srv_alloc, srv_on_read);
}

static int srv_start(void) {
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", 0, &addr);
  uv_tcp_init(loop, &srv.listener);
  if (uv_tcp_bind(&srv.listener, (const struct sockaddr *)&addr, 0) != 0) return -1;
  if (uv_listen((uv_stream_t *)&srv.listener, 1024, srv_on_connection) != 0) return -1;
  struct sockaddr_in got;
  int len = sizeof got;
  uv_tcp_getsockname(&srv.listener, (struct sockaddr *)&got, &len);
  srv.port = ntohs(got.sin_port);
  return 0;
}

/* ---- the harness ------------------------------------------------------------ */

static uv_timer_t deadline;
static bool deadline_hit;

static void on_deadline(uv_timer_t *t) {
  deadline_hit = true;
}

/* Runs the loop until cond holds or ms have passed. */
#define RUN_UNTIL(cond, ms)                                \
  do {                                                     \
    deadline_hit = false;                                  \
    uv_timer_start(&deadline, on_deadline, (ms), 0);       \
    while (!(cond) && !deadline_hit) uv_run(loop, UV_RUN_ONCE); \
    uv_timer_stop(&deadline);                              \
  } while (0)

/* Lets the loop run for ms whatever happens. */
static void run_for(uint64_t ms) {
  RUN_UNTIL(false, ms);
}

static bool is_test_handle(uv_handle_t *h) {
  if (h == (uv_handle_t *)&srv.listener || h == (uv_handle_t *)&deadline) return true;
  for (srv_conn *c = srv.conns; c; c = c->next)
    if (h == (uv_handle_t *)&c->tcp || h == (uv_handle_t *)&c->timer) return true;
  return false;
}

static void count_foreign(uv_handle_t *h, void *arg) {
  if (!is_test_handle(h)) (*(int *)arg)++;
}

/* Handles on the loop that belong to neither the server nor the harness. */
static void print_foreign(uv_handle_t *h, void *arg) {
  if (!is_test_handle(h))
    fprintf(stderr, "  left on the loop: %s%s\n", uv_handle_type_name(uv_handle_get_type(h)),
            uv_is_closing(h) ? " (closing)" : "");
}

static int client_handles(void) {
  int n = 0;
  uv_walk(loop, count_foreign, &n);
  return n;
}

typedef struct result {
  int calls;
  long status;
  lr_buf body;
  lr_buf headers; /* "name: value\n" per header */
  int code;
  char message[LR_ERR_MAX];
  uint64_t started, ended;
  /* Things to do inside the callback. */
  lr_http_request *self, *cancel_other;
  lr_http_client *close_client;
  int *closed_calls;
} result;

static void on_closed(void *ud) {
  (*(int *)ud)++;
}

static void on_result(void *ud, const lr_http_response *res, const lr_http_error *e) {
  result *r = ud;
  r->calls++;
  r->ended = uv_now(loop);
  if (res) {
    CHECK(e == NULL);
    r->status = res->status;
    lr__buf_append(&r->body, res->body, res->body_len);
    CHECK(res->body[res->body_len] == '\0');
    for (size_t i = 0; i < res->nheaders; i++) {
      const lr_http_header *h = &res->headers[i];
      CHECK(strlen(h->name) == h->name_len && strlen(h->value) == h->value_len);
      lr__buf_append(&r->headers, h->name, h->name_len);
      lr__buf_append_str(&r->headers, ": ");
      lr__buf_append(&r->headers, h->value, h->value_len);
      lr__buf_append_char(&r->headers, '\n');
    }
  } else {
    CHECK(e != NULL);
    r->code = e->code;
    snprintf(r->message, sizeof r->message, "%s", e->message);
  }
  if (r->self) lr__http_cancel(r->self); /* its own callback is running: nothing happens */
  if (r->cancel_other) lr__http_cancel(r->cancel_other);
  if (r->close_client) lr__http_client_close(r->close_client, on_closed, r->closed_calls);
}

static void result_free(result *r) {
  lr__buf_free(&r->body);
  lr__buf_free(&r->headers);
}

static bool has_header(const result *r, const char *line) {
  if (!r->headers.data) return false;
  char want[512];
  snprintf(want, sizeof want, "%s\n", line);
  const char *p = r->headers.data;
  size_t n = strlen(want);
  for (;;) {
    if (strncmp(p, want, n) == 0) return true;
    p = strchr(p, '\n');
    if (!p || !*++p) return false;
  }
}

static const char *url(const char *path) {
  static char buf[8][256];
  static int next;
  char *b = buf[next++ % 8];
  snprintf(b, 256, "http://127.0.0.1:%d%s", srv.port, path);
  return b;
}

static lr_http_request *start(lr_http_client *c, lr_http_options o, result *r) {
  char err[LR_ERR_MAX] = "";
  r->started = uv_now(loop);
  lr_http_request *req = lr__http_start(c, &o, on_result, r, err);
  if (!req) fprintf(stderr, "start %s: %s\n", o.url, err);
  return req;
}

/* Runs one request to its end. */
static void fetch(lr_http_client *c, lr_http_options o, result *r) {
  lr_http_request *req = start(c, o, r);
  CHECK(req != NULL);
  if (req) RUN_UNTIL(r->calls > 0, 10000);
  CHECK(r->calls == 1);
}

static lr_http_client *new_client(void) {
  char err[LR_ERR_MAX] = "";
  lr_http_client *c = lr__http_client_new(loop, err);
  if (!c) fprintf(stderr, "client: %s\n", err);
  return c;
}

/* Closes c and checks that it reports once, later, with nothing left. */
static void close_client(lr_http_client *c) {
  int calls = 0;
  lr__http_client_close(c, on_closed, &calls);
  CHECK(calls == 0);
  lr__http_client_close(c, on_closed, &calls); /* a second close does nothing */
  RUN_UNTIL(calls > 0, 5000);
  CHECK(calls == 1);
  CHECK(client_handles() == 0);
  uv_walk(loop, print_foreign, NULL);
  /* The server sees the client's connections go. */
  RUN_UNTIL(srv.open_conns == 0, 5000);
  CHECK(srv.open_conns == 0);
  CHECK(calls == 1);
}

/* ---- tests ------------------------------------------------------------------- */

static void test_get(void) {
  lr_http_client *c = new_client();
  result r = {0};
  fetch(c, (lr_http_options){.url = url("/hello")}, &r);
  CHECK(r.status == 200);
  CHECK_STR(r.body.data, "hello world");
  CHECK(has_header(&r, "Content-Type: text/plain"));
  CHECK_STR(strstr(r.headers.data, "X-Dup"), "X-Dup: a\nX-Dup: b\nX-Folded: one two\nX-Blank: \nContent-Length: 11\n");
  run_for(20);
  CHECK(r.calls == 1);
  result_free(&r);

  /* HEAD: the headers, no body. */
  result h = {0};
  fetch(c, (lr_http_options){.method = "HEAD", .url = url("/hello")}, &h);
  CHECK(h.status == 200 && h.body.len == 0 && has_header(&h, "Content-Length: 11"));
  result_free(&h);
  close_client(c);
}

static bool ends_with(const lr_buf *b, const void *tail, size_t n) {
  return b->len >= n && memcmp(b->data + b->len - n, tail, n) == 0;
}

static void test_methods_headers_body(void) {
  lr_http_client *c = new_client();
  const char *headers[] = {"X-A: 1", "X-Empty;", "User-Agent: lunarun-test"};
  result r = {0};
  fetch(c,
        (lr_http_options){.method = "POST", .url = url("/echo?x=1"), .headers = headers, .nheaders = 3,
                          .body = "abc\0def", .body_len = 7},
        &r);
  CHECK(r.status == 200);
  CHECK(r.body.data && strncmp(r.body.data, "POST /echo?x=1 HTTP/1.1\r\n", 25) == 0);
  CHECK(r.body.data && strstr(r.body.data, "\r\nX-A: 1\r\n"));
  CHECK(r.body.data && strstr(r.body.data, "\r\nX-Empty:\r\n"));
  CHECK(r.body.data && strstr(r.body.data, "\r\nUser-Agent: lunarun-test\r\n"));
  CHECK(r.body.data && strstr(r.body.data, "\r\nContent-Length: 7\r\n"));
  CHECK(r.body.data && !strcasestr(r.body.data, "\r\nExpect:"));
  CHECK(ends_with(&r.body, "\r\n\r\nabc\0def", 11));
  result_free(&r);

  result put = {0};
  fetch(c, (lr_http_options){.method = "PUT", .url = url("/echo"), .body = "put!", .body_len = 4}, &put);
  CHECK(put.body.data && strncmp(put.body.data, "PUT /echo HTTP/1.1\r\n", 20) == 0);
  CHECK(ends_with(&put.body, "\r\n\r\nput!", 8));
  result_free(&put);

  result del = {0};
  fetch(c, (lr_http_options){.method = "DELETE", .url = url("/echo")}, &del);
  CHECK(del.body.data && strncmp(del.body.data, "DELETE /echo HTTP/1.1\r\n", 23) == 0);
  CHECK(del.body.data && !strcasestr(del.body.data, "Content-Length"));
  result_free(&del);

  result post = {0};
  fetch(c, (lr_http_options){.method = "POST", .url = url("/echo")}, &post);
  CHECK(post.body.data && strstr(post.body.data, "\r\nContent-Length: 0\r\n"));
  result_free(&post);

  /* A large body goes at once: no second of waiting for a "100 Continue"
   * (curl asks for one above 1 MiB, and this server never sends it). */
  size_t n = 1536 * 1024;
  char *big = lr__xmalloc(n);
  for (size_t i = 0; i < n; i++) big[i] = pattern(i);
  result large = {0};
  fetch(c, (lr_http_options){.method = "POST", .url = url("/echo"), .body = big, .body_len = n}, &large);
  CHECK(large.status == 200 && ends_with(&large.body, big, n));
  CHECK(large.body.data && !strcasestr(large.body.data, "\r\nExpect:"));
  CHECK(large.ended - large.started < 800);
  free(big);
  result_free(&large);
  close_client(c);
}

static void test_status_and_redirect(void) {
  lr_http_client *c = new_client();
  result r = {0};
  fetch(c, (lr_http_options){.url = url("/status?code=404")}, &r);
  CHECK(r.status == 404 && r.code == 0);
  CHECK_STR(r.body.data, "status 404");
  result_free(&r);

  result s = {0};
  fetch(c, (lr_http_options){.url = url("/status?code=503")}, &s);
  CHECK(s.status == 503 && s.code == 0);
  result_free(&s);

  /* Not followed by default. */
  result red = {0};
  fetch(c, (lr_http_options){.url = url("/redirect")}, &red);
  CHECK(red.status == 302);
  CHECK(has_header(&red, "Location: /hello"));
  CHECK_STR(red.body.data, "moved");
  result_free(&red);

  /* Followed when asked: only the last response's headers are kept. */
  result fol = {0};
  fetch(c, (lr_http_options){.url = url("/redirect"), .max_redirects = 2}, &fol);
  CHECK(fol.status == 200);
  CHECK_STR(fol.body.data, "hello world");
  CHECK(!has_header(&fol, "Location: /hello"));
  result_free(&fol);
  close_client(c);
}

static bool is_pattern(const lr_buf *b, size_t n) {
  if (b->len != n) return false;
  for (size_t i = 0; i < n; i++)
    if (b->data[i] != pattern(i)) return false;
  return true;
}

static void test_chunked_and_large(void) {
  lr_http_client *c = new_client();
  result r = {0};
  fetch(c, (lr_http_options){.url = url("/chunked")}, &r);
  CHECK(r.status == 200);
  CHECK_STR(r.body.data, "abcdefghij");
  result_free(&r);

  result bc = {0};
  fetch(c, (lr_http_options){.url = url("/bigchunked?n=300001")}, &bc);
  CHECK(bc.status == 200 && is_pattern(&bc.body, 300001));
  result_free(&bc);

  result big = {0};
  fetch(c, (lr_http_options){.url = url("/big?n=4194304")}, &big);
  CHECK(big.status == 200 && is_pattern(&big.body, 4194304));
  result_free(&big);
  close_client(c);
}

static void test_max_bytes(void) {
  lr_http_client *c = new_client();
  /* At the limit: fine. */
  result at = {0};
  fetch(c, (lr_http_options){.url = url("/big?n=1000"), .max_response_bytes = 1000}, &at);
  CHECK(at.code == 0 && at.status == 200 && is_pattern(&at.body, 1000));
  result_free(&at);

  result atc = {0};
  fetch(c, (lr_http_options){.url = url("/bigchunked?n=1000"), .max_response_bytes = 1000}, &atc);
  CHECK(atc.code == 0 && is_pattern(&atc.body, 1000));
  result_free(&atc);

  /* One byte over, announced by Content-Length. */
  result over = {0};
  fetch(c, (lr_http_options){.url = url("/big?n=1001"), .max_response_bytes = 1000}, &over);
  CHECK(over.code == LR_HTTP_ETOOBIG);
  CHECK_STR(over.message, "response exceeds 1000 bytes");
  result_free(&over);

  /* Over, found while receiving (no length announced). */
  result overc = {0};
  fetch(c, (lr_http_options){.url = url("/bigchunked?n=5000000"), .max_response_bytes = 1000}, &overc);
  CHECK(overc.code == LR_HTTP_ETOOBIG);
  CHECK_STR(overc.message, "response exceeds 1000 bytes");
  CHECK_STR(lr__http_err_name(overc.code), "ETOOBIG");
  result_free(&overc);
  close_client(c);
}

static void test_timeout(void) {
  lr_http_client *c = new_client();
  result r = {0};
  fetch(c, (lr_http_options){.url = url("/slow?ms=3000"), .timeout_ms = 200}, &r);
  CHECK(r.code == LR_HTTP_ETIMEDOUT);
  CHECK_STR(r.message, "request timed out after 200 ms");
  CHECK(r.ended - r.started >= 190 && r.ended - r.started < 1500);
  result_free(&r);

  /* A slow answer within the timeout is fine. */
  result ok = {0};
  fetch(c, (lr_http_options){.url = url("/slow?ms=50"), .timeout_ms = 2000}, &ok);
  CHECK(ok.code == 0 && ok.status == 200);
  CHECK_STR(ok.body.data, "slow");
  result_free(&ok);
  close_client(c);
}

static void test_cancel(void) {
  lr_http_client *c = new_client();
  RUN_UNTIL(srv.open_conns == 0, 5000);

  /* In flight: the server has the request, the answer is pending. */
  result r = {0};
  int seen = srv.slow_seen;
  lr_http_request *req = start(c, (lr_http_options){.url = url("/slow?ms=3000")}, &r);
  RUN_UNTIL(srv.slow_seen > seen, 5000);
  CHECK(srv.slow_seen == seen + 1 && srv.open_conns == 1);
  lr__http_cancel(req);
  RUN_UNTIL(srv.open_conns == 0, 5000);
  CHECK(srv.open_conns == 0); /* the connection was closed, not kept */
  CHECK(client_handles() == 1);  /* only the client's timer */
  CHECK(r.calls == 0);

  /* Before anything happened. */
  result early = {0};
  lr__http_cancel(start(c, (lr_http_options){.url = url("/hello")}, &early));
  run_for(100);
  CHECK(early.calls == 0);

  /* From another request's callback; a request cancelling itself from its
   * own callback changes nothing. */
  result a = {0}, b = {0};
  lr_http_request *rb = start(c, (lr_http_options){.url = url("/slow?ms=3000")}, &b);
  a.cancel_other = rb;
  a.self = start(c, (lr_http_options){.url = url("/hello")}, &a);
  RUN_UNTIL(a.calls > 0, 5000);
  run_for(100);
  CHECK(a.calls == 1 && a.status == 200);
  CHECK(b.calls == 0);
  result_free(&a);
  result_free(&b);
  result_free(&r);
  result_free(&early);
  close_client(c);
}

static int total_calls(const result *rs, int n) {
  int calls = 0;
  for (int i = 0; i < n; i++) calls += rs[i].calls;
  return calls;
}

static void test_concurrent(void) {
  enum { N = 200 };
  lr_http_client *c = new_client();
  static result rs[N];
  memset(rs, 0, sizeof rs);
  int started = 0;
  for (int i = 0; i < N; i++) {
    char path[64];
    snprintf(path, sizeof path, "/index?i=%d", i);
    if (start(c, (lr_http_options){.url = url(path), .timeout_ms = 20000}, &rs[i])) started++;
  }
  CHECK(started == N);
  RUN_UNTIL(total_calls(rs, N) == N, 30000);
  int good = 0, over = 0;
  for (int i = 0; i < N; i++) {
    char want[64];
    snprintf(want, sizeof want, "index %d", i);
    if (rs[i].calls == 1 && rs[i].status == 200 && rs[i].body.data && strcmp(rs[i].body.data, want) == 0) good++;
    if (rs[i].calls > 1) over++;
    if (rs[i].code) fprintf(stderr, "request %d: %s\n", i, rs[i].message);
  }
  CHECK(good == N);
  CHECK(over == 0);
  CHECK(srv.accepted > 1); /* they did run side by side */
  for (int i = 0; i < N; i++) result_free(&rs[i]);
  close_client(c);
}

static void test_refused(void) {
  /* A bound socket that does not listen: connecting to it is refused. */
  uv_tcp_t hole;
  struct sockaddr_in addr;
  uv_ip4_addr("127.0.0.1", 0, &addr);
  uv_tcp_init(loop, &hole);
  CHECK(uv_tcp_bind(&hole, (const struct sockaddr *)&addr, 0) == 0);
  struct sockaddr_in got;
  int len = sizeof got;
  uv_tcp_getsockname(&hole, (struct sockaddr *)&got, &len);
  char u[128];
  snprintf(u, sizeof u, "http://127.0.0.1:%d/", ntohs(got.sin_port));

  lr_http_client *c = new_client();
  result r = {0};
  fetch(c, (lr_http_options){.url = u, .timeout_ms = 5000}, &r);
  CHECK(r.code == LR_HTTP_ECONNREFUSED);
  CHECK_STR(lr__http_err_name(r.code), "ECONNREFUSED");
  CHECK(strlen(r.message) > 0);
  result_free(&r);
  uv_close((uv_handle_t *)&hole, NULL);
  close_client(c);
}

static void test_bad_options(void) {
  lr_http_client *c = new_client();
  char err[LR_ERR_MAX];
  result r = {0};
  const char *crlf[] = {"X-A: 1\r\nX-B: 2"};
  const char *noname[] = {": x"};
  const char *nocolon[] = {"X-A"};
  const char *space[] = {"X A: 1"};
  struct {
    lr_http_options o;
    const char *want;
  } bad[] = {
      {{.url = "ftp://127.0.0.1/"}, "only http and https"},
      {{.url = "file:///etc/passwd"}, "only http and https"},
      {{.url = "not a url"}, "invalid URL"},
      {{.url = NULL}, "no URL"},
      {{.url = url("/"), .method = "GE T"}, "invalid HTTP method"},
      {{.url = url("/"), .method = ""}, "invalid HTTP method"},
      {{.url = url("/"), .headers = crlf, .nheaders = 1}, "invalid request header"},
      {{.url = url("/"), .headers = noname, .nheaders = 1}, "invalid request header"},
      {{.url = url("/"), .headers = nocolon, .nheaders = 1}, "invalid request header"},
      {{.url = url("/"), .headers = space, .nheaders = 1}, "invalid request header"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    err[0] = '\0';
    CHECK(lr__http_start(c, &bad[i].o, on_result, &r, err) == NULL);
    if (!strstr(err, bad[i].want)) fprintf(stderr, "case %zu: got \"%s\", want \"%s\"\n", i, err, bad[i].want);
    CHECK(strstr(err, bad[i].want) != NULL);
  }
  run_for(20);
  CHECK(r.calls == 0);

  lr_http_url p;
  CHECK(lr__http_url_parse("http://User:pw@EXAMPLE.com:8080/x?y#z", &p, err) == 0);
  CHECK_STR(p.scheme, "http");
  CHECK_STR(p.host, "example.com");
  CHECK(p.port == 8080);
  CHECK(lr__http_url_parse("https://[::1]/", &p, err) == 0);
  CHECK_STR(p.host, "[::1]");
  CHECK(p.port == 443);
  CHECK(lr__http_url_parse("http://evil.example#@good.example/", &p, err) == 0);
  CHECK_STR(p.host, "evil.example");
  CHECK(p.port == 80);
  CHECK(lr__http_url_parse("http://good.example@evil.example/", &p, err) == 0);
  CHECK_STR(p.host, "evil.example");
  CHECK(lr__http_url_parse("gopher://x/", &p, err) != 0);
  CHECK(lr__http_url_parse("http://:80/", &p, err) != 0);
  CHECK(lr__http_url_parse("http://exa mple/", &p, err) != 0);
  close_client(c);

  /* A closing client takes nothing new. */
  lr_http_client *d = new_client();
  int calls = 0;
  lr__http_client_close(d, on_closed, &calls);
  CHECK(lr__http_start(d, &(lr_http_options){.url = url("/hello")}, on_result, &r, err) == NULL);
  CHECK(strstr(err, "closing") != NULL);
  RUN_UNTIL(calls > 0, 5000);
  CHECK(calls == 1 && client_handles() == 0);
  CHECK(r.calls == 0);
}

static void test_close_in_flight(void) {
  lr_http_client *c = new_client();
  result warm = {0};
  fetch(c, (lr_http_options){.url = url("/hello")}, &warm); /* leaves a cached connection */
  result_free(&warm);
  result rs[5] = {0};
  int seen = srv.slow_seen;
  for (int i = 0; i < 5; i++) start(c, (lr_http_options){.url = url("/slow?ms=3000")}, &rs[i]);
  RUN_UNTIL(srv.slow_seen == seen + 5, 5000);
  CHECK(srv.slow_seen == seen + 5);
  CHECK(client_handles() >= 6); /* the timer and a poll per connection */
  close_client(c);
  int calls = 0;
  for (int i = 0; i < 5; i++) calls += rs[i].calls;
  CHECK(calls == 0);
}

static void test_close_from_callback(void) {
  lr_http_client *c = new_client();
  int closed = 0;
  result slow[3] = {0};
  for (int i = 0; i < 3; i++) start(c, (lr_http_options){.url = url("/slow?ms=3000")}, &slow[i]);
  result r = {0};
  r.close_client = c;
  r.closed_calls = &closed;
  start(c, (lr_http_options){.url = url("/hello")}, &r);
  RUN_UNTIL(closed > 0, 5000);
  CHECK(r.calls == 1 && closed == 1);
  CHECK(slow[0].calls + slow[1].calls + slow[2].calls == 0);
  CHECK(client_handles() == 0);
  RUN_UNTIL(srv.open_conns == 0, 5000);
  CHECK(srv.open_conns == 0);
  result_free(&r);
}

/* A callback that starts the next request, five deep. */
typedef struct chain {
  lr_http_client *c;
  int done;
} chain;

static void on_chain(void *ud, const lr_http_response *res, const lr_http_error *e) {
  chain *ch = ud;
  if (res && res->status == 200) ch->done++;
  if (ch->done < 5 && res) {
    char err[LR_ERR_MAX];
    lr_http_options o = {.url = url("/hello")};
    CHECK(lr__http_start(ch->c, &o, on_chain, ch, err) != NULL);
  }
}

static void test_start_from_callback(void) {
  chain ch = {.c = new_client()};
  char err[LR_ERR_MAX];
  lr__http_start(ch.c, &(lr_http_options){.url = url("/hello")}, on_chain, &ch, err);
  RUN_UNTIL(ch.done == 5, 5000);
  CHECK(ch.done == 5);
  CHECK(srv.open_conns == 1); /* one connection, reused */
  close_client(ch.c);
}

int main(void) {
  uv_loop_t the_loop;
  loop = &the_loop;
  uv_loop_init(loop);
  uv_timer_init(loop, &deadline);
  if (srv_start() != 0) {
    fprintf(stderr, "cannot start the test server\n");
    return 1;
  }
  test_get();
  test_methods_headers_body();
  test_status_and_redirect();
  test_chunked_and_large();
  test_max_bytes();
  test_timeout();
  test_cancel();
  test_concurrent();
  test_refused();
  test_bad_options();
  test_close_in_flight();
  test_close_from_callback();
  test_start_from_callback();

  CHECK(client_handles() == 0);
  uv_close((uv_handle_t *)&srv.listener, NULL);
  uv_close((uv_handle_t *)&deadline, NULL);
  uv_run(loop, UV_RUN_DEFAULT);
  CHECK(srv.conns == NULL);
  CHECK(uv_loop_close(loop) == 0);
  lr__http_global_cleanup();
  return CHECK_DONE();
}
