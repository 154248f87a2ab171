#!/bin/bash
# t6004-spank-exec.sh - `srun --elastic` with the real elastic-exec of this
# build on the emulated cluster: every task's process is elastic-exec in
# wrapper mode (with the flags from --elastic) supervising the program as
# a worker whose rank is the Slurm task's; the worker sees the job's
# ELASTIC_* settings; an exit code comes back through srun; a preemption
# signal sent to the job step is relayed and the step ends with the
# suspend code 75.
. "${srcdir:-.}/lib/slurm.sh"

slurm_require
build=$(cd "${top_builddir:-..}" && pwd)
plugin=$build/slurm/.libs/spank_elastic.so
shim=$build/slurm/elastic-slurm-task
exec=$build/src/exec/elastic-exec
[ -f "$plugin" ] && [ -x "$shim" ] || {
    echo "not ok 1 - the plugin is built ($plugin, $shim)"
    exit 1
}
[ -x "$exec" ] || skip_all "elastic-exec is not built in this configuration ($exec)"

tmp=$(mktemp -d /tmp/t6004.XXXXXX)
# each task's elastic-exec supervises its own worker (wrapper mode; the
# mesh, the default under srun, is t6020's)
export ELASTIC_WIREUP=inherit
export REC=$tmp/rec
mkdir -p "$REC"
cat > "$tmp/worker" << 'EOF'
#!/bin/sh
# record what the worker sees; with "wait", suspend on SIGUSR1 (exit 75)
f=$REC/worker.$SLURM_JOB_ID.$SLURM_PROCID
{
    echo "parent $(cat /proc/$PPID/comm)"
    echo "pcmd $(tr '\0' ' ' < /proc/$PPID/cmdline)"
    env | sort | sed 's/^/env /'
} > "$f.tmp" && mv "$f.tmp" "$f"
[ "$1" = wait ] || exit 0
trap 'echo suspended >> "$f"; exit 75' USR1
echo ready >> "$f"
while :; do sleep 0.1; done
EOF
chmod +x "$tmp/worker"
echo "optional $plugin exec=$exec shim=$shim snapshot_dir=$tmp/snap" > "$tmp/plugstack.conf"

cluster_up 2 --plugstack "$tmp/plugstack.conf"
rc=$?
# keep the recordings of a failed test (lib/slurm.sh keeps its cluster directory)
trap 'cluster_down > /dev/null; [ "$tap_failed" -eq 0 ] && rm -rf "$tmp"' EXIT
ok $rc "2-node cluster up, plugin with exec=$exec" || {
    done_testing
    exit 1
}
value() { sed -n "s/^env $2=//p" "$1"; }

run_in_ctl srun -N2 --ntasks-per-node=2 --elastic=snapshot-period=6,max-restarts=1,shutdown-timeout=5 \
    "$tmp/worker" > "$tmp/out" 2>&1
ok $? "srun -N2 --ntasks-per-node=2 --elastic=... under elastic-exec" || diag "$(cat "$tmp/out")"
set -- "$REC"/worker.*
is "$#" 4 "four workers ran"
jobid=$(value "$1" SLURM_JOB_ID)
bad=0
for r in 0 1 2 3; do
    f=$REC/worker.$jobid.$r
    [ "$(sed -n 's/^parent //p' "$f")" = elastic-exec ] || bad=1
    sed -n 's/^pcmd //p' "$f" | grep -q -- "elastic-exec --max-restarts=1 --shutdown-timeout=5 -- $tmp/worker" || bad=1
    [ "$(value "$f" RANK)/$(value "$f" WORLD_SIZE)/$(value "$f" LOCAL_RANK)" \
        = "$r/4/$(value "$f" SLURM_LOCALID)" ] || bad=1
    [ "$(value "$f" ELASTIC_SNAPSHOT_PERIOD)" = 6 ] || bad=1
    [ "$(value "$f" ELASTIC_SNAPSHOT_DIR)" = "$tmp/snap/$jobid" ] || bad=1
    [ $bad = 0 ] || {
        diag "worker $r:" "$(grep -E '^(parent|pcmd|env (RANK|WORLD_SIZE|LOCAL_RANK|SLURM_LOCALID|ELASTIC_SNAPSHOT)[A-Z_]*=)' "$f")"
        break
    }
done
ok $bad "each worker: its parent is elastic-exec with the --elastic flags; RANK/WORLD_SIZE/LOCAL_RANK are the Slurm task's; ELASTIC_* reach it"

run_in_ctl srun -N1 --elastic sh -c 'exit 3' > "$tmp/out" 2>&1
is "$?" 3 "a worker's exit code 3 comes back through elastic-exec and srun"

# preemption notice: SIGUSR1 to the step is relayed, the workers suspend
rm -f "$REC"/*
(
    run_in_ctl srun -N2 --ntasks-per-node=1 --elastic "$tmp/worker" wait > "$tmp/out" 2>&1
    echo $? > "$tmp/rc"
) &
wait_until 60 sh -c "[ \$(grep -l '^ready' '$REC'/worker.* 2> /dev/null | wc -l) -eq 2 ]"
ok $? "two workers wait under elastic-exec"
jobid=$(value "$(ls "$REC"/worker.* | head -n 1)" SLURM_JOB_ID)
run_in_ctl scancel -s USR1 "$jobid"
wait_for_file "$tmp/rc" 60
is "$(cat "$tmp/rc" 2> /dev/null)" 75 "scancel -s USR1: srun ends with the suspend code 75" || diag "$(cat "$tmp/out")"
is "$(grep -l '^suspended' "$REC"/worker.* 2> /dev/null | wc -l)" 2 "both workers got the notice and suspended"
done_testing
