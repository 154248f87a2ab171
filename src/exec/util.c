/* util.c - helpers of the agent that the other components do not need */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util.h"

const char *host_name (void)
{
    static char name[256];

    if (name[0] == '\0') {
        if (gethostname (name, sizeof (name) - 1) < 0)
            strcpy (name, "localhost");
        name[sizeof (name) - 1] = '\0';
    }
    return name;
}
