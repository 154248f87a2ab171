# tap.sh - TAP output and event waits for elastic's shell tests (source it)
#
#   plan N | skip_all WHY | ok COND-STATUS DESC | run_ok DESC CMD... |
#   is GOT WANT DESC | diag TEXT | done_testing
#   wait_for_file FILE TIMEOUT
#   wait_for_grep PATTERN FILE TIMEOUT
#   wait_for_exit PID TIMEOUT
#
# Waits poll for an event with a generous timeout; none sleeps a fixed time
# and hopes.

tap_n=0
tap_failed=0

plan() { echo "1..$1"; }
skip_all() {
    echo "1..0 # SKIP $*"
    exit 0
}
diag() { printf '%s\n' "$@" | sed 's/^/# /'; }

# ok STATUS DESC: STATUS 0 is a pass.
ok() {
    tap_n=$((tap_n + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tap_n - $2"
    else
        tap_failed=$((tap_failed + 1))
        echo "not ok $tap_n - $2"
    fi
    return "$1"
}

# run_ok DESC CMD...: pass if CMD exits 0; show its output when it does not.
run_ok() {
    local desc=$1 out rc=0
    shift
    out=$("$@" 2>&1) || rc=$?
    ok $rc "$desc" || diag "command: $*" "exit status: $rc" "output (last 30 lines):" "$(printf '%s\n' "$out" | tail -n 30)"
}

# is GOT WANT DESC
is() {
    if [ "$1" = "$2" ]; then
        ok 0 "$3"
    else
        ok 1 "$3"
        diag "expected: '$2'" "got:      '$1'"
        return 1
    fi
}

skip() {
    tap_n=$((tap_n + 1))
    echo "ok $tap_n # SKIP $*"
}

done_testing() {
    echo "1..$tap_n"
    [ "$tap_failed" -eq 0 ]
}

# now_ms: milliseconds since the epoch
now_ms() { date +%s%3N; }

# wait_until TIMEOUT CMD...: poll CMD every 50 ms until it succeeds.
wait_until() {
    local timeout=$1 deadline
    shift
    deadline=$(($(now_ms) + timeout * 1000))
    while ! "$@" > /dev/null 2>&1; do
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

wait_for_file() { wait_until "$2" test -e "$1"; }
wait_for_grep() { wait_until "$3" grep -q -e "$1" "$2"; }
wait_for_exit() { wait_until "$2" eval "! kill -0 $1"; }
