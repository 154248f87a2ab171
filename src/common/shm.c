/* shm.c - the /dev/shm segments of Open MPI ranks (see shm.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <string.h>

#include "shm.h"

int shm_prefix_of_maps_line (const char *line, char *buf, size_t size)
{
    const char *p = strstr (line, " /dev/shm/"), *dot = NULL;
    size_t len, dots = 0;

    if (!p)
        return 0;
    p += strlen (" /dev/shm/");
    len = strcspn (p, " \n");
    for (size_t i = 0; i < len; i++) {
        if (p[i] == '/')
            return 0;
        if (p[i] == '.') {
            dots++;
            dot = p + i;
        }
    }
    /* the prefix: up to the last dot, which must not be the first byte */
    if (!dot || dot == p || dots < 4 || (size_t)(dot - p) + 2 > size)
        return 0;
    memcpy (buf, p, (size_t)(dot - p) + 1);
    buf[dot - p + 1] = '\0';
    return 1;
}
