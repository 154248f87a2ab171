/* util.h - helpers of the agent; the shared ones are in src/common */
#ifndef ELASTIC_EXEC_UTIL_H
#define ELASTIC_EXEC_UTIL_H

#include <stddef.h>

#include "common/clock.h"
#include "common/error.h"
#include "common/file.h"
#include "common/parse.h"
#include "common/signame.h"

/* The host's name (cached). */
const char *host_name (void);

#endif /* ELASTIC_EXEC_UTIL_H */
