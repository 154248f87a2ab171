#!/bin/bash
# t5021-exec-multikill.sh - four of eight ranks SIGKILLed at the same step
# while 64 MiB per rank is in flight (the snapshot's L2 exchange overlaps
# the steps): the four survivors recover in place (8 -> 4), every time.
#
# Open MPI 5.0.7's ob1 returned a sender's RGET fragment twice when its
# receiver read the buffer, sent its FIN and died (ULFM's cancel of a send
# to a dead peer returned it, and so did the FIN): a survivor died of
# SIGSEGV in the restore exchange, about 1 run in 15
# (scripts/patches/openmpi-5.0.7-ob1-cancel-rget.patch).  A few runs here;
# bench/multikill.sh runs many and counts.
. "${srcdir:-.}/pmix/exec.sh"

[ "${HAVE_ULFM:-no}" = yes ] || skip_all "no ULFM Open MPI"
[ -x "$HEAT2D" ] || skip_all "heat2d is not built"
RUNS=${ELASTIC_TEST_MULTIKILL_RUNS:-5}
export ELASTIC_SNAPSHOT_PERIOD=50 ELASTIC_SIGNAL_CHECK_PERIOD=1 ELASTIC_RESHARD_CHECK_PERIOD=1
heat=("$HEAT2D" --nx 512 --ny 512 --ballast 64 --steps 300)

ep_start ref 8 --mpi-btl sm,tcp -- "${heat[@]}"
ep_wait 300
is "$EP_RC" 0 "reference: exit 0" || diag "$(tail -n 20 "$ep_dir/err")"
ref=$(ep_checksum)

for i in $(seq 1 "$RUNS"); do
    ep_start "kill4-$i" 8 --mpi-btl sm,tcp -- "${heat[@]}" \
        --fail 1:100 --fail 3:100 --fail 5:100 --fail 7:100
    ep_wait 300
    is "$EP_RC" 0 "run $i: exit 0" || diag "$(grep -a -A6 'Signal:\|lost:' "$ep_dir/err" | head -n 30)"
    is "$(ep_checksum)" "$ref" "run $i: the failure-free checksum ($ref)"
    grep -q '^resharded at step [0-9]*: world 8 -> 4$' "$ep_dir/out" &&
        ! grep -aq 'SIGSEGV\|Segmentation fault' "$ep_dir/err"
    ok $? "run $i: the four survivors recovered in place (8 -> 4), none crashed" ||
        diag "$(grep -a 'resharded\|SIGSEGV\|Segmentation' "$ep_dir/out" "$ep_dir/err" | head -n 10)"
    ep_check_clean "run $i"
done

done_testing
