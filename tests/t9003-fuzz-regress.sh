#!/bin/bash
# t9003-fuzz-regress.sh - a short run of every libFuzzer harness (tests/fuzz/)
#
# Each harness replays its committed seed corpus and its regression corpus
# (every input that once crashed, leaked or hung: tests/fuzz/regress/NAME),
# then makes FUZZ_T9003_RUNS (default 1000; fuzz_l3, which forks per
# input, 50) mutations with a fixed seed, at most 5 s each, under ASan,
# UBSan and LeakSanitizer.  New inputs go to a temporary directory, never
# into the source tree.  The regression snapshots that once broke HDF5
# are also given to the real elastic-snapshot verify, which must call them
# damaged (exit 1), not crash.  bench/fuzz.sh is the long run.  Skips
# where configure found no clang with libFuzzer (its summary says).
. "${srcdir:-.}/lib/tap.sh"

[ -n "${FUZZ_CC:-}" ] ||
    skip_all "no clang with libFuzzer (apt-get install clang-14 libclang-rt-14-dev, then configure)"
fuzzdir=$(cd "$srcdir/fuzz" && pwd)
runs=${FUZZ_T9003_RUNS:-1000}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t9003.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

for prog in ${FUZZ_PROGS:-}; do
    name=${prog##*/fuzz_}
    if [ ! -x "$prog" ]; then
        ok 1 "$name: harness not built ($prog)"
        continue
    fi
    dirs=()
    for d in "$fuzzdir/corpus/$name" "$fuzzdir/regress/$name"; do
        [ -d "$d" ] && dirs+=("$d")
    done
    n=$(find "${dirs[@]}" -type f | wc -l)
    extra=()
    [ "$name" = l3 ] && extra=(-malloc_limit_mb=65536) # see bench/fuzz.sh
    # artifacts go to $tmp: the l3 harness's forked HDF5 child writes one for
    # a regression input whose 4 GiB allocation it survives (libFuzzer's
    # default is the current directory, the build tree)
    "$prog" "${extra[@]}" -runs=0 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$tmp/$name-" \
        "${dirs[@]}" > "$tmp/$name.replay" 2>&1
    rc=$?
    [ $rc -eq 0 ] || tail -40 "$tmp/$name.replay" | sed 's/^/# /'
    is "$rc" 0 "$name: $n seed and regression inputs replay clean"
    mkdir -p "$tmp/$name"
    n=$runs
    [ "$name" = l3 ] && n=50
    "$prog" "${extra[@]}" -runs="$n" -seed=9003 -max_total_time=5 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$tmp/$name-" "$tmp/$name" "${dirs[@]}" > "$tmp/$name.fuzz" 2>&1
    rc=$?
    [ $rc -eq 0 ] || tail -40 "$tmp/$name.fuzz" | sed 's/^/# /'
    is "$rc" 0 "$name: up to $n fixed-seed mutations clean"
done

snap=${top_builddir:-..}/src/snapshot/elastic-snapshot
if [ -x "$snap" ] && [ -d "$fuzzdir/regress/l3" ]; then
    for f in "$fuzzdir"/regress/l3/*; do
        "$snap" verify "$f" > "$tmp/verify.out" 2>&1
        rc=$?
        sed 's/^/# /' "$tmp/verify.out"
        is "$rc" 1 "elastic-snapshot verify ${f##*/}: damaged, exit 1 (not a crash)"
    done
fi
done_testing
