/* Envelopes of the Connect protocol's streaming calls (connectrpc.com/docs/
 * protocol): 1 flag byte, a 4-byte big-endian length, then the message.
 * Flag 2 marks the end-of-stream message. How E2B's envd streams a
 * process's events (../shared/E2B.md). No libuv and no libcurl here. */
#ifndef LR_CONNECT_H
#define LR_CONNECT_H

#include "util.h"

#define LR_CONNECT_END_STREAM 2

/* A streaming reader: envelopes may straddle reads. */
typedef struct lr_connect_reader {
  size_t max_message; /* a longer envelope is refused */
  lr_buf pending;
  bool failed;
} lr_connect_reader;

/* Called for each complete envelope; return nonzero to stop reading. */
typedef int (*lr_connect_cb)(void *ud, unsigned flags, const char *message, size_t len);

void lr__connect_reader_init(lr_connect_reader *r, size_t max_message);
void lr__connect_reader_free(lr_connect_reader *r);

/* Feeds bytes. Returns 0, 1 when cb asked to stop, or -1 with err set (an
 * envelope over max_message; the reader then refuses everything). */
int lr__connect_feed(lr_connect_reader *r, const char *data, size_t len, lr_connect_cb cb, void *ud,
                     char err[LR_ERR_MAX]);

/* True when the stream stopped between envelopes. */
bool lr__connect_at_boundary(const lr_connect_reader *r);

/* Appends one envelope around message[0..len) to out. */
void lr__connect_envelope(lr_buf *out, unsigned flags, const char *message, size_t len);

#endif
