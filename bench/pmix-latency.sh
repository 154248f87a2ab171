#!/bin/bash
# pmix-latency.sh - kill -> survivors-get-the-error latency and MPI_Init time,
# under elastic-exec's hosted PMIx server (`elastic-exec --nproc-per-node N`),
# under the bare server (tests/pmix/pmix-launch) and under mpirun --with-ft
# ulfm, same program, same ranks, shared memory, side by side in one run.
#
#   bench/pmix-latency.sh [-n RANKS] [-r RUNS] [-v VICTIM] [-N] [BUILDDIR]
#
# The program is tests/pmix/ft_app in barrier mode with a self-killing
# victim: after MPI_Init every rank enters MPI_Barrier; the victim waits
# 20 ms, prints its CLOCK_MONOTONIC time and raises SIGKILL; each survivor
# prints the time its blocked MPI_Barrier returned MPIX_ERR_PROC_FAILED (or
# MPIX_ERR_REVOKED), then shrinks.  Per run:
#   first   = first survivor's error time - kill time
#   last    = last survivor's error time - kill time (every survivor knows)
#   init    = the slowest rank's MPI_Init (ft_app's init_max_ms)
#   shrink  = the slowest survivor's MPIX_Comm_shrink
#   job     = launcher start to exit (wall time of the whole job)
# The launchers alternate run by run so all see the same machine load.
# -N adds a column: the bare server with --no-nodelay (PMIx's sockets left
# without TCP_NODELAY), to show what that setting saves.
# Defaults: 4 ranks, 20 runs each, victim rank 2.  BUILDDIR is a configured
# build tree (default: the current directory).
set -u
ranks=4 runs=20 victim=2 nonodelay=0
while getopts n:r:v:N o; do
    case $o in
        n) ranks=$OPTARG ;;
        r) runs=$OPTARG ;;
        v) victim=$OPTARG ;;
        N) nonodelay=1 ;;
        *) echo "usage: $0 [-n RANKS] [-r RUNS] [-v VICTIM] [-N] [BUILDDIR]" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
build=${1:-.}
[ -f "$build/tests/Makefile" ] || { echo "$0: '$build' is not a configured build tree (no tests/Makefile)" >&2; exit 2; }
[ "$victim" -lt "$ranks" ] 2> /dev/null || { echo "$0: -v: victim '$victim' is not a rank of $ranks" >&2; exit 2; }
make -s -C "$build/tests" pmix/pmix-launch pmix/ft_app > /dev/null || { echo "$0: cannot build pmix/pmix-launch and pmix/ft_app" >&2; exit 1; }
make -s -C "$build/src/exec" elastic-exec > /dev/null || { echo "$0: cannot build elastic-exec" >&2; exit 1; }
launch=$build/tests/pmix/pmix-launch
exec=$build/src/exec/elastic-exec
app=$build/tests/pmix/ft_app
mpirun=$(sed -n 's/^MPIRUN = //p' "$build/tests/Makefile")
[ "$(sed -n 's/^HAVE_ULFM = //p' "$build/tests/Makefile")" = yes ] || { echo "$0: this build has no ULFM" >&2; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now_ns() { date +%s%N; }

# one LABEL CMD...: run a job, append "first last init shrink job" (ms) to $tmp/LABEL
one() {
    local label=$1 out=$tmp/out t0 t1 rc
    shift
    t0=$(now_ns)
    timeout 60 "$@" > "$out" 2>&1
    rc=$?
    t1=$(now_ns)
    if [ $rc -ne 0 ] || ! grep -q '^ft-app: ok' "$out"; then
        [ $rc = 124 ] && echo "$label: run $i hung (killed after 60 s)" >&2 || echo "$label: run $i failed (exit $rc)" >&2
        tail -n 5 "$out" | sed 's/^/    /' >&2
        echo fail >> "$tmp/$label.fail"
        return
    fi
    awk -v job="$(((t1 - t0) / 1000))" '
        /^kill 1 / { sub("t=", "", $4); kill = $4 }
        /^error 1 / { sub("t=", "", $5); e = $5; if (first == "" || e < first) first = e; if (e > last) last = e }
        /^init_max_ms=/ { sub("init_max_ms=", "", $1); init = $1 }
        /^shrunk 1 / { sub("shrink_ms=", "", $7); if ($7 > shrink) shrink = $7 }
        END { printf "%.3f %.3f %.3f %.3f %.3f\n", (first - kill) / 1e6, (last - kill) / 1e6, init, shrink, job / 1000 }
    ' "$out" >> "$tmp/$label"
}

labels=(elastic-exec hosted mpirun)
[ $nonodelay = 1 ] && labels+=(hosted-no-nodelay)
echo "# $ranks ranks, shared memory (ob1, self,sm, coll ^han), victim rank $victim, $runs runs each, $(nproc) cores"
for i in $(seq "$runs"); do
    one elastic-exec "$exec" -q --nproc-per-node "$ranks" --wireup pmix --mpi-btl sm -- "$app" -s -v "$victim"
    one hosted "$launch" -n "$ranks" -- "$app" -s -v "$victim"
    one mpirun "$mpirun" --with-ft ulfm -n "$ranks" --oversubscribe --bind-to none \
        --mca pml ob1 --mca btl self,sm --mca coll ^han "$app" -s -v "$victim"
    [ $nonodelay = 1 ] && one hosted-no-nodelay "$launch" --no-nodelay -n "$ranks" -- "$app" -s -v "$victim"
    printf '.' >&2
done
echo >&2

# median and range of column C of FILE
stat() {
    sort -n -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END {
        if (NR == 0) { printf "%22s", "-"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%8.1f (%5.1f-%6.1f)", m, v[1], v[NR] }'
}

printf '%-28s' "median (min-max) ms"
for l in "${labels[@]}"; do printf '%24s' "$l"; done
echo
names=("kill -> first survivor error" "kill -> last survivor error" "MPI_Init (slowest rank)" "MPIX_Comm_shrink (slowest)" "whole job (launch to exit)")
for c in 1 2 3 4 5; do
    printf '%-28s' "${names[$((c - 1))]}"
    for l in "${labels[@]}"; do printf '  %s' "$(stat "$tmp/$l" "$c")"; done
    echo
done
printf '%-28s' "runs ok / failed or hung"
for l in "${labels[@]}"; do
    printf '%24s' "$(wc -l < "$tmp/$l" 2> /dev/null || echo 0) / $(cat "$tmp/$l.fail" 2> /dev/null | wc -l)"
done
echo
