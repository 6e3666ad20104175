/* The HTTP client: libcurl's multi-socket interface on a libuv loop.
 *
 * curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION: one uv_poll_t
 * each) and when to wake it up (CURLMOPT_TIMERFUNCTION: the client's one
 * uv_timer_t); libuv tells curl what happened with curl_multi_socket_action.
 * Finished transfers are collected with curl_multi_info_read after every
 * action, and their callbacks run there, outside any libcurl call, so a
 * callback may start, cancel or close freely. Handle memory is freed only in
 * close callbacks; the client itself goes when its last handle has closed. */
#include "http.h"

#include <curl/curl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One socket curl asked us to watch. */
typedef struct lr_http_socket {
  uv_poll_t poll;
  curl_socket_t fd;
  lr_http_client *client;
  struct lr_http_socket *prev, *next; /* the client's live sockets */
} lr_http_socket;

/* Where one response header sits in lr_http_request.hbytes: offsets, since
 * the buffer moves as it grows. */
typedef struct lr_http_hspan {
  size_t name_off, name_len, value_off, value_len;
} lr_http_hspan;

struct lr_http_request {
  lr_http_client *client;
  CURL *easy;
  CURLU *url; /* curl uses it for the whole transfer; freed after the easy */
  struct curl_slist *headers;
  lr_http_cb cb;
  void *ud;
  uint64_t timeout_ms;
  size_t max_bytes;
  bool too_big;
  bool stopped; /* on_data asked to stop */
  bool in_callback;
  int (*on_data)(void *ud, long status, const char *data, size_t len);
  lr_buf body;
  lr_buf hbytes; /* "name\0value\0" for every response header */
  lr_http_hspan *hspans;
  size_t nhspans, hspans_cap;
  char errbuf[CURL_ERROR_SIZE];
  struct lr_http_request *prev, *next; /* the client's requests in flight */
};

struct lr_http_client {
  uv_loop_t *loop;
  CURLM *multi;
  uv_timer_t timer;
  lr_http_request *requests;
  lr_http_socket *sockets;
  int open_handles; /* the timer and every poll whose close callback has not run */
  bool closing;
  lr_http_closed_cb on_closed;
  void *closed_ud;
};

/* ---- errors ------------------------------------------------------------- */

const char *lr__http_err_name(int code) {
  switch (code) {
#define LR_HTTP_ERRNO_NAME(name, what) \
  case LR_HTTP_E##name:                \
    return "E" #name;
    LR_HTTP_ERRNO_MAP(LR_HTTP_ERRNO_NAME)
#undef LR_HTTP_ERRNO_NAME
  }
  return "EUNKNOWN";
}

const char *lr__http_err_what(int code) {
  switch (code) {
#define LR_HTTP_ERRNO_WHAT(name, what) \
  case LR_HTTP_E##name:                \
    return what;
    LR_HTTP_ERRNO_MAP(LR_HTTP_ERRNO_WHAT)
#undef LR_HTTP_ERRNO_WHAT
  }
  return "unknown error";
}

static lr_http_errno lr__http_classify(CURLcode rc) {
  switch (rc) {
  case CURLE_OPERATION_TIMEDOUT:
    return LR_HTTP_ETIMEDOUT;
  case CURLE_FILESIZE_EXCEEDED:
    return LR_HTTP_ETOOBIG;
  case CURLE_COULDNT_CONNECT:
    return LR_HTTP_ECONNREFUSED;
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
    return LR_HTTP_ERESOLVE;
  case CURLE_SSL_CONNECT_ERROR:
  case CURLE_SSL_ENGINE_NOTFOUND:
  case CURLE_SSL_ENGINE_SETFAILED:
  case CURLE_SSL_CERTPROBLEM:
  case CURLE_SSL_CIPHER:
  case CURLE_PEER_FAILED_VERIFICATION:
  case CURLE_SSL_ENGINE_INITFAILED:
  case CURLE_SSL_CACERT_BADFILE:
  case CURLE_SSL_SHUTDOWN_FAILED:
  case CURLE_SSL_CRL_BADFILE:
  case CURLE_SSL_ISSUER_ERROR:
  case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
  case CURLE_SSL_INVALIDCERTSTATUS:
  case CURLE_SSL_CLIENTCERT:
  case CURLE_USE_SSL_FAILED:
    return LR_HTTP_ETLS;
  case CURLE_UNSUPPORTED_PROTOCOL:
  case CURLE_WEIRD_SERVER_REPLY:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
  case CURLE_HTTP3:
  case CURLE_BAD_CONTENT_ENCODING:
  case CURLE_TOO_MANY_REDIRECTS:
  case CURLE_RANGE_ERROR:
    return LR_HTTP_EPROTO;
  default:
    return LR_HTTP_EIO;
  }
}

/* ---- libcurl's global state --------------------------------------------- */

/* curl_global_init is not reentrant before 7.84; a mutex makes "first client
 * initialises" safe even if two threads' loops each make one. */
static pthread_mutex_t lr__http_global_lock = PTHREAD_MUTEX_INITIALIZER;
static bool lr__http_global_ready;

static int lr__http_global_init(char *err) {
  int rc = 0;
  pthread_mutex_lock(&lr__http_global_lock);
  if (!lr__http_global_ready) {
    CURLcode c = curl_global_init(CURL_GLOBAL_DEFAULT);
    if (c == CURLE_OK)
      lr__http_global_ready = true;
    else
      rc = lr__errf(err, "cannot initialise libcurl: %s", curl_easy_strerror(c));
  }
  pthread_mutex_unlock(&lr__http_global_lock);
  return rc;
}

void lr__http_global_cleanup(void) {
  pthread_mutex_lock(&lr__http_global_lock);
  if (lr__http_global_ready) curl_global_cleanup();
  lr__http_global_ready = false;
  pthread_mutex_unlock(&lr__http_global_lock);
}

/* ---- URLs ---------------------------------------------------------------- */

/* Parses url into a fresh CURLU (the caller frees it) and fills out. */
static CURLU *lr__http_parse(const char *url, lr_http_url *out, char *err) {
  if (!url) {
    lr__errf(err, "no URL given");
    return NULL;
  }
  CURLU *u = curl_url();
  if (!u) abort(); /* out of memory, as lr__xmalloc treats it */
  char *scheme = NULL, *host = NULL, *port = NULL;
  CURLUcode uc = curl_url_set(u, CURLUPART_URL, url, 0);
  if (uc != CURLUE_OK) {
    lr__errf(err, "invalid URL \"%.200s\": %s", url, curl_url_strerror(uc));
    goto fail;
  }
  if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
    lr__errf(err, "invalid URL \"%.200s\": only http and https are allowed", url);
    goto fail;
  }
  if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0]) {
    lr__errf(err, "invalid URL \"%.200s\": no host", url);
    goto fail;
  }
  if (strlen(host) >= sizeof out->host) {
    lr__errf(err, "invalid URL \"%.200s\": the host name is too long", url);
    goto fail;
  }
  if (curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) != CURLUE_OK) {
    lr__errf(err, "invalid URL \"%.200s\": no port", url);
    goto fail;
  }
  snprintf(out->scheme, sizeof out->scheme, "%s", scheme);
  size_t i = 0;
  for (; host[i]; i++) out->host[i] = (host[i] >= 'A' && host[i] <= 'Z') ? (char)(host[i] + 32) : host[i];
  out->host[i] = '\0';
  out->port = atoi(port);
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  return u;
fail:
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_url_cleanup(u);
  return NULL;
}

int lr__http_url_parse(const char *url, lr_http_url *out, char err[LR_ERR_MAX]) {
  CURLU *u = lr__http_parse(url, out, err);
  if (!u) return -1;
  curl_url_cleanup(u);
  return 0;
}

/* ---- sockets and the timer ---------------------------------------------- */

static void lr__http_handle_closed(lr_http_client *c) {
  if (--c->open_handles > 0 || !c->closing) return;
  lr_http_closed_cb cb = c->on_closed;
  void *ud = c->closed_ud;
  free(c);
  if (cb) cb(ud);
}

static void lr__http_on_socket_closed(uv_handle_t *h) {
  lr_http_socket *sk = h->data;
  lr_http_client *c = sk->client;
  free(sk);
  lr__http_handle_closed(c);
}

static void lr__http_socket_close(lr_http_socket *sk) {
  lr_http_client *c = sk->client;
  if (sk->prev)
    sk->prev->next = sk->next;
  else
    c->sockets = sk->next;
  if (sk->next) sk->next->prev = sk->prev;
  sk->prev = sk->next = NULL;
  uv_poll_stop(&sk->poll);
  uv_close((uv_handle_t *)&sk->poll, lr__http_on_socket_closed);
}

static void lr__http_drain(lr_http_client *c);

static void lr__http_on_poll(uv_poll_t *h, int status, int events) {
  lr_http_socket *sk = h->data;
  lr_http_client *c = sk->client;
  int flags = 0;
  /* libuv reports a socket error (a refused connect, a reset) as a status
   * and stops the poll; curl finds the cause itself when told. */
  if (status < 0) {
    flags = CURL_CSELECT_ERR;
  } else {
    if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
    if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
  }
  int running;
  curl_multi_socket_action(c->multi, sk->fd, flags, &running); /* may close sk */
  lr__http_drain(c);
}

/* curl_multi_assign is refused inside this callback by some libcurl
 * versions, so a socket it did not take is found by its descriptor. */
static lr_http_socket *lr__http_socket_find(lr_http_client *c, curl_socket_t s) {
  for (lr_http_socket *sk = c->sockets; sk; sk = sk->next)
    if (sk->fd == s) return sk;
  return NULL;
}

static int lr__http_on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
  lr_http_client *c = userp;
  lr_http_socket *sk = socketp ? socketp : lr__http_socket_find(c, s);
  if (what == CURL_POLL_REMOVE) {
    if (sk) {
      lr__http_socket_close(sk);
      curl_multi_assign(c->multi, s, NULL);
    }
    return 0;
  }
  if (!sk) {
    sk = lr__xcalloc(1, sizeof *sk);
    sk->fd = s;
    sk->client = c;
    if (uv_poll_init_socket(c->loop, &sk->poll, s) != 0) {
      free(sk);
      return -1; /* curl fails the transfers on this socket */
    }
    sk->poll.data = sk;
    c->open_handles++;
    sk->next = c->sockets;
    if (c->sockets) c->sockets->prev = sk;
    c->sockets = sk;
    curl_multi_assign(c->multi, s, sk);
  }
  int events = 0;
  if (what & CURL_POLL_IN) events |= UV_READABLE;
  if (what & CURL_POLL_OUT) events |= UV_WRITABLE;
  uv_poll_start(&sk->poll, events, lr__http_on_poll);
  return 0;
}

static void lr__http_on_timer(uv_timer_t *t) {
  lr_http_client *c = t->data;
  int running;
  curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  lr__http_drain(c);
}

static int lr__http_on_timer_change(CURLM *multi, long timeout_ms, void *userp) {
  lr_http_client *c = userp;
  if (c->closing) return 0; /* the timer is being closed */
  if (timeout_ms < 0)
    uv_timer_stop(&c->timer);
  else
    /* A 0 ms timer runs from the loop, not from inside libcurl, which must
     * not be re-entered from this callback. */
    uv_timer_start(&c->timer, lr__http_on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* ---- requests ------------------------------------------------------------- */

static size_t lr__http_on_body(char *data, size_t size, size_t n, void *userp) {
  lr_http_request *r = userp;
  size_t len = size * n;
  if (r->on_data) {
    long status = 0;
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
    if (r->on_data(r->ud, status, data, len) != 0) {
      r->stopped = true;
      return 0; /* curl stops with CURLE_WRITE_ERROR */
    }
    return len;
  }
  if (r->max_bytes && len > r->max_bytes - r->body.len) {
    r->too_big = true;
    return 0; /* curl stops with CURLE_WRITE_ERROR */
  }
  lr__buf_append(&r->body, data, len);
  return len;
}

static bool lr__http_blank(char c) {
  return c == ' ' || c == '\t';
}

static size_t lr__http_on_header(char *data, size_t size, size_t n, void *userp) {
  lr_http_request *r = userp;
  size_t len = size * n;
  const char *line = data;
  while (len && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
  if (len == 0) return size * n;
  /* A status line starts the headers of another response (a 100 Continue,
   * a followed redirect): only the last response's headers are kept. */
  if (len >= 5 && memcmp(line, "HTTP/", 5) == 0) {
    r->hbytes.len = 0;
    r->nhspans = 0;
    return size * n;
  }
  if (lr__http_blank(line[0])) {
    /* An obsolete folded line continues the previous value. */
    if (r->nhspans) {
      lr_http_hspan *h = &r->hspans[r->nhspans - 1];
      while (len && lr__http_blank(line[0])) line++, len--;
      r->hbytes.len--; /* the value's NUL; it is the last thing in the buffer */
      lr__buf_append_char(&r->hbytes, ' ');
      lr__buf_append(&r->hbytes, line, len);
      lr__buf_append_char(&r->hbytes, '\0');
      h->value_len += 1 + len;
    }
    return size * n;
  }
  const char *colon = memchr(line, ':', len);
  if (!colon || colon == line) return size * n; /* not a header: ignored */
  size_t name_len = (size_t)(colon - line);
  const char *value = colon + 1;
  size_t value_len = len - name_len - 1;
  while (value_len && lr__http_blank(value[0])) value++, value_len--;
  while (value_len && lr__http_blank(value[value_len - 1])) value_len--;
  if (r->nhspans == r->hspans_cap) {
    r->hspans_cap = r->hspans_cap ? r->hspans_cap * 2 : 16;
    r->hspans = lr__xrealloc(r->hspans, r->hspans_cap * sizeof *r->hspans);
  }
  lr_http_hspan *h = &r->hspans[r->nhspans++];
  h->name_off = r->hbytes.len;
  h->name_len = name_len;
  lr__buf_append(&r->hbytes, line, name_len);
  lr__buf_append_char(&r->hbytes, '\0');
  h->value_off = r->hbytes.len;
  h->value_len = value_len;
  lr__buf_append(&r->hbytes, value, value_len);
  lr__buf_append_char(&r->hbytes, '\0');
  return size * n;
}

static void lr__http_request_free(lr_http_request *r) {
  if (r->easy) curl_easy_cleanup(r->easy);
  if (r->url) curl_url_cleanup(r->url);
  curl_slist_free_all(r->headers);
  lr__buf_free(&r->body);
  lr__buf_free(&r->hbytes);
  free(r->hspans);
  free(r);
}

/* Takes r out of the client's list and out of the multi handle. */
static void lr__http_detach(lr_http_request *r) {
  lr_http_client *c = r->client;
  if (r->prev)
    r->prev->next = r->next;
  else
    c->requests = r->next;
  if (r->next) r->next->prev = r->prev;
  r->prev = r->next = NULL;
  curl_multi_remove_handle(c->multi, r->easy);
}

static void lr__http_finish(lr_http_request *r, CURLcode rc) {
  lr__http_detach(r);
  r->in_callback = true;
  if (rc == CURLE_OK) {
    lr_http_header *headers = lr__xcalloc(r->nhspans ? r->nhspans : 1, sizeof *headers);
    for (size_t i = 0; i < r->nhspans; i++) {
      headers[i].name = r->hbytes.data + r->hspans[i].name_off;
      headers[i].name_len = r->hspans[i].name_len;
      headers[i].value = r->hbytes.data + r->hspans[i].value_off;
      headers[i].value_len = r->hspans[i].value_len;
    }
    lr_http_response res = {.headers = headers, .nheaders = r->nhspans};
    curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &res.status);
    res.body = r->body.data ? r->body.data : "";
    res.body_len = r->body.len;
    r->cb(r->ud, &res, NULL);
    free(headers);
  } else {
    char msg[LR_ERR_MAX];
    lr_http_error e = {.code = lr__http_classify(rc), .message = msg};
    if (rc == CURLE_OPERATION_TIMEDOUT && r->timeout_ms) {
      lr__errf(msg, "request timed out after %llu ms", (unsigned long long)r->timeout_ms);
    } else if (rc == CURLE_WRITE_ERROR && r->stopped) {
      lr__errf(msg, "the receiver stopped the response");
    } else if ((rc == CURLE_WRITE_ERROR && r->too_big) || rc == CURLE_FILESIZE_EXCEEDED) {
      e.code = LR_HTTP_ETOOBIG;
      lr__errf(msg, "response exceeds %zu bytes", r->max_bytes);
    } else {
      lr__errf(msg, "%s", r->errbuf[0] ? r->errbuf : curl_easy_strerror(rc));
    }
    r->cb(r->ud, NULL, &e);
  }
  lr__http_request_free(r);
}

/* Runs the callbacks of finished transfers; stops if one closes the client. */
static void lr__http_drain(lr_http_client *c) {
  CURLMsg *msg;
  int left;
  while (!c->closing && (msg = curl_multi_info_read(c->multi, &left))) {
    if (msg->msg != CURLMSG_DONE) continue;
    char *priv = NULL;
    CURLcode rc = msg->data.result; /* msg is gone once the handle is removed */
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
    lr__http_finish((lr_http_request *)priv, rc);
  }
}

/* RFC 9110's tchar: what a method or a header name is made of. */
static bool lr__http_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool lr__http_is_token(const char *s) {
  if (!s || !*s) return false;
  for (; *s; s++)
    if (!lr__http_tchar(*s)) return false;
  return true;
}

/* A "Name: value" or "Name;" line: a token name, no CR or LF anywhere. */
static bool lr__http_header_ok(const char *line, bool *is_expect) {
  if (!line) return false;
  size_t name_len = strcspn(line, ":;");
  if (name_len == 0 || !line[name_len]) return false;
  if (line[name_len] == ';' && line[name_len + 1]) return false;
  for (size_t i = 0; i < name_len; i++)
    if (!lr__http_tchar(line[i])) return false;
  if (strpbrk(line, "\r\n")) return false;
  *is_expect = name_len == 6 && strncasecmp(line, "expect", 6) == 0;
  return true;
}

lr_http_request *lr__http_start(lr_http_client *c, const lr_http_options *o, lr_http_cb cb, void *ud,
                                char err[LR_ERR_MAX]) {
  if (c->closing) {
    lr__errf(err, "the HTTP client is closing");
    return NULL;
  }
  const char *method = o->method ? o->method : "GET";
  if (!lr__http_is_token(method) || strlen(method) > 64) {
    lr__errf(err, "invalid HTTP method \"%.64s\"", method);
    return NULL;
  }
  lr_http_url parts;
  CURLU *url = lr__http_parse(o->url, &parts, err);
  if (!url) return NULL;

  lr_http_request *r = lr__xcalloc(1, sizeof *r);
  r->client = c;
  r->url = url;
  r->cb = cb;
  r->ud = ud;
  r->timeout_ms = o->timeout_ms;
  r->max_bytes = o->max_response_bytes;
  r->on_data = o->on_data;
  bool has_expect = false;
  for (size_t i = 0; i < o->nheaders; i++) {
    bool expect = false;
    if (!lr__http_header_ok(o->headers[i], &expect)) {
      lr__errf(err, "invalid request header \"%.100s\": want \"Name: value\" without CR or LF",
               o->headers[i] ? o->headers[i] : "(null)");
      lr__http_request_free(r);
      return NULL;
    }
    has_expect |= expect;
    r->headers = curl_slist_append(r->headers, o->headers[i]);
    if (!r->headers) abort();
  }
  /* curl would otherwise wait up to a second for a "100 Continue" before
   * sending a large body, which many servers never send. */
  if (!has_expect && !(r->headers = curl_slist_append(r->headers, "Expect:"))) abort();

  CURL *e = r->easy = curl_easy_init();
  if (!e) {
    lr__errf(err, "cannot create a libcurl handle");
    lr__http_request_free(r);
    return NULL;
  }
  CURLcode rc = CURLE_OK;
#define LR_SET(opt, val)                                        \
  do {                                                          \
    if (rc == CURLE_OK) rc = curl_easy_setopt(e, opt, val);     \
  } while (0)
  LR_SET(CURLOPT_CURLU, url);
  LR_SET(CURLOPT_PROTOCOLS_STR, "http,https");
  LR_SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  LR_SET(CURLOPT_FOLLOWLOCATION, o->max_redirects > 0 ? 1L : 0L);
  if (o->max_redirects > 0) LR_SET(CURLOPT_MAXREDIRS, o->max_redirects);
  /* No proxy from the environment: the caller's host checks must hold for
   * the connection that is actually made. */
  LR_SET(CURLOPT_PROXY, "");
  LR_SET(CURLOPT_NOSIGNAL, 1L);
  LR_SET(CURLOPT_PRIVATE, (char *)r);
  LR_SET(CURLOPT_ERRORBUFFER, r->errbuf);
  LR_SET(CURLOPT_WRITEFUNCTION, lr__http_on_body);
  LR_SET(CURLOPT_WRITEDATA, r);
  LR_SET(CURLOPT_HEADERFUNCTION, lr__http_on_header);
  LR_SET(CURLOPT_HEADERDATA, r);
  LR_SET(CURLOPT_HTTPHEADER, r->headers);
  if (o->timeout_ms) LR_SET(CURLOPT_TIMEOUT_MS, o->timeout_ms > LONG_MAX ? LONG_MAX : (long)o->timeout_ms);
  bool head = strcmp(method, "HEAD") == 0;
  if (head && o->body) {
    /* A HEAD response has no body to wait for; sending one makes curl wait
     * for the Content-Length it announces. */
    lr__errf(err, "a HEAD request cannot have a body");
    lr__http_request_free(r);
    return NULL;
  }
  if (o->max_response_bytes && !head)
    LR_SET(CURLOPT_MAXFILESIZE_LARGE,
           (curl_off_t)(o->max_response_bytes > INT64_MAX ? INT64_MAX : o->max_response_bytes));
  if (o->body || strcmp(method, "POST") == 0) {
    /* The size first, so a body with NUL bytes is copied whole. A POST
     * without a body sends an empty one rather than reading stdin. */
    LR_SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(o->body ? o->body_len : 0));
    LR_SET(CURLOPT_COPYPOSTFIELDS, o->body ? o->body : "");
    if (strcmp(method, "POST") != 0) LR_SET(CURLOPT_CUSTOMREQUEST, method);
  } else if (head) {
    LR_SET(CURLOPT_NOBODY, 1L);
  } else if (strcmp(method, "GET") != 0) {
    LR_SET(CURLOPT_CUSTOMREQUEST, method);
  }
#undef LR_SET
  if (rc != CURLE_OK) {
    lr__errf(err, "cannot set up the request: %s", curl_easy_strerror(rc));
    lr__http_request_free(r);
    return NULL;
  }
  CURLMcode mc = curl_multi_add_handle(c->multi, e);
  if (mc != CURLM_OK) {
    lr__errf(err, "cannot start the request: %s", curl_multi_strerror(mc));
    lr__http_request_free(r);
    return NULL;
  }
  r->next = c->requests;
  if (c->requests) c->requests->prev = r;
  c->requests = r;
  return r;
}

void lr__http_cancel(lr_http_request *r) {
  if (!r || r->in_callback) return;
  lr__http_detach(r);
  lr__http_request_free(r);
}

/* ---- the client ------------------------------------------------------------ */

lr_http_client *lr__http_client_new(uv_loop_t *loop, char err[LR_ERR_MAX]) {
  if (lr__http_global_init(err) != 0) return NULL;
  lr_http_client *c = lr__xcalloc(1, sizeof *c);
  c->loop = loop;
  c->multi = curl_multi_init();
  if (!c->multi) {
    lr__errf(err, "cannot create a libcurl multi handle");
    free(c);
    return NULL;
  }
  uv_timer_init(loop, &c->timer);
  c->timer.data = c;
  c->open_handles = 1;
  curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, lr__http_on_socket);
  curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
  curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, lr__http_on_timer_change);
  curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
  return c;
}

static void lr__http_on_timer_closed(uv_handle_t *h) {
  lr__http_handle_closed(h->data);
}

void lr__http_client_close(lr_http_client *c, lr_http_closed_cb on_closed, void *ud) {
  if (!c || c->closing) return;
  c->closing = true;
  c->on_closed = on_closed;
  c->closed_ud = ud;
  while (c->requests) {
    lr_http_request *r = c->requests;
    lr__http_detach(r);
    lr__http_request_free(r);
  }
  /* Closing the cached connections reports their sockets as removed; any
   * socket curl did not report is closed after it. */
  curl_multi_cleanup(c->multi);
  c->multi = NULL;
  while (c->sockets) lr__http_socket_close(c->sockets);
  uv_timer_stop(&c->timer);
  uv_close((uv_handle_t *)&c->timer, lr__http_on_timer_closed);
}
