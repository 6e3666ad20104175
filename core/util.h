/* Small helpers every engine file uses: growable byte buffers, error text,
 * UTF-8 checks. Only libc here. */ 
#ifndef LR_UTIL_H
#define LR_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

/* Room for one error message; engine functions that can fail take a
 * `char err[LR_ERR_MAX]` and fill it with one readable line. */
#define LR_ERR_MAX 512

/* The largest safe integer of JavaScript, 2^53 - 1. */
#define LR_MAX_SAFE_INTEGER 9007199254740991.0

/* A growable byte buffer. `data` is always NUL-terminated once anything has
 * been appended (the NUL is not counted in len). The buffer owns `data`. */
typedef struct lr_buf {
  char *data;
  size_t len;
  size_t cap;
} lr_buf;

/* Makes sure at least `extra` more bytes fit; aborts on out of memory. */
void lr__buf_reserve(lr_buf *b, size_t extra);
void lr__buf_append(lr_buf *b, const void *data, size_t len);
void lr__buf_append_str(lr_buf *b, const char *s);
void lr__buf_append_char(lr_buf *b, char c);
/* Hands `data` to the caller (who frees it) and leaves the buffer empty. */
char *lr__buf_steal(lr_buf *b, size_t *len);
void lr__buf_free(lr_buf *b);

/* malloc/realloc/strdup that abort on out of memory: the engine treats an
 * allocation failure as fatal, as libuv and Lua's own allocator users do. */
void *lr__xmalloc(size_t n);
void *lr__xcalloc(size_t n, size_t size);
void *lr__xrealloc(void *p, size_t n);
char *lr__xstrdup(const char *s);
char *lr__xmemdup(const void *p, size_t n); /* adds a NUL after n bytes */

/* printf into err (LR_ERR_MAX bytes); returns -1 so callers can
 * `return lr__errf(err, ...)`. err may be NULL. */
int lr__errf(char *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Checks that s[0..len) is UTF-8. With allow_surrogates, a lone surrogate
 * encoded as three bytes (ED A0..BF xx, "WTF-8") is accepted: that is how the
 * engine keeps JavaScript strings with lone surrogates lossless. */
bool lr__utf8_valid(const char *s, size_t len, bool allow_surrogates);

/* Length of the longest prefix of s[0..len) that is valid UTF-8 (strict: no
 * surrogates); len when all of it is. */
size_t lr__utf8_prefix_valid(const char *s, size_t len);

/* Length of the longest prefix of s[0..len) that is at most max bytes and
 * ends on a code point boundary. */
size_t lr__utf8_prefix(const char *s, size_t len, size_t max);

/* True while a process that is not a zombie is in process group pgid (the
 * sandbox's and the strip helper's ends are awaited with it). */
bool lr__group_alive(int pgid);

/* Text of a byte stream read in chunks (a pipe): each chunk becomes complete
 * code points, invalid bytes U+FFFD (per maximal subpart, as TextDecoder
 * does); a sequence cut by the chunk's end waits for the next one. */
typedef struct lr_utf8_stream {
  unsigned char pend[4];
  size_t npend;
} lr_utf8_stream;

/* Appends the text of data[0..len) to out; with end, nothing is kept back. */
void lr__utf8_stream_feed(lr_utf8_stream *s, const char *data, size_t len, bool end, lr_buf *out);

#endif
