#!/bin/bash
# t2008-exec-badinput.sh - bad input: one clear line naming the problem, exit 2.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT
touch "$tmp/not-exec"

# bad DESC PATTERN ARGS...: exit 2, one line on stderr matching PATTERN, no worker ran
bad() {
    local desc=$1 pat=$2 out rc
    shift 2
    out=$("$EXEC" "$@" 2>&1 > /dev/null)
    rc=$?
    if [ "$rc" -eq 2 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -qF -- "$pat"; then
        ok 0 "$desc"
    else
        ok 1 "$desc"
        diag "exit $rc, expected 2 and one line containing: $pat" "$out"
    fi
}

bad "unknown flag" "unknown option '--bogus'" --bogus 1 "$WORKER"
bad "unknown short flag" "unknown option '-z'" -z "$WORKER"
bad "flag without its value" "--max-restarts needs a value" --max-restarts
bad "not a number" "--max-restarts: 'three' is not an integer" --max-restarts three "$WORKER"
bad "negative restarts" "--max-restarts: -1 is out of range" --max-restarts -1 "$WORKER"
bad "bad nproc" "--nproc-per-node: 'lots' is not an integer (expected 1..4096) or one of auto, cpu, gpu" --nproc-per-node lots "$WORKER"
bad "malformed redirects map" "--redirects: '0:3,1' is not a value or a per-local-rank map" --redirects 0:3,1 "$WORKER"
bad "redirects value out of range" "--tee: '4' is not a value or a per-local-rank map" --tee 4 "$WORKER"
bad "duplicate rank in a map" "names local rank 0 twice" -r 0:1,0:2 "$WORKER"
bad "unclosed template" "--log-line-prefix-template: '[\${rank' has an unclosed '\${'" --log-line-prefix-template '[${rank' "$WORKER"
bad "unknown template variable" "uses unknown variable '\${node}'" --log-line-prefix-template '${node}:' "$WORKER"
bad "bad rank filter" "--local-ranks-filter: '0,x' is not a list of local ranks" --local-ranks-filter 0,x "$WORKER"
bad "bad duration" "--monitor-interval: 'soon' is not a duration" --monitor-interval soon "$WORKER"
bad "bad signal" "--signals-to-handle: 'SIGNOPE' is not a signal that can be handled" --signals-to-handle SIGTERM,SIGNOPE "$WORKER"
bad "SIGKILL cannot be handled" "'SIGKILL' is not a signal that can be handled" --preempt-signals SIGKILL "$WORKER"
bad "bad stop signal" "--stop-signal: 'SOFTLY' is not a signal" --stop-signal SOFTLY "$WORKER"
bad "bad boolean" "--virtual-local-rank: 'maybe' is not a boolean" --virtual-local-rank=maybe "$WORKER"
bad "in-place restarts need the hosted PMIx server" "--restart-policy: 'in-place' needs the hosted PMIx server" --restart-policy in-place --wireup none "$WORKER"
bad "unknown restart policy" "--restart-policy: 'never' is not a restart policy (accepted: in-place, group)" --restart-policy never "$WORKER"
bad "unknown wire-up" "--wireup: 'mpich' is not a wire-up (accepted: pmix, none, inherit)" --wireup mpich "$WORKER"
bad "unknown BTL" "--mpi-btl: 'ib' is not accepted (sm, tcp, sm,tcp)" --mpi-btl ib "$WORKER"
bad "init timeout without the hosted server" "--init-timeout: only the hosted PMIx server sees MPI_Init" --init-timeout 5 --wireup none "$WORKER"
bad "bad init timeout" "--init-timeout: 'soon' is" --init-timeout soon "$WORKER"
ELASTIC_WIREUP=bogus bad "bad ELASTIC_WIREUP" "ELASTIC_WIREUP: 'bogus' is not a wire-up (accepted: pmix, none, inherit)" "$WORKER"
OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 bad "the hosted server in wrapper mode" "--wireup: 'pmix'" --wireup pmix "$WORKER"
bad "bad port" "--master-port: 70000 is out of range" --master-port 70000 "$WORKER"
export ELASTIC_MAX_RESTARTS=x
bad "bad variable" "ELASTIC_MAX_RESTARTS: 'x' is not an integer" "$WORKER"
unset ELASTIC_MAX_RESTARTS
bad "no program" "no program to run" --nproc-per-node 2
bad "missing entrypoint" "entrypoint './no-such-program': No such file or directory" ./no-such-program
bad "entrypoint not in PATH" "entrypoint 'no-such-program-anywhere': not found in PATH" no-such-program-anywhere
bad "entrypoint not executable" "entrypoint '$tmp/not-exec': not executable" "$tmp/not-exec"
bad "entrypoint is a directory" "entrypoint '$tmp': not a regular file" "$tmp"
bad "event log cannot be opened" "event-log: cannot open $tmp/no/such/dir/ev" --event-log "$tmp/no/such/dir/ev" "$WORKER"

# a master port in use
$PY -c 'import socket,time; s=socket.socket(); s.bind(("0.0.0.0",0)); s.listen(); print(s.getsockname()[1], flush=True); time.sleep(60)' > "$tmp/busy" &
busy=$!
wait_until 10 test -s "$tmp/busy"
port=$(cat "$tmp/busy")
bad "master port in use" "master-port: port $port cannot be used (Address already in use)" --master-port "$port" "$WORKER"
kill "$busy"
done_testing
