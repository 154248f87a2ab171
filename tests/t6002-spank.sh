#!/bin/bash
# t6002-spank.sh - spank_elastic.so on the emulated 3-node cluster: srun
# --help shows --elastic; srun/sbatch --elastic=... run every task through
# the task helper and the configured exec= program with the elastic-exec
# flags, with the job's ELASTIC_* settings; the batch script itself is not
# wrapped; bad values are refused before any job exists; a broken exec=
# path never fails a launch or drains a node; an optional plugin that
# cannot be loaded does not break srun.
#
# exec= is a test double here (it records its argv and environment, then
# execs the program after "--"), so that exactly what the plugin passes can
# be checked; t6004 runs the real elastic-exec.
. "${srcdir:-.}/lib/slurm.sh"

slurm_require
build=$(cd "${top_builddir:-..}" && pwd)
plugin=$build/slurm/.libs/spank_elastic.so
shim=$build/slurm/elastic-slurm-task
[ -f "$plugin" ] && [ -x "$shim" ] || {
    echo "not ok 1 - the plugin is built ($plugin, $shim)"
    exit 1
}

tmp=$(mktemp -d /tmp/t6002.XXXXXX)
export REC=$tmp/rec
mkdir -p "$REC" "$tmp/sub"
cat > "$tmp/fake-exec" << 'EOF'
#!/bin/sh
# test double for elastic-exec: record argv and environment, exec the program after "--"
f=$REC/exec.$SLURM_JOB_ID.$SLURM_STEP_ID.$SLURM_PROCID
{ for a in "$@"; do echo "arg $a"; done; env | sort | sed 's/^/env /'; } > "$f.tmp" && mv "$f.tmp" "$f"
while [ $# -gt 0 ] && [ "$1" != "--" ]; do shift; done
shift
exec "$@"
EOF
cat > "$tmp/task" << 'EOF'
#!/bin/sh
# the task: record where it ran and what it saw
f=$REC/task.$SLURM_JOB_ID.$SLURM_STEP_ID.$SLURM_PROCID
{ echo "node $SLURMD_NODENAME"; echo "args $*"; env | sort | sed 's/^/env /'; } > "$f.tmp" && mv "$f.tmp" "$f"
EOF
chmod +x "$tmp/fake-exec" "$tmp/task"
plugline="optional $plugin exec=$tmp/fake-exec shim=$shim snapshot_dir=$tmp/snap"
echo "$plugline" > "$tmp/plugstack.conf"

cluster_up 3 --plugstack "$tmp/plugstack.conf"
rc=$?
# keep the recordings of a failed test (lib/slurm.sh keeps its cluster directory)
trap 'cluster_down > /dev/null; [ "$tap_failed" -eq 0 ] && rm -rf "$tmp"' EXIT
ok $rc "3-node cluster up with spank_elastic.so in plugstack.conf" || {
    done_testing
    exit 1
}
plugstack=$CLUSTER_DIR/etc/plugstack.conf
cd "$tmp/sub" || exit 1

njobs() { run_in_ctl squeue -h -a -t all 2> /dev/null | wc -l; }
# value FILE NAME: the value of NAME in a record's environment
value() { sed -n "s/^env $2=//p" "$1"; }
# args FILE: the recorded argv, space-separated
args() { sed -n 's/^arg //p' "$1" | tr '\n' ' '; }

# --help
run_in_ctl srun --help > "$tmp/help" 2>&1
grep -q -- '--elastic=\[OPTIONS\]' "$tmp/help" && grep -q 'snapshot-period' "$tmp/help"
ok $? "srun --help shows --elastic=[OPTIONS] and its keys"
run_in_ctl sbatch --help 2>&1 | grep -q -- '--elastic'
ok $? "sbatch --help shows --elastic"

# srun --elastic=...: every task wrapped, with the settings
run_in_ctl srun -N3 --ntasks-per-node=2 \
    --elastic=snapshot-period=5,persist-period=20,spare-ranks=1,max-restarts=2,hang-timeout=30,verbose \
    "$tmp/task" a1 "a 2" > "$tmp/out" 2>&1
ok $? "srun -N3 --ntasks-per-node=2 --elastic=... runs" || diag "$(cat "$tmp/out")"
set -- "$REC"/task.*.0.*
is "$#" 6 "six tasks ran"
jobid=$(value "$1" SLURM_JOB_ID)
nodes=$(cat "$REC"/task.*.0.* | sed -n 's/^node //p' | sort | tr '\n' ' ')
is "$nodes" "n1 n1 n2 n2 n3 n3 " "two tasks on each node"
set -- "$REC"/exec.*.0.*
is "$#" 6 "each task was started through exec= (the double recorded six launches)"
bad=0
for r in 0 1 2 3 4 5; do
    e=$REC/exec.$jobid.0.$r
    t=$REC/task.$jobid.0.$r
    [ "$(args "$e")" = "--max-restarts=2 --hang-timeout=30 --verbose -- $tmp/task a1 a 2 " ] || {
        bad=1
        diag "task $r: exec argv: $(args "$e")"
    }
    [ "$(sed -n 's/^args //p' "$t")" = "a1 a 2" ] || bad=1
    for kv in ELASTIC_SNAPSHOT_PERIOD=5 ELASTIC_PERSIST_PERIOD=20 ELASTIC_SPARE_RANKS=1 \
        ELASTIC_SNAPSHOT_DIR=$tmp/snap/$jobid ELASTIC_RUN_ID=$jobid ELASTIC_RESTART_COUNT=0; do
        [ "$(value "$t" "${kv%%=*}")" = "${kv#*=}" ] || {
            bad=1
            diag "task $r: ${kv%%=*}='$(value "$t" "${kv%%=*}")', expected '${kv#*=}'"
        }
    done
    grep -q '^env ELASTIC_RESUME=' "$t" && bad=1
    grep -q '^env ELASTIC_SPANK_' "$t" && bad=1 && diag "task $r: ELASTIC_SPANK_* leaked to the task"
done
ok $bad "each task: exec= got the elastic-exec flags, '--' and the task's argv; the task got ELASTIC_* (snapshot dir and run id per job id), no ELASTIC_RESUME, no ELASTIC_SPANK_*"

# without --elastic nothing happens; wrap=no sets the environment only
rm -f "$REC"/*
run_in_ctl srun -N1 "$tmp/task" > "$tmp/out" 2>&1
set -- "$REC"/exec.*
[ ! -e "$1" ] && ! grep -q '^env ELASTIC_SNAPSHOT_DIR' "$REC"/task.*
ok $? "srun without --elastic: no wrapping, no ELASTIC_* settings"
rm -f "$REC"/*
run_in_ctl srun -N1 --elastic=wrap=no,snapshot-period=9 "$tmp/task" > "$tmp/out" 2>&1
set -- "$REC"/exec.*
[ ! -e "$1" ] && [ "$(value "$REC"/task.* ELASTIC_SNAPSHOT_PERIOD)" = 9 ]
ok $? "--elastic=wrap=no: ELASTIC_* set, the task is not wrapped"

# sbatch --elastic: the batch script gets the settings and is not wrapped;
# the tasks of its srun are wrapped (srun inherits the option)
rm -f "$REC"/*
cat > "$tmp/job.sh" << EOF
#!/bin/sh
#SBATCH -N2 --ntasks-per-node=1 -o $tmp/job.out
#SBATCH --elastic=snapshot-period=7,max-restarts=1,snapshot-dir=$tmp/own
env | sort | sed 's/^/env /' > \$REC/batch.\$SLURM_JOB_ID
srun $tmp/task batch-step
EOF
jobid=$(run_in_ctl sbatch --parsable "$tmp/job.sh" 2>&1)
wait_job_state "$jobid" COMPLETED 60
ok $? "sbatch --elastic job $jobid completed" || diag "$(cat "$tmp/job.out" 2>&1)"
b=$REC/batch.$jobid
[ "$(value "$b" ELASTIC_SNAPSHOT_PERIOD)" = 7 ] && [ "$(value "$b" ELASTIC_SNAPSHOT_DIR)" = "$tmp/own/$jobid" ] \
    && [ "$(value "$b" ELASTIC_RESTART_COUNT)" = 0 ]
ok $? "the batch script has ELASTIC_SNAPSHOT_PERIOD=7, ELASTIC_SNAPSHOT_DIR=<snapshot-dir>/<job id>" \
    || diag "$(grep '^env ELASTIC_' "$b")"
set -- "$REC"/exec.*
is "$*" "$REC/exec.$jobid.0.0 $REC/exec.$jobid.0.1" "only the two tasks of its srun step were wrapped, not the batch script"
is "$(args "$REC/exec.$jobid.0.1")" "--max-restarts=1 -- $tmp/task batch-step " "the step's tasks got the sbatch --elastic flags"
is "$(value "$REC/task.$jobid.0.1" ELASTIC_SNAPSHOT_PERIOD)" 7 "the step's tasks got the sbatch --elastic settings"

# --multi-prog: each task's argv is out of SPANK's reach: not wrapped, said so
rm -f "$REC"/*
printf '0 %s mp0\n1 %s mp1\n' "$tmp/task" "$tmp/task" > "$tmp/multi.conf"
run_in_ctl srun -n2 --elastic=snapshot-period=3 --multi-prog "$tmp/multi.conf" > "$tmp/out" 2>&1
ok $? "srun --elastic --multi-prog runs" || diag "$(cat "$tmp/out")"
set -- "$REC"/exec.*
[ ! -e "$1" ] && [ "$(cat "$REC"/task.* | grep -c '^args mp')" = 2 ] \
    && ! grep -q '^env ELASTIC_SPANK' "$REC"/task.* && [ "$(value "$(ls "$REC"/task.* | head -n 1)" ELASTIC_SNAPSHOT_PERIOD)" = 3 ]
ok $? "its tasks ran unwrapped, with the settings and without ELASTIC_SPANK_*"
grep -q "elastic: --multi-prog tasks are not wrapped: start elastic-exec in the lines of $tmp/multi.conf" "$tmp/out"
ok $? "the user is told why" || diag "$(cat "$tmp/out")"

# bad values: refused where typed, one clear line, no job, no task
rm -f "$REC"/*
before=$(njobs)
run_in_ctl srun -N1 --elastic=snapshot-period=0 "$tmp/task" > "$tmp/out" 2>&1
rc=$?
ok $((rc == 0)) "srun --elastic=snapshot-period=0 fails (exit $rc)"
grep -q 'elastic: --elastic=snapshot-period=0: snapshot-period: 0 is out of range (expected 1\.\.' "$tmp/out"
ok $? "it says which value is wrong and what is accepted" || diag "$(cat "$tmp/out")"
run_in_ctl sbatch --elastic=frobnicate=1 --wrap "$tmp/task" > "$tmp/out" 2>&1
rc=$?
ok $((rc == 0)) "sbatch --elastic=frobnicate=1 fails (exit $rc)"
grep -q "unknown option 'frobnicate' (accepted: snapshot-period," "$tmp/out"
ok $? "it names the unknown key and the accepted ones" || diag "$(cat "$tmp/out")"
run_in_ctl salloc -N1 --elastic=hang-timeout=soon true > "$tmp/out" 2>&1
rc=$?
ok $((rc == 0)) "salloc --elastic=hang-timeout=soon fails (exit $rc)"
grep -q "hang-timeout: 'soon' is not a duration" "$tmp/out"
ok $? "it explains the duration syntax" || diag "$(cat "$tmp/out")"
set -- "$REC"/*
[ ! -e "$1" ] && [ "$(njobs)" = "$before" ]
ok $? "no job was created and no task ran"

# a plugin problem on the nodes never fails the launch or drains a node
echo "optional $plugin exec=$tmp/no-such-exec shim=$shim bogus=1" > "$plugstack"
rm -f "$REC"/*
run_in_ctl srun -N3 --elastic "$tmp/task" > "$tmp/out" 2>&1
ok $? "exec= missing on the nodes: srun --elastic still succeeds" || diag "$(cat "$tmp/out")"
set -- "$REC"/task.*
is "$#" 3 "the tasks ran (unwrapped)"
grep -q "elastic: $tmp/no-such-exec: No such file or directory; the task runs without elastic-exec" "$tmp/out"
ok $? "the user is told why the tasks are not wrapped" || diag "$(cat "$tmp/out")"
grep -q "unknown argument 'bogus=1'" "$tmp/out"
ok $? "an unknown plugstack.conf argument is reported, and ignored" || diag "$(cat "$tmp/out")"
states=$(for n in n1 n2 n3; do node_state $n; done | tr '\n' ' ')
is "$states" "IDLE IDLE IDLE " "no node was drained or downed"

# an optional plugin that cannot be loaded does not break srun
for bad in /nonexistent/spank_elastic.so "$tmp/corrupt.so"; do
    head -c 4096 /dev/urandom > "$tmp/corrupt.so"
    echo "optional $bad" > "$plugstack"
    out=$(run_in_ctl srun -N3 printenv SLURMD_NODENAME 2> "$tmp/err" | sort | tr '\n' ' ')
    is "$out" "n1 n2 n3 " "optional plugin $(basename "$bad") that fails to load: srun still works" \
        || diag "$(cat "$tmp/err")"
done
run_in_ctl srun -N1 --elastic true > "$tmp/out" 2>&1
ok $((!$?)) "...and --elastic is then an unknown option"
echo "$plugline" > "$plugstack"
done_testing
