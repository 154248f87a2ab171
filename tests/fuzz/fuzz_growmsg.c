/* fuzz_growmsg.c - the growth messages mesh members exchange
 * (src/exec/growmsg.c: MESH_BCAST_ROOM, _SPAWN and _SPAWN_END payloads, as
 * pmix/pmix_grow.c decodes what another member broadcast)
 *
 * The input is decoded by each decoder (a spawn for a mesh of 4 members).
 * Every decode must end in success or a refusal with a reason; what
 * decodes must encode back to a message that decodes to the same values.
 */
#include <stdio.h>

#include "exec/growmsg.h"
#include "fuzz.h"

#define NMEMBERS 4

static void check_spawn (const struct growmsg_spawn *s)
{
    struct growmsg_spawn t;
    char why[160], *text = growmsg_spawn_encode (s);
    size_t i;

    if (!text)
        abort ();
    if (growmsg_spawn_decode (text, strlen (text), NMEMBERS, &t, why, sizeof (why)) < 0)
        abort ();
    if (t.attempt != s->attempt || t.node != s->node || t.k != s->k ||
        t.base != s->base || t.prank != s->prank || t.joined != s->joined ||
        strcmp (t.pns, s->pns) || strcmp (t.requestor, s->requestor) ||
        !t.wdir != !s->wdir || (t.wdir && strcmp (t.wdir, s->wdir)))
        abort ();
    for (i = 0; s->argv[i]; i++)
        if (!t.argv[i] || strcmp (t.argv[i], s->argv[i]))
            abort ();
    if (t.argv[i])
        abort ();
    for (i = 0; s->env[i]; i++)
        if (!t.env[i] || strcmp (t.env[i], s->env[i]))
            abort ();
    if (t.env[i])
        abort ();
    growmsg_spawn_clear (&t);
    free (text);
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    struct growmsg_spawn s;
    unsigned long long seq, seq2;
    int free_slots, free2, ok, ok2;
    char why[160], ns[GROWMSG_NS_MAX + 1], ns2[GROWMSG_NS_MAX + 1], wf[256], wf2[256];
    char host[GROWMSG_HOST_MAX + 1], host2[GROWMSG_HOST_MAX + 1];
    char *text;

    why[0] = '\0';
    if (growmsg_room_decode (
            data, size, &seq, &free_slots, host, sizeof (host), why, sizeof (why)) == 0) {
        if (!(text = growmsg_room_encode (seq, free_slots, host)) ||
            growmsg_room_decode (text,
                                 strlen (text),
                                 &seq2,
                                 &free2,
                                 host2,
                                 sizeof (host2),
                                 why,
                                 sizeof (why)) < 0 ||
            seq2 != seq || free2 != free_slots || strcmp (host, host2) != 0)
            abort ();
        free (text);
    } else if (!why[0])
        abort ();
    why[0] = '\0';
    if (growmsg_spawn_decode (data, size, NMEMBERS, &s, why, sizeof (why)) == 0) {
        check_spawn (&s);
        growmsg_spawn_clear (&s);
    } else if (!why[0])
        abort ();
    why[0] = '\0';
    if (growmsg_end_decode (
            data, size, ns, sizeof (ns), &ok, wf, sizeof (wf), why, sizeof (why)) == 0) {
        if (!(text = growmsg_end_encode (ns, ok, wf)) ||
            growmsg_end_decode (text,
                                strlen (text),
                                ns2,
                                sizeof (ns2),
                                &ok2,
                                wf2,
                                sizeof (wf2),
                                why,
                                sizeof (why)) < 0 ||
            strcmp (ns, ns2) || !ok != !ok2 || strcmp (wf, wf2))
            abort ();
        free (text);
    } else if (!why[0])
        abort ();
    return 0;
}
