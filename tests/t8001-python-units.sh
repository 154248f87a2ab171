#!/bin/bash
# t8001-python-units.sh - unit tests of the Python binding: every misuse a
# clear exception, never a crash (python/units.py, under mpirun at 2 ranks);
# the registered ndarrays' own memory is what libelastic writes to L3 (read
# back with h5py) and what a resume restores in place; importing mpi4py
# before elastic with another libmpi is an ImportError naming both; a
# handler that raises under a real SIGKILL is retried, then the final
# RelaunchError carries it as __cause__ and the job exits 76.
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"
. "${srcdir:-.}/python/python.sh"

py_skip_unless_built
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT

# 1. the units, as a TAP sub-stream
app_run "$tmp/units" 2 -x PYTHONPATH="$PYPATH" -x HAVE_ULFM -- "$PY" "$srcdir/python/units.py" "$tmp"
is "$MPI_RC" 0 "units.py at 2 ranks: every check passed" || show_failure "$tmp/units"
n=$(rank_output 0 | grep -c '^ok ')
bad=$(rank_output 0 | grep '^not ok' | head -n 5)
ok $([ "$n" -ge 50 ] && [ -z "$bad" ]; echo $?) "units.py: $n checks ok" || diag "$bad"

# 2. what the program wrote into its ndarrays after registering them is in
# the L3 file: libelastic read their memory (h5py, another process)
run_ok "the L3 file holds the ndarrays' contents (h5py)" "$PY" - "$tmp/l3/snap-000000000005.h5" << 'PYEOF'
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    u, step = f["arrays/u"][()], f["values/step"][()]
    assert u.dtype == np.float64 and u.shape == (10, 4), (u.dtype, u.shape)
    want = np.concatenate([r * 1000 + 5 + np.arange(20.0).reshape(5, 4) for r in (0, 1)])
    assert np.array_equal(u, want), u
    assert int(np.ravel(step)[0]) == 5, step
PYEOF

# 3. import order: mpi4py first loads Debian's libmpi (the loader's default)
out=$(PYTHONPATH="$PYPATH" "$PY" -c '
import mpi4py
mpi4py.rc.initialize = False
from mpi4py import MPI
import elastic' 2>&1)
rc=$?
lib=$(sed -n "s/^LIBMPI = \"\(.*\)\"/\1/p" "$PYPATH/elastic/_build.py")
if [ "$(readlink -f "$(ldconfig -p | sed -n 's/.*libmpi.so.40 (libc6,x86-64) => //p' | head -n 1)")" = "$lib" ]; then
    skip "the loader's libmpi.so.40 is libelastic's: no mismatch to show" 1
else
    ok $([ $rc -ne 0 ] && echo "$out" | grep -q "ImportError: elastic: mpi4py already loaded /[^ ]*libmpi.so[^ ]*, but libelastic was built with $lib"; echo $?) \
        "mpi4py imported first: ImportError naming both libraries" || diag "$out"
fi

# 4. a handler that raises, under a real failure (ULFM)
if mpi_have_ulfm; then
    app_run "$tmp/flaky1" 4 -x PYTHONPATH="$PYPATH" -- "$PY" "$srcdir/python/flaky_handler.py" 1
    is "$MPI_RC" 0 "a handler that raises once: the job recovered" || show_failure "$tmp/flaky1"
    is "$(rank_output 0 | grep '^handler calls')" "handler calls 2, final world 3, sum 553" \
        "... the retry succeeded, with the failure-free sum" || show_failure "$tmp/flaky1"
    grep -q 'elastic: rank [0-9]: the elastic handler raised RuntimeError: rebuild refuses, call 1' "$tmp/flaky1"
    ok $? "... and the exception was reported on stderr"
    app_run "$tmp/flaky-always" 4 -x PYTHONPATH="$PYPATH" -- "$PY" "$srcdir/python/flaky_handler.py" -1
    is "$MPI_RC" 76 "a handler that always raises: exit 76 (relaunch)" || show_failure "$tmp/flaky-always"
    # counted as occurrences, not lines: mpirun's output forwarding can join
    # two ranks' lines into one
    is "$(grep -o 'final RelaunchError: the handler failed 3 times (max_reshard_retry_count 2); relaunch needed; cause: RuntimeError: rebuild refuses, call 3' "$tmp/flaky-always" | wc -l)" 3 \
        "... every survivor got RelaunchError with the C message, the handler's exception as __cause__" ||
        show_failure "$tmp/flaky-always"
else
    skip "no ULFM: no in-place recovery to retry" 5
fi
done_testing
