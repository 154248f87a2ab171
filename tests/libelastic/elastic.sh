# elastic.sh - helpers for libelastic's mpirun tests (source after lib/mpitest.sh)
#
#   app_run OUT N [mpirun args --] PROG ARGS   run a job and wait (RUN_TIMEOUT, 180 s)
#   checksum_of FILE                           the hex checksum rank 0 printed
#   final_world_of FILE                        the final working size printed
#   events FILE                                one summary line per JSON event
#                                              (or BAD: ... if a line is invalid)

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

# events FILE: check_events.py's lines, without the job's last one
# ("completed STEP size=N", which completed_of gives)
events() {
    local out
    out=$([ -s "$1" ] && "$PY" "${srcdir:-.}/libelastic/check_events.py" "$1" | grep -v '^completed ')
    echo "${out:-(no events)}"
}
completed_of() { [ -s "$1" ] && "$PY" "${srcdir:-.}/libelastic/check_events.py" "$1" | grep '^completed '; }

# show_failure OUT: the job's output, as TAP diagnostics
show_failure() { diag "output (last 40 lines):" "$(tail -n 40 "$1" | tr -d '\0')"; }

