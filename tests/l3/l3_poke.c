/* l3_poke.c - damage L3 snapshot files for tests (serial HDF5, no MPI)
 *
 *   l3_poke flip FILE ARRAY ELEMENT   invert the first byte of an element
 *                                     (ARRAY: a name under /arrays, or a
 *                                     dataset's path such as /blobs/rng)
 *   l3_poke unlink FILE OBJECT        delete a link (an incomplete file)
 *   l3_poke foreign FILE              write an HDF5 file that is no snapshot
 *
 * Prints what it did; exit 1 on failure.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>

static int flip (const char *path, const char *array, unsigned long long elem)
{
    char name[512];
    hid_t f, d, t, s;
    haddr_t addr;
    hsize_t dims[2] = {0, 1};
    size_t row;
    int fd;
    unsigned char b;
    off_t at;

    snprintf (name, sizeof (name), "%s%s", array[0] == '/' ? "" : "/arrays/", array);
    if ((f = H5Fopen (path, H5F_ACC_RDONLY, H5P_DEFAULT)) < 0 ||
        (d = H5Dopen2 (f, name, H5P_DEFAULT)) < 0)
        return 1;
    addr = H5Dget_offset (d);
    t = H5Dget_type (d);
    s = H5Dget_space (d);
    H5Sget_simple_extent_dims (s, dims, NULL);
    row = H5Tget_size (t) * (H5Sget_simple_extent_ndims (s) == 2 ? dims[1] : 1);
    H5Sclose (s);
    H5Tclose (t);
    H5Dclose (d);
    H5Fclose (f);
    if (addr == HADDR_UNDEF || elem >= dims[0]) {
        fprintf (stderr, "l3_poke: %s has no element %llu\n", name, elem);
        return 1;
    }
    at = (off_t)(addr + elem * row);
    if ((fd = open (path, O_RDWR)) < 0 || pread (fd, &b, 1, at) != 1)
        return 1;
    b ^= 0xff;
    if (pwrite (fd, &b, 1, at) != 1 || close (fd) < 0)
        return 1;
    printf ("flipped the byte at file offset %lld (%s element %llu)\n",
            (long long)at,
            name,
            elem);
    return 0;
}

static int unlink_obj (const char *path, const char *obj)
{
    hid_t f = H5Fopen (path, H5F_ACC_RDWR, H5P_DEFAULT);

    if (f < 0 || H5Ldelete (f, obj, H5P_DEFAULT) < 0)
        return 1;
    H5Fclose (f);
    printf ("deleted %s\n", obj);
    return 0;
}

static int foreign (const char *path)
{
    hsize_t n = 16;
    int v[16] = {0};
    hid_t f = H5Fcreate (path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), s, d;

    if (f < 0)
        return 1;
    s = H5Screate_simple (1, &n, NULL);
    d = H5Dcreate2 (f, "data", H5T_NATIVE_INT, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Dwrite (d, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v);
    H5Dclose (d);
    H5Sclose (s);
    H5Fclose (f);
    printf ("wrote a plain HDF5 file\n");
    return 0;
}

int main (int argc, char **argv)
{
    if (argc == 5 && !strcmp (argv[1], "flip"))
        return flip (argv[2], argv[3], strtoull (argv[4], NULL, 10));
    if (argc == 4 && !strcmp (argv[1], "unlink"))
        return unlink_obj (argv[2], argv[3]);
    if (argc == 3 && !strcmp (argv[1], "foreign"))
        return foreign (argv[2]);
    fprintf (
        stderr,
        "usage: l3_poke flip FILE ARRAY ELEMENT | unlink FILE OBJECT | foreign FILE\n");
    return 2;
}
