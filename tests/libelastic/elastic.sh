# elastic.sh - helpers for libelastic's mpirun tests (source after lib/mpitest.sh)
#
#   app_run OUT N [mpirun args --] PROG ARGS   run a job and wait (RUN_TIMEOUT, 180 s)
#   checksum_of FILE                           the hex checksum rank 0 printed
#   final_world_of FILE                        the final working size printed
#   events FILE                                one summary line per JSON event
#                                              (or BAD: ... if a line is invalid)
#   same_step_events NAME FILE STEP OLD A B    check the events of ranks A and B
#                                              killed at the same step (a TAP line)

EXAMPLES=${top_builddir:-..}/examples
PY=/usr/bin/python3

app_run() {
    mpi_start "$@"
    mpi_wait "${RUN_TIMEOUT:-180}"
    # Every program here prints from its first step on: a job that ends
    # with no output at all did not run (PRRTE 3.0 under --with-ft ulfm has
    # been seen to exit 0 without starting or reporting anything, about
    # once in a few hundred jobs on a loaded machine).  Run it once more,
    # saying so; a second empty run stays a failure.
    if [ "$MPI_RC" = 0 ] && [ ! -s "$mpi_out" ]; then
        diag "mpirun exited 0 with no output at all: not a run of the program; running it again"
        mpi_start "$@"
        mpi_wait "${RUN_TIMEOUT:-180}"
    fi
}

# (mpirun's output can hold NUL bytes, even on the checksum's line: dropped)
checksum_of() { tr -d '\0' < "$1" | sed -n 's/.*checksum \([0-9a-f]\{16\}\)$/\1/p' | head -n 1; }

final_world_of() { tr -d '\0' < "$1" | sed -n 's/.*final world \([0-9]*\),.*/\1/p' | head -n 1; }

events() {
    if [ ! -s "$1" ]; then
        echo "(no events)"
        return
    fi
    "$PY" "${srcdir:-.}/libelastic/check_events.py" "$1"
}

# show_failure OUT: the job's output, as TAP diagnostics
show_failure() { diag "output (last 40 lines):" "$(tail -n 40 "$1" | tr -d '\0')"; }

# same_step_events NAME FILE STEP OLD A B: the event log of ranks A and B
# killed at the same step of a job of OLD ranks: one recovery (OLD -> OLD-2,
# failed=A,B) or, when one of the two had not reached that step when the
# other's death was agreed on (descheduled on a loaded machine), two, in
# either order; every recovery rolls back to STEP.  One TAP line.
same_step_events() {
    local name=$1 f=$2 step=$3 old=$4 a=$5 b=$6 got
    local mid=$(($4 - 1)) new=$(($4 - 2))
    local one="reshard_down $step $old->$new failed=$a,$b spares= attempts=1"
    local ab="reshard_down $step $old->$mid failed=$a spares= attempts=1"$'\n'"reshard_down $step $mid->$new failed=$b spares= attempts=1"
    local ba="reshard_down $step $old->$mid failed=$b spares= attempts=1"$'\n'"reshard_down $step $mid->$new failed=$a spares= attempts=1"
    got=$(events "$f")
    if [ "$got" = "$one" ] || [ "$got" = "$ab" ] || [ "$got" = "$ba" ]; then
        ok 0 "$name: the event log (ranks $a and $b lost, rolled back to step $step)"
    else
        ok 1 "$name: the event log (ranks $a and $b lost, rolled back to step $step)"
        diag "expected: $one (or the two deaths one after the other)" "got: $got"
    fi
}
