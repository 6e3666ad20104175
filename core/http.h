/* An HTTP client on the caller's libuv loop: libcurl's multi interface driven
 * by one uv_timer_t for the multi handle and one uv_poll_t per socket (curl's
 * docs/examples/multi-uv.c). No Lua here; core/lua_http.c wraps it.
 *
 * Rules of use: every function is called on the loop's thread. A request's
 * callback runs exactly once, unless the request is cancelled first or its
 * client is closed first; then it never runs. A request handle is invalid
 * once its callback has returned or lr__http_cancel has returned. */
#ifndef LR_HTTP_H
#define LR_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "util.h"

typedef struct lr_http_client lr_http_client;
typedef struct lr_http_request lr_http_request;

/* Why a request failed, from one table: X(name, what). The name with an "E"
 * in front ("ETIMEDOUT") is what lr__http_err_name returns. */
#define LR_HTTP_ERRNO_MAP(X)                                       \
  X(TIMEDOUT, "the request took longer than its timeout")          \
  X(TOOBIG, "the response body is larger than allowed")            \
  X(CONNREFUSED, "the server refused or did not take the connection") \
  X(RESOLVE, "the host name could not be resolved")                \
  X(TLS, "the TLS handshake or the certificate check failed")      \
  X(PROTO, "the server's answer is not valid HTTP")                \
  X(IO, "the connection failed while sending or receiving")

typedef enum lr_http_errno {
  LR_HTTP_OK = 0,
#define LR_HTTP_ERRNO_ENUM(name, what) LR_HTTP_E##name,
  LR_HTTP_ERRNO_MAP(LR_HTTP_ERRNO_ENUM)
#undef LR_HTTP_ERRNO_ENUM
} lr_http_errno;

/* "ETIMEDOUT", ... ("EUNKNOWN" for a code outside the table). */
const char *lr__http_err_name(int code);
/* The table's sentence for code. */
const char *lr__http_err_what(int code);

typedef struct lr_http_options {
  const char *method; /* NULL means "GET"; an HTTP token, sent as given */
  const char *url;    /* http:// or https:// only */
  /* Request headers as "Name: value" lines; "Name;" sends an empty value.
   * Lines with CR, LF or no name are refused. "Expect:" is added unless a
   * line sets it, so a large body is not held back waiting for a 100. */
  const char *const *headers;
  size_t nheaders;
  const char *body; /* NULL: no body (POST still sends an empty one) */
  size_t body_len;
  uint64_t timeout_ms;       /* whole transfer; 0 = no limit */
  size_t max_response_bytes; /* body limit; 0 = no limit */
  /* Redirects are not followed unless this is > 0: a 3xx comes back as it
   * is, so the caller can check the Location against its own rules. */
  long max_redirects;
  /* A streamed response: when set, the body is not kept but handed over
   * piece by piece as it arrives (status is the response's status code) and
   * the final callback sees an empty body. It runs inside libcurl: it must
   * not start, cancel or close anything of this client. Returning nonzero
   * stops the transfer, which then ends with an LR_HTTP_EIO error. */
  int (*on_data)(void *ud, long status, const char *data, size_t len);
} lr_http_options;

typedef struct lr_http_header {
  const char *name; /* as the server sent it; NUL-terminated */
  size_t name_len;
  const char *value; /* surrounding blanks trimmed; NUL-terminated */
  size_t value_len;
} lr_http_header;

/* What the callback gets; everything is owned by the client and valid only
 * during the callback. */
typedef struct lr_http_response {
  long status;
  const lr_http_header *headers; /* in order, repeated names kept apart */
  size_t nheaders;
  const char *body; /* NUL-terminated for convenience (not counted) */
  size_t body_len;
} lr_http_response;

typedef struct lr_http_error {
  lr_http_errno code;
  const char *message; /* one line, e.g. "response exceeds 1000 bytes" */
} lr_http_error;

/* Exactly one of res and error is non-NULL. The callback may start and
 * cancel other requests and may close the client. */
typedef void (*lr_http_cb)(void *ud, const lr_http_response *res, const lr_http_error *error);
typedef void (*lr_http_closed_cb)(void *ud);

/* The parts of a URL the client would connect to, parsed by the same parser
 * the client uses (so a host check cannot disagree with the connection). */
typedef struct lr_http_url {
  char scheme[8]; /* "http" or "https" */
  char host[256]; /* lowercased; an IPv6 address keeps its brackets */
  int port;       /* the default port of the scheme when none is given */
} lr_http_url;

/* Fills out from url; refuses what is not an http(s) URL with a host. */
int lr__http_url_parse(const char *url, lr_http_url *out, char err[LR_ERR_MAX]);

/* A client on loop (initialises libcurl the first time). NULL only if
 * libcurl cannot be initialised, with the reason in err. */
lr_http_client *lr__http_client_new(uv_loop_t *loop, char err[LR_ERR_MAX]);

/* Starts a request; cb(ud, ...) runs later, never from inside this call.
 * Copies what it needs of opts. NULL with a message in err for a bad option
 * (URL, method, header) or a closing client; then cb never runs. */
lr_http_request *lr__http_start(lr_http_client *client, const lr_http_options *opts, lr_http_cb cb, void *ud,
                                char err[LR_ERR_MAX]);

/* Stops a request in flight and frees it; its callback will not run. Called
 * on a request whose callback is running, it does nothing. */
void lr__http_cancel(lr_http_request *req);

/* Cancels every request (no callback runs), closes every handle and frees
 * the client; on_closed(ud) runs once the last handle has closed, from the
 * loop, never from inside this call. A second call before then does
 * nothing; after on_closed the client is gone. */
void lr__http_client_close(lr_http_client *client, lr_http_closed_cb on_closed, void *ud);

/* Releases libcurl's global state. Only for a process that is about to exit
 * and has closed every client (tests use it to keep valgrind quiet). */
void lr__http_global_cleanup(void);

#endif
