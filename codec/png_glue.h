/* png_glue.h — what the PNG reader (png.c) and writer (png_write.c) of libl3
 * share with libpng: its error and warning callbacks (errors longjmp back to
 * the caller's setjmp, nothing is printed) and the host's byte order. */
#ifndef L3_PNG_GLUE_H
#define L3_PNG_GLUE_H

#include <png.h>
#include <stdint.h>
#include <string.h>

static inline int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

static inline void silent_warning(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

static inline void error_longjmp(png_structp png, png_const_charp msg)
{
    (void)msg;
    png_longjmp(png, 1);
}

#endif
