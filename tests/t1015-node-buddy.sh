#!/bin/bash
# t1015-node-buddy.sh - L2 buddies live on another node: losing a whole
# node loses no data.  ELASTIC_TEST_RANKS_PER_NODE=4 makes libelastic treat
# ranks 0-3 and 4-7 as two nodes (this machine has one).
. "${srcdir:-.}/lib/mpitest.sh"
. "${srcdir:-.}/libelastic/elastic.sh"

mpi_have_ulfm || skip_all "this MPI has no ULFM (relaunch-only mode)"
tmp=$(mktemp -d)
trap 'mpi_kill_job; rm -rf "$tmp"' EXIT
export ELASTIC_SNAPSHOT_PERIOD=7
HEAT="$EXAMPLES/heat2d --nx 96 --ny 80 --steps 1000"

app_run "$tmp/ref" 8 $HEAT
ref=$(checksum_of "$tmp/ref")
is "$MPI_RC" 0 "reference run"

# kill_node OUT: once rank 0 has passed step 200, SIGKILL ranks 4-7 at once
# (as when their node dies; dying at a given step instead lets a slower
# rank see the others' death before its own and recover alone)
kill_node() {
    local pids=() p r
    wait_for_grep "<stdout>: step 0\$" "$1" 120 || return 1
    for p in $(mpi_job_pids); do # one scan of /proc (slow on a loaded machine)
        r=$({ tr '\0' '\n' < "/proc/$p/environ"; } 2> /dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
        case "$r" in 4 | 5 | 6 | 7) pids+=("$p") ;; esac
    done
    [ ${#pids[@]} = 4 ] || return 1
    wait_for_grep "<stdout>: step 200\$" "$1" 120 || return 1
    kill -KILL "${pids[@]}"
}

# the whole second "node" dies at once
out="$tmp/node"
mpi_start "$out" 8 -x ELASTIC_TEST_RANKS_PER_NODE=4 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --sleep 4 --progress 100
kill_node "$out"
ok $? "node loss: ranks 4-7 killed together after step 200"
mpi_wait 120
is "$MPI_RC" 0 "node loss: the job succeeded" || show_failure "$out"
is "$(checksum_of "$out")" "$ref" "node loss: the failure-free checksum"
events "$out.events" | grep -q '^reshard_down [0-9]* 8->4 failed=4,5,6,7 spares= attempts=1$' &&
    [ "$(events "$out.events" | wc -l)" = 1 ]
ok $? "node loss: one event, 8 -> 4" || diag "$(events "$out.events")"

# with buddies on the same node (no node information), the same loss is final
out="$tmp/same-node"
mpi_start "$out" 8 -x ELASTIC_EVENT_LOG="$out.events" -- $HEAT --sleep 4 --progress 100
kill_node "$out"
mpi_wait 120
is "$MPI_RC" 76 "same node: the loss is final (ELASTIC_EXIT_RELAUNCH)"
grep -aq 'ranks 4 and 5 both failed' "$out"
ok $? "same node: the message names rank 4 and its buddy 5" || show_failure "$out"
done_testing
