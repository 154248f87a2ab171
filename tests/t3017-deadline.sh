#!/bin/bash
# t3017-deadline.sh - suspend before the job's deadline: ELASTIC_DEADLINE,
# or Slurm's SLURM_JOB_END_TIME, with ELASTIC_DEADLINE_MARGIN.  The job
# writes its final L3 snapshot and exits 75 before the deadline, and the
# resumed job reaches the failure-free checksum.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
ARGS="--nx 96 --ny 80 --steps 4000"

t0=$(date +%s)
app_run "$tmp/ref" 4 $EXAMPLES/heat2d $ARGS
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run (checksum $ref)"
# The deadline is absolute and read when the job starts: it must still lie
# ahead once mpirun has started the ranks, which on a loaded machine (or
# under the sanitizers) takes seconds.  The window grows with what the
# reference run took (start-up included): 7 s on a quiet machine.
took=$(($(date +%s) - t0 + 1))
window=$((7 + 2 * took))
# the job must need longer than the window: 4000 steps of SLEEP ms
sleep_ms=$(((window + 6) * 1000 / 4000 + 1))
diag "the reference run took about $took s: deadline $window s after the start, steps of $sleep_ms ms"

# deadline NAME VARIABLE: the job would need over window + 6 s; the deadline
# is window s away with a 3 s margin
deadline() {
    local name=$1 var=$2 out=$tmp/$1 d=$tmp/$1.d when
    when=$(($(date +%s) + window))
    mpi_start "$out" 4 -x "$var=$when" -x ELASTIC_DEADLINE_MARGIN=3 -x ELASTIC_SNAPSHOT_DIR="$d" \
        -x ELASTIC_EVENT_LOG="$out.events" -- $EXAMPLES/heat2d $ARGS --sleep $sleep_ms
    mpi_wait $((window + 120))
    is "$MPI_RC" 75 "$name: the job suspended (exit 75)" || show_failure "$out"
    # the snapshot must be committed before the deadline: the suspend
    # event's time (MPI_Finalize and mpirun's exit come after, and take
    # seconds on a loaded machine under the sanitizers)
    local end
    end=$("$PY" -c 'import json,sys,datetime
e=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
s=[x for x in e if x.get("event")=="suspend"]
t=datetime.datetime.strptime(s[-1]["time"],"%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
print(int(t.timestamp()))' "$out.events" 2> /dev/null)
    ok $([ -n "$end" ] && [ "$end" -lt "$when" ]; echo $?) "$name: ... before the deadline ($((when - ${end:-when})) s left)"
    events "$out.events" | tail -n 1 | grep -q "^suspend [0-9]* size=4 reason=deadline file=yes$"
    ok $? "$name: the suspend event gives the deadline as the reason" || diag "$(events "$out.events")"
    app_run "$out.res" 3 -x ELASTIC_RESUME=1 -x ELASTIC_SNAPSHOT_DIR="$d" -- $EXAMPLES/heat2d $ARGS
    is "$(checksum_of "$out.res")" "$ref" "$name: the resumed job reaches the failure-free checksum" || show_failure "$out.res"
}

deadline env ELASTIC_DEADLINE
deadline slurm SLURM_JOB_END_TIME
done_testing
