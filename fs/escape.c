/* escape.c — names from the source tree made safe for a log line or a JSON
 * string: control characters, DEL, backslashes (and quotes in JSON) escaped,
 * bytes that are not UTF-8 written as \xNN, valid UTF-8 kept as it is. A
 * name with a newline can then not forge a log line, and one with terminal
 * escape codes cannot reach the operator's terminal. */
#include <stdio.h>
#include <string.h>

#include "l3fs.h"

/* Length of the valid UTF-8 sequence at s (1-4), or 0 when it is not one
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    if (c < 0x80)
        return 1;
    size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (n == 0 || c > 0xf4)
        return 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    if (n == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0)))
        return 0; /* overlong, surrogate */
    if (n == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90)))
        return 0; /* overlong, past U+10FFFF */
    return n;
}

size_t l3fs_escape(const char *in, int json, char *out, size_t cap)
{
    size_t o = 0;
#define PUT(...)                                                            \
    do {                                                                    \
        int k_ = snprintf(out + o, o < cap ? cap - o : 0, __VA_ARGS__);      \
        o += k_ > 0 ? (size_t)k_ : 0;                                       \
    } while (0)
    for (const unsigned char *s = (const unsigned char *)(in ? in : ""); *s;) {
        unsigned c = *s;
        size_t n = utf8_len(s);
        if (c == '\\' || (json && c == '"'))
            PUT("\\%c", c);
        else if (c == '\n')
            PUT("\\n");
        else if (c == '\t')
            PUT("\\t");
        else if (c == '\r')
            PUT("\\r");
        else if (c < 0x20 || c == 0x7f)
            PUT(json ? "\\u%04x" : "\\x%02x", c);
        else if (n == 0)
            PUT(json ? "\\\\x%02x" : "\\x%02x", c); /* not UTF-8: the byte */
        else
            PUT("%.*s", (int)n, (const char *)s);
        s += n ? n : 1;
    }
#undef PUT
    if (cap)
        out[o < cap ? o : cap - 1] = '\0';
    return o;
}
