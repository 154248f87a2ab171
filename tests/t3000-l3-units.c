/* t3000-l3-units.c - L3 helpers without MPI: checksums, names, types,
 * block tiling, the snapshot directory (listing, commit, cleaning, the
 * background unlinks of retention) */
#include "config.h"
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libelastic/l3.h"
#include "libelastic/l3_bg.h"
#include "libelastic/l3_dir.h"
#include "libelastic/l3_format.h"
#include "lib/tap.h"
#include <zlib.h>

static void touch (const char *dir, const char *name)
{
    char path[4096];
    FILE *f;

    snprintf (path, sizeof (path), "%s/%s", dir, name);
    if ((f = fopen (path, "w"))) {
        fputs ("x", f);
        fclose (f);
    }
}

static int exists (const char *dir, const char *name)
{
    char path[4096];
    struct stat sb;

    snprintf (path, sizeof (path), "%s/%s", dir, name);
    return lstat (path, &sb) == 0;
}

int main (void)
{
    char name[64], tmpl[] = "/tmp/t3000.XXXXXX", *dir;
    elastic_error_t err;
    const char *why = err.text;
    struct l3_entry *e;
    int n;

    /* crc32: the standard check value */
    is_int (
        l3_crc32 (0, "123456789", 9), 0xCBF43926u, "crc32 of '123456789' is 0xCBF43926");
    is_int (l3_crc32 (l3_crc32 (0, "1234", 4), "56789", 5),
            0xCBF43926u,
            "crc32 continues across calls");
    is_int (l3_crc32 (0, NULL, 0), 0, "crc32 of nothing is 0");
    /* the same crc32 as zlib's (files written before libdeflate was used,
     * or by a build without it, must verify), at every alignment and
     * length around the folding widths, and a 1 MiB buffer */
    {
        size_t n = 1u << 20;
        unsigned char *b = malloc (n + 64);
        int same = b != NULL, comb = b != NULL;
        for (size_t i = 0; same && i < n + 64; i++)
            b[i] = (unsigned char)(i * 2654435761u >> 13);
        for (size_t off = 0; same && off < 16; off++)
            for (size_t len = 0; same && len < 300; len++)
                same =
                    l3_crc32 (0, b + off, len) == (uint32_t)crc32 (0, b + off, (uInt)len);
        if (same)
            same = l3_crc32 (0, b + 3, n) == (uint32_t)crc32 (0, b + 3, (uInt)n);
        ok (same, "crc32 equals zlib's at every alignment and length (and 1 MiB)");
        /* combine: the crc32 of a block from its pieces' */
        for (size_t cut = 0; comb && cut <= n; cut += n / 7 + 1)
            comb = l3_crc32_combine (l3_crc32 (0, b, cut),
                                     l3_crc32 (0, b + cut, n - cut),
                                     n - cut) == l3_crc32 (0, b, n);
        ok (comb, "crc32 of a block combined from two pieces");
        free (b);
    }

    ok (l3_name_valid ("field"), "'field' is a valid name");
    ok (l3_name_valid ("a b.c-d_e"), "names may have spaces and dots");
    ok (!l3_name_valid (""), "empty name refused");
    ok (!l3_name_valid (NULL), "NULL name refused");
    ok (!l3_name_valid ("a/b"), "name with '/' refused");
    ok (!l3_name_valid ("."), "'.' refused");
    ok (!l3_name_valid (".."), "'..' refused");
    ok (!l3_name_valid ("a\nb"), "name with a newline refused");
    {
        char big[300];
        memset (big, 'a', sizeof (big) - 1);
        big[sizeof (big) - 1] = '\0';
        ok (!l3_name_valid (big), "name of 299 bytes refused");
    }

    is_int (l3_type_size (L3_TYPE_BYTES), 1, "bytes: 1");
    is_int (l3_type_size (L3_TYPE_FLOAT64), 8, "float64: 8");
    is_int (l3_type_size (L3_TYPE_INT32), 4, "int32: 4");
    is_int (l3_type_size (7), 0, "type 7 invalid");
    is_int (l3_type_size (-1), 0, "type -1 invalid");
    for (int t = 0; t <= 6; t++)
        is_int (l3_type_from_h5 (l3_type_h5 (t)),
                t,
                "type %s round-trips through HDF5",
                l3_type_name (t));

    {
        uint64_t good[] = {0, 10, 0, 10, 5, 0, 15, 0, 0}; /* one empty block */
        uint64_t gap[] = {0, 10, 0, 11, 4, 0, 15, 0, 0};
        uint64_t overlap[] = {0, 10, 0, 9, 6, 0, 15, 0, 0};
        uint64_t unsorted[] = {5, 10, 0, 0, 5, 0, 15, 0, 0};
        uint64_t beyond[] = {0, 15, 0, 15, 0, 0, 99, 0, 0};
        ok (l3_blocks_tile (good, 3, 15),
            "blocks [0,10) [10,15) and an empty one tile 15");
        ok (!l3_blocks_tile (good, 3, 16), "... but not 16");
        ok (!l3_blocks_tile (gap, 3, 15), "a gap is detected");
        ok (!l3_blocks_tile (overlap, 3, 15), "an overlap is detected");
        ok (l3_blocks_tile (unsorted, 3, 15), "blocks need not be in rank order");
        ok (!l3_blocks_tile (beyond, 3, 15), "an empty block beyond the end is refused");
    }

    l3_snap_name (name, sizeof (name), 40, 0);
    is_str (name, "snap-000000000040.h5", "committed name is zero-padded");
    l3_snap_name (name, sizeof (name), 40, 1);
    is_str (name, ".snap-000000000040.h5.tmp", "temporary name is hidden");
    l3_snap_name (name, sizeof (name), 1234567890123456LL, 0);
    is_str (name, "snap-1234567890123456.h5", "steps beyond 12 digits still work");

    if (!(dir = mkdtemp (tmpl)))
        bail_out ("mkdtemp: %s", strerror (errno));
    touch (dir, "snap-000000000020.h5");
    touch (dir, "snap-000000000100.h5");
    touch (dir, "snap-000000000003.h5");
    touch (dir, ".snap-000000000020.h5.tmp");
    touch (dir, "snap-12.h5.bak");
    touch (dir, "snap-.h5");
    touch (dir, "snap-x1.h5");
    touch (dir, "notes.txt");
    ok (l3_dir_list (dir, &e, &n, &err) == 0, "list the directory");
    is_int (n, 4, "4 snapshot files (junk ignored)");
    if (n == 4) {
        is_int (e[0].step, 3, "sorted: 3 first");
        is_int (e[1].step, 20, "then 20");
        ok (!e[1].temporary && e[2].temporary && e[2].step == 20,
            "the committed 20, then its temporary");
        is_int (e[3].step, 100, "100 last");
    }
    l3_dir_free (e, n);
    is_int (l3_dir_clean (dir, &err), 1, "clean removes the temporary");
    ok (!exists (dir, ".snap-000000000020.h5.tmp"), "temporary gone");
    ok (exists (dir, "snap-000000000020.h5"), "committed file kept");

    touch (dir, ".snap-000000000200.h5.tmp");
    is_int (l3_dir_commit (dir, 200, &err), 0, "commit step 200");
    ok (exists (dir, "snap-000000000200.h5") &&
            !exists (dir, ".snap-000000000200.h5.tmp"),
        "the temporary was renamed");
    {
        char link[4096], target[256] = "";
        snprintf (link, sizeof (link), "%s/latest", dir);
        ssize_t l = readlink (link, target, sizeof (target) - 1);
        if (l > 0)
            target[l] = '\0';
        is_str (target, "snap-000000000200.h5", "latest points at it");
    }
    ok (l3_dir_commit (dir, 300, &err) < 0, "committing a missing temporary fails");
    diag ("%s", why);
    ok (strstr (why, ".snap-000000000300.h5.tmp") != NULL, "... naming the file");

    ok (l3_dir_list ("/nonexistent/l3", &e, &n, &err) < 0,
        "listing a missing directory fails");
    ok (strstr (why, "/nonexistent/l3") && strstr (why, "No such file"),
        "... with a clear message");
    diag ("%s", why);

    {
        /* retention's unlinks in the background: a retired snapshot leaves
         * the committed names at once (renamed to its temporary name) and
         * is unlinked by the reaper's thread */
        struct l3_reaper *r = l3_reaper_create ();
        char p1[4096], p2[4096];
        touch (dir, "snap-000000000007.h5");
        touch (dir, "snap-000000000008.h5");
        snprintf (p1, sizeof (p1), "%s/snap-000000000007.h5", dir);
        snprintf (p2, sizeof (p2), "%s/snap-000000000008.h5", dir);
        ok (r != NULL, "a reaper");
        is_int (l3_reaper_retire (p1, r), 0, "retire step 7");
        is_int (l3_reaper_retire (p2, r), 0, "retire step 8");
        ok (!exists (dir, "snap-000000000007.h5") &&
                exists (dir, ".snap-000000000007.h5.tmp"),
            "step 7 is out of the committed names, under its temporary name");
        errno = 0;
        ok (l3_reaper_retire (p1, r) < 0 && errno == ENOENT,
            "retiring a missing file fails with ENOENT");
        l3_reaper_start (r);
        l3_reaper_wait ();
        ok (!exists (dir, ".snap-000000000007.h5.tmp") &&
                !exists (dir, ".snap-000000000008.h5.tmp"),
            "the reaper unlinked both");
        l3_reaper_start (l3_reaper_create ()); /* an empty one: nothing to do */
        l3_reaper_wait ();
        l3_reaper_wait ();
        ok (exists (dir, "snap-000000000200.h5"), "other snapshots are untouched");
    }
    {
        /* the background writer: extents at odd offsets and of odd lengths,
         * across 4 MiB pieces, with O_DIRECT for their aligned middles and
         * through the page cache (ELASTIC_PERSIST_DIRECT=0): every byte and
         * each extent's crc32 where they belong, nothing else touched */
        static const struct {
            uint64_t off;
            size_t len;
        } xs[] = {
            {5, 3}, {4093, 9000}, {12288, 4096}, {(4 << 20) - 777, (6 << 20) + 1234}};
        size_t fsize = (12 << 20), src_len = (7 << 20);
        char *src = malloc (src_len), *got = malloc (fsize), path[4096];
        for (int mode = 0; mode < 2 && src && got; mode++) {
            struct l3_bg *b;
            uint64_t bytes = 0;
            int fd, good = 1;
            FILE *f;
            snprintf (path, sizeof (path), "%s/bg.%d", dir, mode);
            if ((f = fopen (path, "w"))) {
                memset (got, 0xee, fsize);
                good = fwrite (got, 1, fsize, f) == fsize;
                fclose (f);
            }
            for (size_t i = 0; i < src_len; i++)
                src[i] = (char)(i * 131 + mode);
            setenv ("ELASTIC_PERSIST_DIRECT", mode ? "0" : "1", 1);
            b = l3_bg_create (path, 1);
            for (int k = 0; k < 4 && b; k++)
                l3_bg_add (
                    b, xs[k].off, src + k, xs[k].len, (11 << 20) + 8 * (uint64_t)k);
            if (b) {
                l3_bg_start (b);
                l3_bg_wait (b, L3_BG_DONE);
                is_int (l3_bg_result (b, &bytes, NULL),
                        ELASTIC_OK,
                        "background write (%s)",
                        mode ? "page cache" : "O_DIRECT");
                if (mode == 1)
                    ok (l3_bg_direct (b) == 0,
                        "ELASTIC_PERSIST_DIRECT=0: no byte with O_DIRECT");
                else {
                    int probe = open (path, O_WRONLY | O_DIRECT);
                    diag ("%llu of %llu bytes with O_DIRECT",
                          (unsigned long long)l3_bg_direct (b),
                          (unsigned long long)bytes);
                    /* the 4 KiB-aligned middles: [4096, 12288), [12288, 16384),
                     * [4 MiB, 8 MiB) and [8 MiB, 10 MiB) */
                    if (probe >= 0)
                        is_int ((long long)l3_bg_direct (b),
                                8192 + 4096 + (4 << 20) + (2 << 20),
                                "the 4 KiB-aligned middles went with O_DIRECT");
                    else
                        skip (1, "the file system of /tmp refuses O_DIRECT");
                    if (probe >= 0)
                        close (probe);
                }
                l3_bg_destroy (b);
            }
            if ((fd = open (path, O_RDONLY)) < 0 ||
                pread (fd, got, fsize, 0) != (ssize_t)fsize)
                good = 0;
            if (fd >= 0)
                close (fd);
            for (size_t at = 0, k = 0; good && at < fsize; at++) {
                char want = (char)0xee;
                for (k = 0; k < 4; k++)
                    if (at >= xs[k].off && at < xs[k].off + xs[k].len)
                        want = src[k + (at - xs[k].off)];
                if (at >= (11u << 20) && at < (11u << 20) + 32)
                    continue; /* the crc slots, below */
                if (got[at] != want) {
                    diag ("byte %zu: 0x%02x, expected 0x%02x",
                          at,
                          got[at] & 0xff,
                          want & 0xff);
                    good = 0;
                }
            }
            for (int k = 0; good && k < 4; k++) {
                uint64_t c;
                memcpy (&c, got + (11 << 20) + 8 * k, sizeof (c));
                if (c != l3_crc32 (0, src + k, xs[k].len)) {
                    diag ("extent %d: crc32 %llx", k, (unsigned long long)c);
                    good = 0;
                }
            }
            ok (good,
                "every byte and crc32 in place, nothing else written (%s)",
                mode ? "page cache" : "O_DIRECT");
        }
        unsetenv ("ELASTIC_PERSIST_DIRECT");
        free (src);
        free (got);
    }
    {
        char sub[4096];
        snprintf (sub, sizeof (sub), "%s/a/b/c", dir);
        ok (l3_mkdir_p (sub) == 0 && exists (dir, "a/b/c"), "mkdir -p a/b/c");
        ok (l3_mkdir_p (sub) == 0, "mkdir -p of an existing directory");
        snprintf (sub, sizeof (sub), "%s/notes.txt/x", dir);
        ok (l3_mkdir_p (sub) < 0, "mkdir -p below a file fails");
    }
    {
        char cmd[4200];
        snprintf (cmd, sizeof (cmd), "rm -rf '%s'", dir);
        if (system (cmd) != 0)
            diag ("cleanup of %s failed", dir);
    }
    return done_testing ();
}
