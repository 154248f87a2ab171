/* stdmap.h - torchrun's --redirects/--tee values: "3" or "0:3,1:0"
 *
 * 0 = none, 1 = stdout, 2 = stderr, 3 = both; a map gives a value per local
 * rank and NONE to ranks it does not name.
 */
#ifndef ELASTIC_EXEC_STDMAP_H
#define ELASTIC_EXEC_STDMAP_H

#include <stddef.h>

#include "common/error.h"

#define STD_NONE 0
#define STD_OUT  1
#define STD_ERR  2
#define STD_ALL  3

#define STDMAP_MAX 1024

struct stdmap {
    int is_map;
    int value; /* when !is_map */
    int n;
    int rank[STDMAP_MAX];
    int val[STDMAP_MAX];
};

/* Parse s for option `what`.  Returns 0, or -1 with one line in err. */
int stdmap_parse (const char *what,
                  const char *s,
                  struct stdmap *m,
                  elastic_error_t *err);

/* The value for a local rank. */
int stdmap_get (const struct stdmap *m, int local_rank);

/* Format back to text. */
void stdmap_format (const struct stdmap *m, char *buf, size_t size);

/* Parse a comma-separated list of non-negative integers ("0,1,3") into a
 * malloc'ed array.  Returns the count, or -1 with one line in err. */
int ranklist_parse (const char *what, const char *s, int **out, elastic_error_t *err);

#endif /* ELASTIC_EXEC_STDMAP_H */
