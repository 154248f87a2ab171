/* l3_format.h - the L3 snapshot file format, read without MPI (internal)
 *
 * In libl3format.la (with l3_dir.h), an MPI-free convenience library that
 * libelastic's parallel L3 code (l3.h) and the elastic-snapshot tool both
 * link: names and datatypes of the layout, checksums, quiet HDF5 error
 * handling, loading a file's catalog (header, datasets, block tables) with
 * structural checks, and verifying block checksums.  Nothing here calls or
 * declares MPI (<elastic.h> is read with ELASTIC_NO_MPI); parallel HDF5's
 * own <hdf5.h> still includes <mpi.h>, so the build passes MPI's flags.
 * The layout:
 *
 *   /                  attributes elastic_format ("elastic-l3"),
 *                      format_version (1), step, world_size, created,
 *                      created_unix, library_version, run_id
 *   /arrays/NAME       dataset [global_count] or [global_count][k] of the
 *                      array's type; attribute elem_size
 *   /checksums/NAME    uint64 [world_size][3]: offset, count, crc32 of the
 *                      block each old rank wrote (crc32 of its bytes, zlib)
 *   /values/NAME       dataset (scalar, or 1-D of n items); attribute crc32
 *   /blobs/NAME        uint8 [total]: the ranks' blobs, concatenated
 *   /blob_index/NAME   uint64 [world_size][3]: offset, size, crc32
 */
#ifndef ELASTIC_L3_FORMAT_H
#define ELASTIC_L3_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <hdf5.h>
#include <elastic.h>

#define L3_FORMAT_NAME    "elastic-l3"
#define L3_FORMAT_VERSION 1
#define L3_NAME_MAX       255

/* Element type of an array or value, used for the HDF5 datatype only (the
 * data is always copied as bytes).  L3_TYPE_BYTES (0, the default) stores
 * uint8.  elem_size must be a multiple of the type's size; an element of
 * k > 1 items is stored as a row of k items: a float64 array of elem_size
 * cols*8 becomes a dataset [global_count][cols]. */
enum l3_type {
    L3_TYPE_BYTES = 0,
    L3_TYPE_INT32 = 1,
    L3_TYPE_INT64 = 2,
    L3_TYPE_UINT32 = 3,
    L3_TYPE_UINT64 = 4,
    L3_TYPE_FLOAT32 = 5,
    L3_TYPE_FLOAT64 = 6,
};

/* How a file failed to load (l3_catalog_load, l3_file_open_serial). */
enum l3_fault_kind {
    L3_GOOD = 0,
    L3_FOREIGN = 1,    /* not HDF5, or HDF5 but not an elastic snapshot */
    L3_DAMAGED = 2,    /* an elastic snapshot that is truncated, incomplete or corrupt */
    L3_UNREADABLE = 3, /* cannot be opened (missing, permissions) */
};

struct l3_header {
    int format_version;
    int64_t step;
    int world_size;
    int64_t created_unix;
    char created[40];
    char library_version[64];
    char run_id[256];
};

struct l3_cat_array {
    char *name;
    int type; /* enum l3_type */
    size_t elem_size;
    uint64_t global_count;
    uint64_t *blocks; /* world_size rows: offset, count, crc32 */
    hid_t dset;
    hid_t memtype;
};

struct l3_cat_value {
    char *name;
    int type;
    size_t size;
    uint32_t crc;
    hid_t dset;
    hid_t memtype;
};

struct l3_cat_blob {
    char *name;
    uint64_t total;
    uint64_t *index; /* world_size rows: offset, size, crc32 */
    hid_t dset;
};

struct l3_catalog {
    struct l3_header hdr;
    struct l3_cat_array *arrays;
    int narrays;
    struct l3_cat_value *values;
    int nvalues;
    struct l3_cat_blob *blobs;
    int nblobs;
};

/* Suppress HDF5's automatic error printing between begin and end (the
 * error stack is still recorded for l3_h5_errtext). */
struct l3_h5quiet {
    H5E_auto2_t func;
    void *data;
};
void l3_h5quiet_begin (struct l3_h5quiet *q);
void l3_h5quiet_end (struct l3_h5quiet *q);

/* Describe the innermost error on HDF5's error stack in buf ("unknown
 * HDF5 error" if the stack is empty); l3_h5_errprintf puts the same text
 * in err (NULL allowed). */
void l3_h5_errtext (char *buf, size_t len);
void l3_h5_errprintf (elastic_error_t *err);

/* Keep the current HDF5 error stack across cleanup calls (which clear it):
 * save returns a stack id, restore makes it current again and frees it. */
hid_t l3_h5_errsave (void);
void l3_h5_errrestore (hid_t stack);

/* crc32 (zlib's polynomial and result) of len bytes, continuing from crc
 * (0 to start); computed with libdeflate's folded crc32 where it was found
 * at configure time (several times faster than zlib 1.2's tables). */
uint32_t l3_crc32 (uint32_t crc, const void *buf, size_t len);

/* The crc32 of A followed by B, from crc_a, crc_b and B's length. */
uint32_t l3_crc32_combine (uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* Type helpers: the item size of an enum l3_type (0 if invalid), a name
 * ("float64"), the HDF5 native type, and the enum of a file datatype (-1 if
 * not one of ours). */
size_t l3_type_size (int type);
const char *l3_type_name (int type);
hid_t l3_type_h5 (int type);
int l3_type_from_h5 (hid_t dtype);

/* True if name can name an array, value or blob (1..255 bytes, no '/', no
 * control characters, not "." or ".."). */
int l3_name_valid (const char *name);

/* Open a file read-only with the serial (sec2) driver, without file
 * locking.  Returns a file id, or -1 with *kind and err set. */
hid_t l3_file_open_serial (const char *path, int *kind, elastic_error_t *err);

/* Read the header attributes and every dataset of file, check the
 * structure, and return the catalog (datasets left open).  Returns L3_GOOD,
 * or L3_FOREIGN / L3_DAMAGED with err set.  Metadata calls only: under the
 * mpio driver with collective metadata reads every rank must call it. */
int l3_catalog_load (hid_t file, struct l3_catalog **out, elastic_error_t *err);

/* l3_file_open_serial and l3_catalog_load of path in a child process, for
 * a file that may be damaged: HDF5 1.10 parses a malformed file's
 * metadata with out-of-bounds reads that can crash the process (found by
 * tests/fuzz/fuzz_l3).  The child loads the catalog and sends back its
 * header; a child that dies (a signal, or any other end than its report)
 * makes the file L3_DAMAGED ("HDF5 crashed reading it").  Once a file
 * passed, the caller's own open parses the same metadata in the same way.
 * Returns L3_GOOD with *hdr set, or another enum l3_fault_kind with err
 * set.  Without fork (it failed) the load runs in this process. */
int l3_probe (const char *path, struct l3_header *hdr, elastic_error_t *err);

/* Close the catalog's datasets and free it (NULL-safe). */
void l3_catalog_destroy (struct l3_catalog *c);

/* Find an array, value or blob by name (NULL if absent). */
struct l3_cat_array *l3_catalog_array (const struct l3_catalog *c, const char *name);
struct l3_cat_value *l3_catalog_value (const struct l3_catalog *c, const char *name);
struct l3_cat_blob *l3_catalog_blob (const struct l3_catalog *c, const char *name);

/* Called with a one-line description of each bad block. */
typedef void (*l3_fault_f) (const char *what, void *arg);

/* Verify the checksums of the blocks, values and blobs numbered part,
 * part + nparts, ... (of all of them, in catalog order), reading with the
 * transfer property list dxpl (independent).  Calls fault for each bad one
 * (a failed read counts as bad) and returns the number found. */
int l3_catalog_verify (const struct l3_catalog *c,
                       hid_t dxpl,
                       int part,
                       int nparts,
                       l3_fault_f fault,
                       void *arg);

/* The number of checked items of a catalog (every array's blocks, then
 * every blob's entries, then the values, one per old rank or value), and
 * the index of each in that order (l3_catalog_verify_rest's `done`). */
long l3_catalog_nitems (const struct l3_catalog *c);
long l3_item_block (const struct l3_catalog *c, int array, int rank);
long l3_item_blob (const struct l3_catalog *c, int blob, int rank);
long l3_item_value (const struct l3_catalog *c, int value);

/* l3_catalog_verify, skipping the items whose done[item] is set (done may
 * be NULL), and setting done[item] for each item this call found good. */
int l3_catalog_verify_rest (const struct l3_catalog *c,
                            hid_t dxpl,
                            int part,
                            int nparts,
                            unsigned char *done,
                            l3_fault_f fault,
                            void *arg);

/* True if the non-empty rows of table (world rows of offset, count, crc)
 * tile [0, total) and empty rows have offsets <= total. */
int l3_blocks_tile (const uint64_t *table, int world, uint64_t total);

/* Most bytes one rank moves in one H5Dread/H5Dwrite (MPI-IO counts are
 * ints); the number of such pieces for `bytes` (at least 1). */
#define L3_PIECE_BYTES (512ull << 20)
uint64_t l3_pieces_for (uint64_t bytes);

/* Read rows [row, row+n) of an array dataset into buf, with dxpl; n may be
 * 0 (an empty selection, for collective transfers).  -1 on error. */
int l3_array_read_rows (
    const struct l3_cat_array *a, hid_t dxpl, uint64_t row, uint64_t n, void *buf);

#endif /* ELASTIC_L3_FORMAT_H */
