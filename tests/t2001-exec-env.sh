#!/bin/bash
# t2001-exec-env.sh - the environment contract elastic-exec gives its workers
# (torchrun's variables, the TORCHELASTIC_* aliases, elastic's own), dumped
# by real worker processes; settings from ELASTIC_* variables; ${local_rank}.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT

# env_of DIR RANK RESTART NAME: a variable from a worker's dump
env_of() { sed -n "s/^$4=//p" "$1/env.$2.$3"; }

d=$tmp/a
mkdir -p "$d"
exec_start "$tmp/out" "$tmp/err" --nproc-per-node 3 --role trainer --max-restarts 2 \
    --run-id envtest --log-dir "$tmp/logs" "$WORKER" "env:$d"
exec_wait 60
is "$EXEC_RC" 0 "3 workers ran and exited 0" || diag "$(cat "$tmp/err")"
port=$(env_of "$d" 0 0 MASTER_PORT)
for r in 0 1 2; do
    f=$d/env.$r.0
    ok $([ -f "$f" ]; echo $?) "rank $r dumped its environment"
    want="RANK=$r LOCAL_RANK=$r GROUP_RANK=0 ROLE_RANK=$r ROLE_NAME=trainer LOCAL_WORLD_SIZE=3
          WORLD_SIZE=3 GROUP_WORLD_SIZE=1 ROLE_WORLD_SIZE=3 MASTER_ADDR=127.0.0.1
          MASTER_PORT=$port ELASTIC_RESTART_COUNT=0 ELASTIC_MAX_RESTARTS=2 ELASTIC_RUN_ID=envtest
          TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=2 TORCHELASTIC_RUN_ID=envtest
          TORCHELASTIC_USE_AGENT_STORE=False OMP_NUM_THREADS=1 NCCL_ASYNC_ERROR_HANDLING=1
          ELASTIC_ERROR_FILE=$tmp/logs/envtest/attempt_0/$r/error.json
          TORCHELASTIC_ERROR_FILE=$tmp/logs/envtest/attempt_0/$r/error.json
          ELASTIC_HEARTBEAT_FILE=$tmp/logs/envtest/attempt_0/$r/heartbeat"
    missing=
    for kv in $want; do grep -qxF -- "$kv" "$f" || missing="$missing $kv"; done
    is "$missing" "" "rank $r: the contract's variables and values"
done
ok $([[ $port =~ ^[0-9]+$ ]] && [ "$port" -gt 0 ]; echo $?) "MASTER_PORT is a port ($port)"
hb=$tmp/logs/envtest/attempt_0/0/heartbeat
is "$(stat -c %s "$hb" 2> /dev/null)" 168 "the heartbeat file exists, sized as struct elastic_heartbeat (version 4)"
is "$(od -An -v -tx1 "$hb" | tr -d ' \n' | tr -d 0)" "" "the heartbeat file is zero-filled"
ok $(grep -q '^TORCHELASTIC_TIMER_FILE=' "$d/env.0.0"; echo $((!$?))) "no timer file unless enabled"

# OMP_NUM_THREADS: kept when set, absent for a single worker
d=$tmp/b
mkdir -p "$d"
OMP_NUM_THREADS=4 "$EXEC" --nproc-per-node 2 "$WORKER" "env:$d" 2> "$tmp/err"
is "$(env_of "$d" 1 0 OMP_NUM_THREADS)" 4 "OMP_NUM_THREADS set by the user is kept"
d=$tmp/c
mkdir -p "$d"
"$EXEC" "$WORKER" "env:$d" 2> "$tmp/err"
is "$(env_of "$d" 0 0 OMP_NUM_THREADS)" "" "one worker: OMP_NUM_THREADS left unset"
is "$(env_of "$d" 0 0 WORLD_SIZE)" 1 "no launcher and no flag: one local worker"

# settings from ELASTIC_* variables; flags win
d=$tmp/e
mkdir -p "$d"
ELASTIC_NPROC_PER_NODE=2 ELASTIC_ROLE=fromenv ELASTIC_MAX_RESTARTS=5 "$EXEC" --max-restarts 1 \
    "$WORKER" "env:$d" 2> "$tmp/err"
is "$(env_of "$d" 1 0 WORLD_SIZE)" 2 "ELASTIC_NPROC_PER_NODE=2 starts two workers"
is "$(env_of "$d" 0 0 ROLE_NAME)" fromenv "ELASTIC_ROLE sets the role"
is "$(env_of "$d" 0 0 ELASTIC_MAX_RESTARTS)" 1 "a flag wins over ELASTIC_MAX_RESTARTS"

# --virtual-local-rank: LOCAL_RANK 0, one device each
d=$tmp/v
mkdir -p "$d"
CUDA_VISIBLE_DEVICES=4,5,6 "$EXEC" --nproc-per-node 3 --virtual-local-rank "$WORKER" "env:$d" 2> "$tmp/err"
is "$(env_of "$d" 2 0 LOCAL_RANK) $(env_of "$d" 2 0 CUDA_VISIBLE_DEVICES)" "0 6" \
    "--virtual-local-rank: LOCAL_RANK=0 and the third visible device for local rank 2"

# the ${local_rank} macro in arguments (torchelastic's)
mkdir -p "$tmp/m0" "$tmp/m1"
"$EXEC" --nproc-per-node 2 "$WORKER" 'env:'"$tmp"'/m${local_rank}' 2> "$tmp/err"
ok $([ -f "$tmp/m0/env.0.0" ] && [ -f "$tmp/m1/env.1.0" ]; echo $?) '${local_rank} in an argument is the local rank'

# the file timer's FIFO is named in both variables
d=$tmp/t
mkdir -p "$d"
"$EXEC" --nproc-per-node 1 --enable-file-timer "$WORKER" "env:$d" 2> "$tmp/err"
tf=$(env_of "$d" 0 0 TORCHELASTIC_TIMER_FILE)
ok $([ -n "$tf" ] && [ "$tf" = "$(env_of "$d" 0 0 ELASTIC_TIMER_FILE)" ]; echo $?) \
    "--enable-file-timer: TORCHELASTIC_TIMER_FILE = ELASTIC_TIMER_FILE ($tf)"
# wrapper mode reads the task's rank from the launcher's variables (the
# same ones srun and mpiexec.hydra set; mpirun is tested in t2011)
d=$tmp/slurm
mkdir -p "$d"
SLURM_JOB_ID=77 SLURM_STEP_ID=3 SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=8 SLURM_LOCALID=1 SLURM_NODEID=2 \
    SLURM_STEP_TASKS_PER_NODE="2(x2),4" "$EXEC" --wireup inherit "$WORKER" "env:$d" 2> "$tmp/err"
is "$(for v in RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ELASTIC_RUN_ID; do
    env_of "$d" 5 0 $v; done | tr '\n' ' ')" "5 8 1 4 5 8 slurm-77.3 " \
    "Slurm task 5 of 8 on the third node (2(x2),4 tasks per node): its rank, sizes and job id"
d=$tmp/hydra
mkdir -p "$d"
PMI_RANK=2 PMI_SIZE=3 MPI_LOCALRANKID=0 MPI_LOCALNRANKS=1 PMI_KVSNAME=kvs_42 "$EXEC" "$WORKER" "env:$d" 2> "$tmp/err"
is "$(for v in RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE ELASTIC_RUN_ID; do env_of "$d" 2 0 $v; done | tr '\n' ' ')" \
    "2 3 0 1 kvs_42 " "MPICH Hydra's PMI_RANK/PMI_SIZE/MPI_LOCALRANKID"
d=$tmp/sa
mkdir -p "$d"
SLURM_JOB_ID=77 SLURM_STEP_ID=3 SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=8 "$EXEC" --standalone --nproc-per-node 2 "$WORKER" "env:$d" 2> "$tmp/err"
is "$(env_of "$d" 1 0 WORLD_SIZE)" 2 "--standalone --nproc-per-node under a launcher is agent mode"
grep -q "agent mode under Slurm with 8 tasks (--standalone, or --wireup inherit/none): each task runs its own single-node group" "$tmp/err"
ok $? "with a warning that each task is its own group"
# without --standalone a Slurm step of several tasks is mesh mode, which
# needs the step's node list
rc=0
SLURM_JOB_ID=77 SLURM_STEP_ID=3 SLURM_PROCID=5 SLURM_STEP_NUM_TASKS=8 "$EXEC" --nproc-per-node 2 "$WORKER" "env:$d" 2> "$tmp/err" || rc=$?
is "$rc" 2 "--nproc-per-node in a Slurm step of 8 tasks is mesh mode: without a node list, exit 2"
grep -q "SLURM_STEP_NODELIST is not set" "$tmp/err"
ok $? "naming the missing variable" || diag "$(cat "$tmp/err")"
PMIX_RANK=0 "$EXEC" "$WORKER" 2> "$tmp/err"
is "$?" 2 "PMIX_RANK without any world size is a usage error"
done_testing
