/* fuzz_mesh_proto - the mesh's wire decoder (src/exec/mesh/proto.c)
 *
 * What a member does with bytes from the network, before and after the
 * peer is authenticated: the input is a stream of messages, cut as
 * conn.c cuts it (a header, then its payload), each decoded and its lists
 * walked to the end (an admission's slots, addresses and blob too); a rank-failed
 * broadcast's payload is decoded too. The whole input is also decoded as one message.
 * Every decode must end in success or a refusal with a reason, never read outside the
 * input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "exec/mesh/proto.h"
#include "fuzz.h"

static void walk (const struct mesh_msg *msg)
{
    struct mesh_list it;
    uint32_t member, len;
    uint8_t cause;
    const uint8_t *data;
    volatile uint32_t sink = 0;

    if (msg->hdr.type == MESH_LOST) {
        it = msg->u.lost;
        while (mesh_list_next (&it, 0, &member, &cause, NULL, NULL))
            sink += member + cause;
    } else if (msg->hdr.type == MESH_FENCE_UP || msg->hdr.type == MESH_FENCE_DOWN) {
        it = msg->u.fence.blobs;
        while (mesh_list_next (&it, 1, &member, NULL, &data, &len))
            sink += member + (len ? data[len - 1] : 0u);
    } else if (msg->hdr.type == MESH_ADMIT && msg->u.admit.status == MESH_ADMIT_OK) {
        /* an admission (MESH_ADMIT): the slots, the addresses, the blob */
        sink += msg->u.admit.slots[msg->u.admit.slot] +
                msg->u.admit.slots[msg->u.admit.n - 1];
        it = msg->u.admit.addrs;
        while (mesh_list_next (&it, 1, &member, NULL, &data, &len))
            sink += member + (len ? data[len - 1] : 0u);
        if (msg->u.admit.info_len)
            sink += msg->u.admit.info[msg->u.admit.info_len - 1];
    } else if (msg->hdr.type == MESH_HELLO && msg->u.hello.cred) {
        /* the munge credential (MESH_F_CRED): its first and last byte */
        sink += msg->u.hello.cred[0] + msg->u.hello.cred[msg->u.hello.cred_len - 1];
    } else if (msg->hdr.type == MESH_BCAST &&
               msg->u.bcast.kind == MESH_BCAST_RANK_FAILED) {
        uint32_t rank;
        int32_t status;
        char ns[256];
        elastic_error_t err = {{0}};
        if (mesh_rank_failed_decode (msg->u.bcast.data,
                                     msg->u.bcast.len,
                                     &rank,
                                     &status,
                                     ns,
                                     sizeof (ns),
                                     &err) == 0)
            sink += rank + (uint32_t)strlen (ns);
    } else if (msg->hdr.type == MESH_DMODEX_REQ || msg->hdr.type == MESH_DMODEX_RESP) {
        if (msg->u.dmodex.len)
            sink += msg->u.dmodex.data[msg->u.dmodex.len - 1];
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
    /* a private copy of exactly size bytes, so ASan sees any overread */
    uint8_t *buf = malloc (size ? size : 1);
    struct mesh_msg msg;
    elastic_error_t err = {{0}};
    size_t off = 0;
    int authed = 0;

    if (!buf)
        abort ();
    memcpy (buf, data, size);
    if (mesh_msg_decode (buf, size, MESH_MAX_PAYLOAD, &msg, &err) == 0)
        walk (&msg);
    /* as a stream: the handshake limit until an AUTH went by */
    while (size - off >= MESH_HDR_SIZE) {
        struct mesh_hdr h;
        uint32_t max = authed ? MESH_MAX_PAYLOAD : MESH_MAX_PREAUTH;
        size_t whole;

        if (mesh_hdr_decode (buf + off, size - off, max, &h, &err) < 0)
            break;
        whole = MESH_HDR_SIZE + (size_t)h.length;
        if (whole > size - off)
            break;
        if (mesh_msg_decode (buf + off, whole, max, &msg, &err) < 0) {
            if (!err.text[0])
                abort (); /* a refusal always says why */
            break;
        }
        walk (&msg);
        authed |= msg.hdr.type == MESH_AUTH;
        off += whole;
    }
    free (buf);
    return 0;
}
