/* Connect envelopes: a streaming reader and the writer. */
#include "connect.h"

#include <string.h>

void lr__connect_reader_init(lr_connect_reader *r, size_t max_message) {
  memset(r, 0, sizeof *r);
  r->max_message = max_message;
}

void lr__connect_reader_free(lr_connect_reader *r) { lr__buf_free(&r->pending); }

static size_t lr__be32(const unsigned char *p) {
  return (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | (size_t)p[3];
}

/* Walks the complete envelopes of p[0..n); returns how many bytes they
 * took, or SIZE_MAX when one is refused or cb stopped (*rc says which). */
static size_t lr__connect_walk(lr_connect_reader *r, const char *p, size_t n, lr_connect_cb cb, void *ud,
                               int *rc, char *err) {
  size_t at = 0;
  while (n - at >= 5) {
    const unsigned char *h = (const unsigned char *)p + at;
    size_t len = lr__be32(h + 1);
    if (len > r->max_message) {
      r->failed = true;
      *rc = lr__errf(err, "an envelope of %zu bytes is over the limit of %zu", len, r->max_message);
      return SIZE_MAX;
    }
    if (n - at - 5 < len) break;
    if (cb(ud, h[0], p + at + 5, len) != 0) {
      *rc = 1;
      return SIZE_MAX;
    }
    at += 5 + len;
  }
  return at;
}

int lr__connect_feed(lr_connect_reader *r, const char *data, size_t len, lr_connect_cb cb, void *ud,
                     char err[LR_ERR_MAX]) {
  if (r->failed) return lr__errf(err, "the stream was already refused");
  int rc = 0;
  if (r->pending.len == 0) {
    /* The common case: whole envelopes straight from the read. */
    size_t used = lr__connect_walk(r, data, len, cb, ud, &rc, err);
    if (used == SIZE_MAX) return rc;
    lr__buf_append(&r->pending, data + used, len - used);
    return 0;
  }
  lr__buf_append(&r->pending, data, len);
  size_t used = lr__connect_walk(r, r->pending.data, r->pending.len, cb, ud, &rc, err);
  if (used == SIZE_MAX) return rc;
  memmove(r->pending.data, r->pending.data + used, r->pending.len - used);
  r->pending.len -= used;
  if (r->pending.len == 0 && r->pending.cap > ((size_t)1 << 20)) lr__buf_free(&r->pending);
  return 0;
}

bool lr__connect_at_boundary(const lr_connect_reader *r) { return !r->failed && r->pending.len == 0; }

void lr__connect_envelope(lr_buf *out, unsigned flags, const char *message, size_t len) {
  unsigned char h[5] = {(unsigned char)flags, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                        (unsigned char)(len >> 8), (unsigned char)len};
  lr__buf_append(out, h, 5);
  lr__buf_append(out, message, len);
}
