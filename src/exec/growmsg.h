/* growmsg.h - the messages members of a mesh exchange about growing into
 * new processes (pmix/pmix_grow.c, doc/mesh.md "Growth into new processes
 * across the mesh")
 *
 * Each is a compact JSON object carried by a mesh broadcast (authenticated
 * by the mesh, but decoded as outside bytes: every field is checked, and a
 * message that does not decode is dropped with the reason):
 *   room       MESH_BCAST_ROOM       {"seq":N,"free":F[,"host":H]}: a
 *                                    member's free slots, its N-th saying
 *                                    (N >= 1); a member that joined the
 *                                    running job names its node (H)
 *   spawn      MESH_BCAST_SPAWN      {"attempt","node","k","base","pns",
 *                                    "prank","argv","env","requestor",
 *                                    "wdir"[,"joined"]}: a spawn placed on a
 *                                    member; "joined": true when it is
 *                                    told again, to a member admitted
 *                                    later, and had reached its parents
 *   end        MESH_BCAST_SPAWN_END  {"ns","ok","why"}: it joined or failed
 * Encoders return malloc'ed text (NULL: out of memory); decoders return 0,
 * or -1 with why (one line) filled.
 */
#ifndef ELASTIC_EXEC_GROWMSG_H
#define ELASTIC_EXEC_GROWMSG_H

#include <stddef.h>

#define GROWMSG_NS_MAX   255 /* PMIx's namespace length */
#define GROWMSG_ARGS_MAX 4096
#define GROWMSG_HOST_MAX 255

struct growmsg_spawn {
    int attempt;                  /* the namespace's number (>= 1) */
    int node;                     /* the member the processes run on (< nmembers) */
    int k;                        /* how many (1..65535) */
    int base;                     /* the global rank of the first (>= 0) */
    char pns[GROWMSG_NS_MAX + 1]; /* the parents' namespace */
    int prank;                    /* the requestor's rank in it */
    char **argv;                  /* NULL-terminated, at least the program */
    char **env;                   /* NULL-terminated "NAME=value" */
    char requestor[300];          /* "nspace:rank", for messages */
    char *wdir;                   /* NULL: none */
    int joined;                   /* told again to a newcomer: it had joined */
};

/* host: NULL or "" for none; decoded into host ("" when absent). */
char *growmsg_room_encode (unsigned long long seq, int free_slots, const char *host);
int growmsg_room_decode (const void *data,
                         size_t len,
                         unsigned long long *seq,
                         int *free_slots,
                         char *host,
                         size_t hostsz,
                         char *why,
                         size_t whysz);

char *growmsg_spawn_encode (const struct growmsg_spawn *s);
/* nmembers: the mesh's member slots (node must be below). */
int growmsg_spawn_decode (const void *data,
                          size_t len,
                          int nmembers,
                          struct growmsg_spawn *s,
                          char *why,
                          size_t whysz);
/* Free what a decode allocated (argv, env, wdir); NULL-safe parts. */
void growmsg_spawn_clear (struct growmsg_spawn *s);

char *growmsg_end_encode (const char *ns, int ok, const char *why_failed);
int growmsg_end_decode (const void *data,
                        size_t len,
                        char *ns,
                        size_t nssz,
                        int *ok,
                        char *why_failed,
                        size_t wfsz,
                        char *why,
                        size_t whysz);

#endif /* ELASTIC_EXEC_GROWMSG_H */
