#!/bin/bash
# t8004-python-suspend.sh - heat2d.py's L3 level: SIGTERM to one rank at a
# random step suspends the job (exit 75, the L3 file of the agreed step);
# h5py reads that file back (the grid float64 [ny][nx], the step; its
# checksum is the C program's after that many steps); the same command
# with ELASTIC_RESUME=1 continues at 2 and 6 ranks, and heat2d.c resumes
# from the Python program's file, all to the failure-free checksum.  Under
# elastic-mpirun (ranks wrapped by elastic-exec): a rank SIGKILLed is
# recovered in place; a rank and its L2 buddy SIGKILLed together are
# relaunched from HDF5; both end with the failure-free checksum.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"
. "${srcdir:-.}/python/python.sh"

py_skip_unless_built
tmp=$(mktemp -d)
trap 'mpi_kill_job; [ -n "$job" ] && kill -KILL $job 2> /dev/null; rm -rf "$tmp"' EXIT
job=
ARGS="--nx 96 --ny 80 --steps 1500"
PYRUN=(-x PYTHONPATH="$PYPATH")

app_run "$tmp/ref" 4 $EXAMPLES/heat2d $ARGS
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "heat2d (C) reference (checksum $ref)"

# 1. SIGTERM to rank 2 after a random step
S=$(((RANDOM % 6 + 2) * 50))
out=$tmp/run
mpi_start "$out" 4 "${PYRUN[@]}" -x ELASTIC_SNAPSHOT_DIR="$tmp/snap" -x ELASTIC_EVENT_LOG="$out.events" -- \
    "$PY" "$HEAT_PY" $ARGS --sleep 2 --progress 50
# rank 2's pid first (a scan of /proc can take seconds on a loaded machine)
wait_for_grep "<stdout>: step 0\$" "$out" 120 && pid=$(mpi_rank_pid 2) &&
    wait_for_grep "<stdout>: step $S\$" "$out" 120 && kill -TERM "$pid"
ok $? "SIGTERM sent to rank 2 (pid ${pid:-?}) after step $S"
mpi_wait 120
is "$MPI_RC" 75 "the job suspended: exit 75" || show_failure "$out"
at=$(tr -d '\0' < "$out" | sed -n 's/.*<stdout>: suspended at step \([0-9]*\)$/\1/p')
ok $([ -n "$at" ] && [ "$at" -ge "$S" ]; echo $?) "rank 0 printed 'suspended at step $at' (>= $S)"
file=$tmp/snap/snap-$(printf %012d "${at:-0}").h5
ok $([ -f "$file" ]; echo $?) "the L3 file of step $at is there"
is "$(events "$out.events" | tail -n 2)" "persist $at size=4
suspend $at size=4 reason=SIGTERM file=yes" "persist and suspend events"

# 2. h5py reads it; its field is the C program's after $at steps
app_run "$tmp/c-at" 4 $EXAMPLES/heat2d --nx 96 --ny 80 --steps "$at"
got=$("$PY" - "$file" << 'PYEOF'
import sys, h5py, numpy as np
def splitmix64(x):
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))
with h5py.File(sys.argv[1], "r") as f:
    u, step = f["arrays/u"], int(np.ravel(f["values/step"][()])[0])
    assert u.dtype == np.float64 and u.shape == (80, 96), (u.dtype, u.shape)
    bits = u[()].view(np.uint64).ravel()
g = np.arange(bits.size, dtype=np.uint64)
with np.errstate(over="ignore"):
    print(step, "%016x" % int(np.sum(splitmix64(bits ^ splitmix64(g + np.uint64(1))), dtype=np.uint64)))
PYEOF
)
is "$got" "$at $(checksum_of "$tmp/c-at")" "h5py: /values/step is $at, /arrays/u float64 [80][96] has heat2d.c's checksum after $at steps"

# 3. resume: heat2d.py at 2 and 6 ranks, heat2d.c at 3
for n in 2 6; do
    app_run "$tmp/resume$n" $n "${PYRUN[@]}" -x ELASTIC_RESUME=1 -x ELASTIC_SNAPSHOT_DIR="$tmp/snap" -- "$PY" "$HEAT_PY" $ARGS
    is "$MPI_RC" 0 "heat2d.py resumed at $n ranks: exit 0" || show_failure "$tmp/resume$n"
    tr -d '\0' < "$tmp/resume$n" | grep -q "<stdout>: resumed from step $at (file $file, world 4 -> $n)"
    ok $? "... from step $at, world 4 -> $n" || show_failure "$tmp/resume$n"
    is "$(checksum_of "$tmp/resume$n")" "$ref" "... the failure-free checksum"
done
app_run "$tmp/resume-c" 3 -x ELASTIC_RESUME=1 -x ELASTIC_SNAPSHOT_DIR="$tmp/snap" -- $EXAMPLES/heat2d $ARGS
is "$(checksum_of "$tmp/resume-c")" "$ref" "heat2d.c resumed from heat2d.py's file at 3 ranks: the failure-free checksum"

# 4. elastic-mpirun, each rank under elastic-exec
empirun=$(readlink -f "${top_builddir:-..}/src/mpirun/elastic-mpirun")
exec_bin=$(readlink -f "${top_builddir:-..}/src/exec/elastic-exec")
if ! mpi_have_ulfm || [ ! -x "$exec_bin" ]; then
    skip "elastic-mpirun scenarios need ULFM and elastic-exec" 5
    done_testing
    exit
fi
ARGS="--nx 96 --ny 80 --steps 100"
app_run "$tmp/ref100" 4 $EXAMPLES/heat2d $ARGS
ref=$(checksum_of "$tmp/ref100")
(cd "$tmp" && PYTHONPATH=$PYPATH ELASTIC_SNAPSHOT_PERIOD=7 timeout 300 "$empirun" --run-dir "$tmp/em1" \
    --exec "$exec_bin" -n 8 "$PY" "$HEAT_PY" $ARGS --fail 3:40 > "$tmp/em1.out" 2>&1)
is "$?" 0 "elastic-mpirun -n 8 heat2d.py, rank 3 SIGKILLed: exit 0" || show_failure "$tmp/em1.out"
is "$(checksum_of "$tmp/em1.out")" "$ref" "... the failure-free checksum"
grep -a -q 'in-place recoveries: 1 ' "$tmp/em1.out"
ok $? "... recovered in place" || show_failure "$tmp/em1.out"
# ranks 3 and 4 (L2 buddies) die at once on the first attempt only
cat > "$tmp/first.sh" << EOF2
#!/bin/sh
if [ "\${ELASTIC_ATTEMPT:-1}" = 1 ]; then exec "\$@" --fail 3:40 --fail 4:40; fi
exec "\$@"
EOF2
chmod +x "$tmp/first.sh"
(cd "$tmp" && PYTHONPATH=$PYPATH ELASTIC_SNAPSHOT_PERIOD=5 ELASTIC_PERSIST_PERIOD=10 ELASTIC_SNAPSHOT_DIR=$tmp/em2.snap \
    timeout 300 "$empirun" --run-dir "$tmp/em2" --exec "$exec_bin" -n 8 "$tmp/first.sh" "$PY" "$HEAT_PY" $ARGS \
    > "$tmp/em2.out" 2>&1)
is "$?" 0 "elastic-mpirun, a rank and its buddy SIGKILLed: exit 0" || show_failure "$tmp/em2.out"
tr -d '\0' < "$tmp/em2.out" | grep -a -q "resumed from step [0-9]* (file $tmp/em2.snap/snap-.*, world 8 -> 8)" &&
    is "$(checksum_of "$tmp/em2.out")" "$ref" "... relaunched, resumed from HDF5, the failure-free checksum" ||
    { ok 1 "... relaunched and resumed from HDF5"; show_failure "$tmp/em2.out"; }
done_testing
