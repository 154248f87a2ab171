/* hostlist.h - Slurm's compact host lists and task-count lists
 *
 * Pure parsing, shared by elastic-mpirun (its allocation) and elastic-exec
 * (the job map, jobmap.h): a host list as Slurm writes it in
 * SLURM_JOB_NODELIST / SLURM_STEP_NODELIST ("n[1-3,5],gpu07",
 * "rack[1-2]-n[01-02]": ranges keep their zero padding, several bracket
 * groups in one name expand in order, the last one fastest), and a count
 * list as in SLURM_TASKS_PER_NODE ("2(x3),1").
 *
 * Every function that can fail returns -1 and writes one line into err
 * naming the bad value and what is accepted.
 */
#ifndef ELASTIC_COMMON_HOSTLIST_H
#define ELASTIC_COMMON_HOSTLIST_H

#include <stddef.h>

#include "error.h"

/* The most names hostlist_expand produces, and the most entries of a count
 * list anybody here expands. */
#define HOSTLIST_MAX 1000000

/* Expand a Slurm host list into *names (a malloc'ed array of n malloc'ed
 * strings followed by NULL; free with hostlist_names_free).  Names keep
 * their order and repeats.  Returns n (>= 1), or -1 with err for an empty
 * list, unbalanced brackets, a bad range ("5-3", "a-b") or more than max
 * names (0: HOSTLIST_MAX). */
int hostlist_expand (const char *list, size_t max, char ***names, elastic_error_t *err);

/* Free an array from hostlist_expand (NULL-safe). */
void hostlist_names_free (char **names);

/* Expand a Slurm count list such as SLURM_TASKS_PER_NODE "2(x3),1" into
 * counts[0..n-1].  Returns how many counts it holds, or -1 with err (also
 * when it holds more than n). */
int slurm_expand_counts (const char *s, int *counts, int n, elastic_error_t *err);

#endif /* ELASTIC_COMMON_HOSTLIST_H */
