#!/bin/bash
# t8003-python-exec.sh - heat2d.py under `elastic-exec --nproc-per-node 8`,
# which hosts the ranks' PMIx server (no mpirun): the C program's checksum;
# one rank SIGKILLed, and two at once, recovered in place to it, no restart;
# a spare taking over; nothing left behind.  elastic.progress(step) feeds
# the agent's --hang-timeout watchdog.
. "${srcdir:-.}/pmix/exec.sh"
. "${srcdir:-.}/python/python.sh"

py_skip_unless_built
[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] || skip_all "the examples are not built"
export PYTHONPATH=$PYPATH
args=(--nx 64 --ny 64 --steps 60)

ep_start c-ref 8 -- "$HEAT2D" "${args[@]}"
ep_wait 180
ref=$(ep_checksum)
is "$EP_RC" 0 "heat2d (C) under elastic-exec: checksum $ref" || diag "$(ep_err)"

ep_start py-ref 8 -- "$PY" "$HEAT_PY" "${args[@]}"
ep_wait 180
is "$EP_RC" 0 "heat2d.py under elastic-exec, 8 ranks: exit 0" || diag "$(ep_err)"
is "$(ep_checksum)" "$ref" "heat2d.py: the C program's checksum"
ep_check_clean "failure-free"

# in_place NAME WORLD VICTIMS [ENV=V...] -- ARGS...
in_place() {
    local name=$1 world=$2 victims=$3 v envs=()
    shift 3
    while [ "$1" != "--" ]; do
        envs+=("$1")
        shift
    done
    shift
    ep_start "$name" 8 ${btl[@]+"${btl[@]}"} -- env "${envs[@]}" "$PY" "$HEAT_PY" "${args[@]}" "$@"
    ep_wait 180
    is "$EP_RC" 0 "$name: exit 0" || diag "$(ep_err)"
    is "$(ep_checksum)" "$ref" "$name: the failure-free checksum" || diag "$(ep_out)"
    grep -q "^final world $world," "$ep_dir/out"
    ok $? "$name: finished in a world of $world" || diag "$(ep_out)"
    for v in $victims; do
        is "$(ep_ev worker_exit rank="$v" state=FAILED signal=SIGKILL in_place=True)/$(ep_ev rank_lost rank="$v")" \
            "1/1" "$name: rank $v's death is in the agent's event log (in place)"
    done
    is "$(ep_ev restart)" 0 "$name: no restart"
    ep_check_clean "$name"
}

in_place one 7 3 -- --fail 3:20
in_place two-at-once 6 "1 4" -- --fail 1:20 --fail 4:20
in_place spare 7 2 ELASTIC_SPARE_RANKS=1 -- --fail 2:20
grep -q 'resharded at step [0-9]*: world 7 -> 7' "$ep_dir/out"
ok $? "spare: the spare took rank 2's place (world 7 -> 7)" || diag "$(ep_out)"
# growing back: two new Python processes (MPI_Comm_spawn of python3
# heat2d.py, served by elastic-exec) take the dead ranks' slots
btl=(--mpi-btl sm,tcp) # Open MPI's sm BTL does not reach a spawned job
in_place grow 8 "1 4" ELASTIC_GROW_POLICY=at-once -- --fail 1:20 --fail 4:20
btl=()
grep -q 'resharded at step [0-9]*: world 6 -> 8' "$ep_dir/out"
ok $? "grow: back to 8 with two new processes (world 6 -> 8)" || diag "$(ep_out)"
is "$(ep_get workers_spawned ranks | tr -d ' []')" "8,9" "grow: elastic-exec started ranks 8 and 9"

# elastic.progress reaches the supervisor: a rank that reported step 5 and
# then stopped is killed by the hang watchdog, which names the step
ep_start hang 1 --hang-timeout 1 -- "$PY" -c 'import elastic, time
elastic.progress(5)
time.sleep(120)'
ep_wait 120
is "$(ep_ev watchdog_fire kind=hang rank=0 step=5)" 1 "elastic.progress(5), then silence: the hang watchdog fired after step 5" ||
    diag "$(ep_err)"
ep_check_clean "hang"
done_testing
