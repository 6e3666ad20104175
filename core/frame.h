/* Frames of SPEC §7: base64(UTF-8(JSON)) + "\n", one message per line. */
#ifndef LR_FRAME_H
#define LR_FRAME_H

#include "json.h"

/* Base64 length of n bytes (with padding). */
size_t lr__base64_len(size_t n);

/* Appends the base64 of data[0..len) to out. */
void lr__base64_append(lr_buf *out, const void *data, size_t len);

/* Appends the bytes of the standard base64 text s[0..n) (padded) to out;
 * refuses anything else, appending nothing. */
int lr__base64_decode_append(lr_buf *out, const char *s, size_t n, char err[LR_ERR_MAX]);

/* A streaming decoder. It holds the pending partial line. */
typedef struct lr_frame_decoder {
  size_t max_frame;   /* largest decoded frame, in bytes (maxFrameBytes) */
  size_t max_line;    /* lr__base64_len(max_frame) */
  lr_buf line;        /* the pending, not yet terminated line */
  bool failed;        /* once a refusal happened, everything is refused */
  char token[64];     /* when token_len > 0, every line starts with it (the
                         sandbox's channel token), then the frame */
  size_t token_len;
} lr_frame_decoder;

void lr__frame_decoder_init(lr_frame_decoder *d, size_t max_frame);
void lr__frame_decoder_free(lr_frame_decoder *d);

/* From now on every line must start with token (at most 63 bytes); a line
 * without it is refused. */
void lr__frame_decoder_set_token(lr_frame_decoder *d, const char *token, size_t len);

/* Called with each decoded message; takes ownership of *msg (the callee
 * frees it or moves from it). Return nonzero to stop feeding. */
typedef int (*lr_frame_cb)(void *ud, lr_json *msg);

/* Feeds bytes read from the stream. Every complete line is decoded and
 * passed to cb in order. Refusals (each a bridge failure): a byte outside
 * printable ASCII and "\n", a pending line longer than max_line, an empty
 * line, malformed base64 (alphabet, length, padding), decoded bytes over
 * max_frame, invalid UTF-8, invalid JSON. Returns 0, or -1 with err set (and
 * the decoder failed for good), or 1 when cb asked to stop. */
int lr__frame_feed(lr_frame_decoder *d, const char *data, size_t len,
                   lr_frame_cb cb, void *ud, char err[LR_ERR_MAX]);

/* The stream ended: refuses a stream that ends mid-frame. */
int lr__frame_finish(lr_frame_decoder *d, char err[LR_ERR_MAX]);

/* Appends the frame of the JSON text json[0..len) to out. Refuses (appending
 * nothing) when len is over max_frame. */
int lr__frame_encode_text(const char *json, size_t len, size_t max_frame,
                          lr_buf *out, char err[LR_ERR_MAX]);

/* Appends the frame of msg to out; refuses (appending nothing) a message
 * whose JSON text is over max_frame. */
int lr__frame_encode(const lr_json *msg, size_t max_frame, lr_buf *out,
                     char err[LR_ERR_MAX]);

#endif
