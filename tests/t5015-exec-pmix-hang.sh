#!/bin/bash
# t5015-exec-pmix-hang.sh - a hung rank under `elastic-exec --nproc-per-node 8
# --hang-timeout T` is killed alone, and the survivors recover in place
#
# One rank that stops (SIGSTOP from outside, at a time taken from the job's
# own progress) or spins without progress (heat2d's --fail RANK:STEP:spin,
# after its step's halo exchange) blocks every other rank in its next
# exchange, so all eight stop reporting.  The watchdog must kill only the
# hung one(s) - every overdue rank whose process is stopped, else the one
# that stopped reporting first - give the others a fresh timeout, and let
# them recover in place: the failure-free checksum, the victims and nobody
# else in watchdog_fire and rank_lost, no restart.  Nothing may be left
# behind.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] || skip_all "the examples are not built"

# about 5 ms a step (--sleep), so that a stop lands in the middle of the run
heat=("$HEAT2D" --nx 64 --ny 64 --steps 400 --sleep 5 --progress 10)
# a timeout with room for the survivors' recovery on a loaded machine (no
# step goes by while they recover; libelastic marks its start and end)
hang=(--hang-timeout 8)

ep_start ref 8 -- "${heat[@]}"
ep_wait 180
ref=$(ep_checksum)
is "$EP_RC" 0 "reference run: exit 0 (checksum $ref)" || diag "$(ep_err)"

# recovered NAME WORLD VICTIMS: the job ended with the checksum in a world
# of WORLD, the watchdog killed exactly VICTIMS, and they were lost in place
recovered() {
    local name=$1 world=$2 victims=$3 v
    is "$EP_RC" 0 "$name: exit 0" || diag "$(ep_err)"
    is "$(ep_checksum)" "$ref" "$name: the failure-free checksum" || diag "$(ep_out)"
    grep -q "^final world $world," "$ep_dir/out"
    ok $? "$name: the survivors finished in a world of $world" || diag "$(ep_out)"
    for v in $victims; do
        is "$(ep_ev watchdog_fire kind=hang rank="$v")/$(ep_ev rank_lost rank="$v")" "1/1" \
            "$name: the watchdog killed rank $v, which was lost in place"
    done
    is "$(ep_ev watchdog_fire)/$(ep_ev rank_lost)/$(ep_ev restart)" \
        "$(echo $victims | wc -w)/$(echo $victims | wc -w)/0" \
        "$name: nobody else was killed or lost, no restart"
    ep_check_clean "$name"
}

# stopped NAME RANKS...: SIGSTOP the ranks once the job reached step 100
stopped() {
    local name=$1 r
    shift
    ep_start "$name" 8 "${hang[@]}" -- "${heat[@]}"
    if wait_for_grep '^step 100$' "$ep_dir/out" 120; then
        for r in "$@"; do
            kill -STOP "$(ep_rank_pid "$r")"
        done
    else
        diag "$name: the job did not reach step 100"
    fi
    ep_wait 180
    recovered "$name" $((8 - $#)) "$*"
    for r in "$@"; do
        is "$(ep_ev watchdog_fire rank="$r" stopped=True)" 1 "$name: rank $r was found stopped"
    done
}

stopped stop-one 3
stopped stop-rank0 0
stopped stop-two 2 5

# a rank that spins on the CPU without progress (not stopped): the first
# to stop reporting is the one
ep_start spin 8 "${hang[@]}" -- "${heat[@]}" --fail 4:150:spin
ep_wait 180
recovered spin 7 4
is "$(ep_ev watchdog_fire rank=4 stopped=False)" 1 "spin: rank 4 was found by its heartbeat, not its state"

done_testing
