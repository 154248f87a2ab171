#!/bin/bash
# t3004-l3-nospace.sh - out of space in the middle of a series of L3 writes:
# a small tmpfs (where mount works) and a file size limit (ulimit -f).  The
# write fails with a clear error, nothing of it is left, older snapshots
# stay intact and restorable, and writing works again once it fits.
. "${srcdir:-.}/lib/mpitest.sh"

tmp=$(mktemp -d)
mounted=
trap 'mpi_kill_job; [ -n "$mounted" ] && umount "$mounted"; rm -rf "$tmp"' EXIT
t=./l3/l3_test
snap=$top_builddir/src/snapshot/elastic-snapshot

# check_left DIR DESC: after the failed write of step 20
check_left() {
    ok "$(test ! -e "$1/snap-000000000020.h5"; echo $?)" "$2: step 20 not committed"
    is "$(ls -A "$1" | grep -c '\.tmp$')" 0 "$2: no temporary left"
    is "$(readlink "$1/latest")" snap-000000000010.h5 "$2: latest still -> step 10"
    run_ok "$2: elastic-snapshot verify DIR is happy" "$snap" verify "$1"
    mpi_run "$tmp/r" 3 $t read "$1" --step 10 --world 4 --run s
    is "$MPI_RC" 0 "$2: step 10 restores at world size 3" || diag "$(cat "$tmp/r")"
}

# 1. a 2 MiB tmpfs: step 10 (about 90 KiB) fits, step 20 (about 7 MiB) does not
mkdir -p "$tmp/small"
if mount -t tmpfs -o size=2m tmpfs "$tmp/small" 2> /dev/null; then
    mounted=$tmp/small
    d=$tmp/small/snap
    mpi_run "$tmp/a" 4 $t write "$d" 10 --run s
    is "$MPI_RC" 0 "tmpfs: step 10 written" || diag "$(cat "$tmp/a")"
    mpi_run "$tmp/b" 4 $t write "$d" 20 --rows 100000 --run s
    ok $((MPI_RC == 0)) "tmpfs: the write of step 20 fails"
    grep -aq "l3_write failed: I/O error: cannot reserve [0-9]* bytes for the snapshot of step 20 in '$d': No space left on device" "$tmp/b"
    ok $? "tmpfs: the error says what and why" || diag "$(cat "$tmp/b")"
    grep -a 'l3_write failed' "$tmp/b" | sed 's/^/# /'
    check_left "$d" tmpfs
    mpi_run "$tmp/c" 4 $t write "$d" 30 --run s
    is "$MPI_RC" 0 "tmpfs: a snapshot that fits (step 30) is written afterwards" || diag "$(cat "$tmp/c")"
    umount "$tmp/small" && mounted=
else
    skip "mount -t tmpfs is not permitted here"
fi

# 2. ulimit -f 2048 (2 MiB); shared-memory segments are files too, so tcp
d=$tmp/limited
(
    ulimit -f 2048
    MPI_DEFAULT_ARGS=${MPI_DEFAULT_ARGS/self,sm,tcp/self,tcp}
    mpi_run "$tmp/a" 4 $t write "$d" 10 --run s
    echo "$MPI_RC" > "$tmp/a.rc"
    mpi_run "$tmp/b" 4 $t write "$d" 20 --rows 100000 --run s
    echo "$MPI_RC" > "$tmp/b.rc"
)
is "$(cat "$tmp/a.rc")" 0 "ulimit -f: step 10 written" || diag "$(cat "$tmp/a")"
ok $(($(cat "$tmp/b.rc") == 0)) "ulimit -f: the write of step 20 fails"
grep -aq "l3_write failed: I/O error: the snapshot of step 20 needs up to [0-9]* bytes, over the file size limit (ulimit -f) of 2097152 bytes" "$tmp/b"
ok $? "ulimit -f: the error says what and why" || diag "$(cat "$tmp/b")"
grep -a 'l3_write failed' "$tmp/b" | sed 's/^/# /'
check_left "$d" "ulimit -f"
done_testing
