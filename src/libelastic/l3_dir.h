/* l3_dir.h - the L3 snapshot directory: names, listing, commit, retention
 * (internal, no MPI; in libl3format.la with l3_format.h)
 *
 * A directory holds committed snapshots snap-SSSSSSSSSSSS.h5 (the step,
 * zero-padded to 12 digits so that `ls` sorts them), temporaries
 * .snap-SSSSSSSSSSSS.h5.tmp (the one being written; older snapshots that
 * retention took out, until they are unlinked), and a symbolic link `latest` to
 * the last committed snapshot.  It belongs to one job at a time.
 */
#ifndef ELASTIC_L3_DIR_H
#define ELASTIC_L3_DIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <elastic.h>

struct l3_entry {
    char *name; /* file name within the directory */
    char *path; /* dir/name */
    int64_t step;
    int temporary; /* an uncommitted .snap-*.h5.tmp */
    off_t size;
};

/* The file name of the snapshot of step (committed or temporary). */
void l3_snap_name (char *buf, size_t len, int64_t step, int temporary);

/* List the snapshot files of dir, sorted by step (ascending; a temporary
 * after the committed file of the same step).  -1 with err set if dir
 * cannot be read. */
int l3_dir_list (const char *dir, struct l3_entry **out, int *n, elastic_error_t *err);

/* Free a listing (NULL-safe). */
void l3_dir_free (struct l3_entry *e, int n);

/* Create dir and its parents (mode 0777 less umask).  -1 with errno set. */
int l3_mkdir_p (const char *dir);

/* Remove every temporary of dir (a stale write).  Returns the number
 * removed, -1 with err set if dir cannot be read. */
int l3_dir_clean (const char *dir, elastic_error_t *err);

/* Make the temporary of step the committed snapshot: release blocks
 * reserved beyond its end, fsync it, rename it, fsync dir, and point
 * dir/latest at it.  -1 with err set; 1 if only dir/latest failed. */
int l3_dir_commit (const char *dir, int64_t step, elastic_error_t *err);

/* Called for each file removed by l3_dir_prune, with the reason. */
typedef void (*l3_removed_f) (const char *path, const char *reason, void *arg);

/* Takes a committed snapshot out of dir for l3_dir_prune instead of
 * unlink(2) (l3_write renames it to its temporary name and unlinks it in
 * the background): 0, or -1 with errno (then the file stays). */
typedef int (*l3_unlink_f) (const char *path, void *arg);

/* Retention: of the committed snapshots of run_id (NULL: any run) keep the
 * newest `keep` readable ones (keep 0: all) and remove older ones, and
 * unreadable ones older than the oldest kept; if newest_step >= 0, also
 * remove this run's snapshots of steps after newest_step (a timeline
 * abandoned by a restart from an older snapshot).  Snapshots of other runs
 * are never removed.  unlink_fn (NULL: unlink(2)) takes each file out;
 * arg goes to it and to removed.  Returns the number removed, -1 with err
 * set. */
int l3_dir_prune (const char *dir,
                  int keep,
                  const char *run_id,
                  int64_t newest_step,
                  l3_unlink_f unlink_fn,
                  l3_removed_f removed,
                  void *arg,
                  elastic_error_t *err);

/* The run id of the snapshot file at path into buf: 1, or 0 if path is not
 * a readable snapshot (missing, foreign, damaged). */
int l3_file_run_id (const char *path, char *buf, size_t len);

/* The newest step of dir's committed, readable snapshots of run_id (NULL:
 * any run) into *step.  Returns 1 if there is one, 0 if not (or dir does
 * not exist), -1 with err set if dir cannot be read. */
int l3_dir_newest (const char *dir,
                   const char *run_id,
                   int64_t *step,
                   elastic_error_t *err);

#endif /* ELASTIC_L3_DIR_H */
