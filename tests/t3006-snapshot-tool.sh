#!/bin/bash
# t3006-snapshot-tool.sh - elastic-snapshot: list, show, verify, prune on
# real snapshots; bad input (missing arguments, missing files, a text file,
# an empty file, a plain HDF5 file, a directory) gets one clear line and
# exit 1 (2 for usage), never a crash or an HDF5 error dump.
. "${srcdir:-.}/lib/mpitest.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
snap=$top_builddir/src/snapshot/elastic-snapshot
dir=$tmp/snap

# expect RC PATTERN DESC -- ARGS...: exit status RC, one line on stderr
# matching PATTERN, and no HDF5 diagnostics
expect() {
    local want=$1 pat=$2 desc=$3
    shift 4
    "$snap" "$@" > "$tmp/out" 2> "$tmp/err"
    local rc=$?
    is "$rc" "$want" "$desc: exit $want"
    is "$(wc -l < "$tmp/err")" 1 "$desc: one line on stderr" || diag "$(cat "$tmp/err")"
    grep -q -- "$pat" "$tmp/err"
    ok $? "$desc: says '$pat'" || diag "$(cat "$tmp/err")"
    ok "$(grep -q 'HDF5-DIAG' "$tmp/out" "$tmp/err"; echo $((!$?)))" "$desc: no HDF5 error dump"
}

expect 2 "no command given; usage: elastic-snapshot list DIR" "no arguments" --
expect 2 "unknown command 'frob' (accepted: list, verify, show, prune)" "unknown command" -- frob
expect 2 "verify: no FILE given" "verify without a file" -- verify
expect 2 "show: expected exactly one FILE" "show with two files" -- show a b
expect 2 "list: no DIR given" "list without a directory" -- list
expect 2 "list: unknown option '--bogus'" "list with a bad option" -- list --bogus "$tmp"
expect 2 "prune: --keep K is required" "prune without --keep" -- prune "$tmp"
expect 2 "prune: --keep: 'x' is not an integer" "prune --keep x" -- prune "$tmp" --keep x
expect 2 "prune: --keep: 0 is out of range (expected 1.." "prune --keep 0" -- prune "$tmp" --keep 0
expect 2 "prune: --keep needs a value" "prune --keep without a value" -- prune "$tmp" --keep
expect 1 "$tmp/nonexistent: No such file or directory" "verify a missing file" -- verify "$tmp/nonexistent"
echo "hello" > "$tmp/text"
expect 1 "$tmp/text: not an HDF5 file (no HDF5 signature)" "verify a text file" -- verify "$tmp/text"
: > "$tmp/empty"
expect 1 "$tmp/empty: not an HDF5 file (empty)" "show an empty file" -- show "$tmp/empty"
./l3/l3_poke foreign "$tmp/plain.h5" > /dev/null
expect 1 "$tmp/plain.h5: HDF5 file, but not an elastic snapshot (no attribute 'elastic_format')" \
    "show a plain HDF5 file" -- show "$tmp/plain.h5"
expect 1 "not an elastic snapshot" "verify a plain HDF5 file" -- verify "$tmp/plain.h5"
expect 1 "$tmp: is a directory, not a snapshot file" "show a directory" -- show "$tmp"
expect 1 "no committed snapshot (snap-\*.h5) to verify" "verify a directory without snapshots" -- verify "$tmp"
expect 1 "cannot read directory '$tmp/nonexistent'" "list a missing directory" -- list "$tmp/nonexistent"

run_ok "--help exits 0" "$snap" --help
is "$("$snap" --version)" "elastic-snapshot $("$snap" --version | cut -d' ' -f2)" "--version prints the version"

mpi_run "$tmp/w" 2 ./l3/l3_test write "$dir" 1,2,3 --run tool
is "$MPI_RC" 0 "2 ranks wrote steps 1, 2, 3" || diag "$(cat "$tmp/w")"
"$snap" list "$dir" > "$tmp/l"
is $? 0 "list exits 0"
is "$(grep -c '  ok$' "$tmp/l")" 3 "list: three snapshots, all ok" || diag "$(cat "$tmp/l")"
grep -q '^3  *20[0-9-]*T[0-9:]*Z  *2  *[0-9.]*K  *tool  *snap-000000000003.h5  *ok$' "$tmp/l"
ok $? "list: step, time, world size, size, run id, file, status" || diag "$(cat "$tmp/l")"
diag "$(cat "$tmp/l")"

"$snap" show "$dir/snap-000000000003.h5" > "$tmp/s"
is $? 0 "show exits 0"
grep -q '^step  *3$' "$tmp/s" && grep -q '^world size  *2$' "$tmp/s" && grep -q '^run id  *tool$' "$tmp/s"
ok $? "show: step, world size, run id" || diag "$(cat "$tmp/s")"
grep -q '/arrays/field  *float64  *\[1000\]\[7\]  *elem_size 56' "$tmp/s" &&
    grep -q '/arrays/bytes  *uint8  *\[503\]\[13\]  *elem_size 13' "$tmp/s"
ok $? "show: arrays with type, global shape and element size" || diag "$(cat "$tmp/s")"
grep -q '/values/step  *int64  *8 bytes = 3$' "$tmp/s" && grep -q '/values/dt  *float64  *24 bytes = 1.5 1.25 -3$' "$tmp/s"
ok $? "show: values with their contents" || diag "$(cat "$tmp/s")"
grep -q '/blobs/rng  *[0-9]* bytes; per old rank: 4 41$' "$tmp/s"
ok $? "show: blob sizes per old rank" || diag "$(cat "$tmp/s")"

run_ok "verify FILE exits 0" "$snap" verify "$dir/snap-000000000002.h5"
"$snap" prune "$dir" --keep 1 --run-id other > "$tmp/p"
is "$(cd "$dir" && echo snap-*)" "snap-000000000001.h5 snap-000000000002.h5 snap-000000000003.h5" \
    "prune --run-id other leaves run 'tool' alone"
"$snap" prune "$dir" --keep 1 > "$tmp/p"
is $? 0 "prune --keep 1 exits 0"
is "$(grep -c '^removed ' "$tmp/p")" 2 "prune reports two removals" || diag "$(cat "$tmp/p")"
is "$(cd "$dir" && echo snap-*)" "snap-000000000003.h5" "prune kept the newest"
is "$(readlink "$dir/latest")" snap-000000000003.h5 "latest is intact"
done_testing
