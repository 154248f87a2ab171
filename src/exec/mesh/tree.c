/* tree.c - the mesh's k-ary tree over the live members (see tree.h) */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include "tree.h"

uint32_t tree_root (uint32_t n, const uint8_t *live)
{
    for (uint32_t i = 0; i < n; i++)
        if (live[i])
            return i;
    return MESH_NONE;
}

uint32_t tree_parent (uint32_t n, uint32_t k, const uint8_t *live, uint32_t i)
{
    uint32_t a = i, root;

    if (i >= n || !live[i] || k == 0)
        return MESH_NONE;
    while (a > 0) {
        a = (a - 1) / k;
        if (live[a])
            return a;
    }
    /* no living ancestor: hang under the lowest live member */
    root = tree_root (n, live);
    return root == i ? MESH_NONE : root;
}

void tree_parents (uint32_t n, uint32_t k, const uint8_t *live, uint32_t *parent)
{
    uint32_t root = tree_root (n, live);

    for (uint32_t i = 0; i < n; i++) {
        uint32_t a = i;

        parent[i] = MESH_NONE;
        if (!live[i] || i == root || k == 0)
            continue;
        while (a > 0) {
            a = (a - 1) / k;
            if (live[a]) {
                parent[i] = a;
                break;
            }
        }
        if (parent[i] == MESH_NONE)
            parent[i] = root;
    }
}

size_t
tree_children (uint32_t n, const uint32_t *parent, uint32_t i, uint32_t *out, size_t max)
{
    size_t count = 0;

    for (uint32_t c = 0; c < n; c++) {
        if (parent[c] == i && c != i) {
            if (count < max)
                out[count] = c;
            count++;
        }
    }
    return count;
}

int tree_in_subtree (uint32_t n, const uint32_t *parent, uint32_t i, uint32_t m)
{
    uint32_t steps = 0;

    while (m != MESH_NONE && m < n && steps++ <= n) {
        if (m == i)
            return 1;
        m = parent[m];
    }
    return 0;
}

uint32_t tree_next_hop (uint32_t n, const uint32_t *parent, uint32_t from, uint32_t to)
{
    uint32_t m = to, steps = 0;

    if (from >= n || to >= n || from == to)
        return MESH_NONE;
    /* walk up from `to`: if we meet `from`, the member just below it is
     * the child to take */
    while (m != MESH_NONE && steps++ <= n) {
        uint32_t p = parent[m];
        if (p == from)
            return m;
        m = p;
    }
    return parent[from];
}

uint32_t tree_depth (uint32_t n, const uint32_t *parent)
{
    uint32_t depth = 0;

    for (uint32_t i = 0; i < n; i++) {
        uint32_t d = 0, m = i;
        if (parent[i] == MESH_NONE)
            continue;
        while (parent[m] != MESH_NONE && d <= n) {
            m = parent[m];
            d++;
        }
        if (d > depth)
            depth = d;
    }
    return depth;
}

int tree_quorum (uint32_t n, const uint8_t *prev, const uint8_t *now, const uint8_t *gone)
{
    uint32_t base = 0, have = 0, lowest = MESH_NONE;

    for (uint32_t i = 0; i < n; i++) {
        if (!prev[i] || gone[i])
            continue;
        base++;
        have += now[i] != 0;
        if (lowest == MESH_NONE)
            lowest = i;
    }
    if (base == 0 || 2 * have > base)
        return 1;
    return 2 * have == base && now[lowest];
}

int tree_minority (uint32_t n,
                   const uint8_t *live,
                   const uint8_t *suspect,
                   const uint8_t *left)
{
    uint32_t suspects = 0, mine = 0, lowest = MESH_NONE;

    for (uint32_t i = 0; i < n; i++) {
        suspects += suspect[i] != 0;
        mine += live[i] != 0 || left[i] != 0;
        if (lowest == MESH_NONE && (live[i] || suspect[i] || left[i]))
            lowest = i;
    }
    if (suspects == 0 || mine > suspects)
        return 0;
    if (mine < suspects)
        return 1;
    return suspect[lowest] != 0;
}
