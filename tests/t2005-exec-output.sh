#!/bin/bash
# t2005-exec-output.sh - worker output: --redirects to per-attempt, per-rank
# files, --tee to files and the console, prefixes (tee's default and
# --log-line-prefix-template), --local-ranks-filter, the duplicate filters,
# a per-rank map, a last line without a newline, and the last words of a
# worker that is killed (its stdout is a pty, line-buffered as under mpirun,
# wherever it goes: the console, a file, a prefix; agent and wrapper mode).
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT
host=$(hostname)

# 1. --redirects 3: nothing on the console, everything in the files
"$EXEC" --nproc-per-node 2 --redirects 3 --log-dir "$tmp/l1" --run-id r1 \
    "$WORKER" print:3:out eprint:2:err > "$tmp/out" 2> "$tmp/err"
is "$?" 0 "redirected run"
is "$(grep -c rank= "$tmp/out" "$tmp/err" | awk -F: '{s+=$2} END {print s}')" 0 "no worker line on the console"
is "$(cat "$tmp/l1/r1/attempt_0/1/stdout.log")" "$(printf 'out rank=1 i=%d\n' 0 1 2)" "rank 1's stdout.log has its 3 lines, raw"
is "$(cat "$tmp/l1/r1/attempt_0/0/stderr.log")" "$(printf 'err rank=0 i=%d\n' 0 1)" "rank 0's stderr.log has its 2 lines"

# 2. --tee 1: stdout to file and console with torchrun's default prefix
"$EXEC" --nproc-per-node 2 --tee 1 --log-dir "$tmp/l2" --run-id r2 --role trainer \
    "$WORKER" print:2:hello eprint:1:oops > "$tmp/out" 2> "$tmp/err"
is "$(grep -c '^\[trainer1\]:hello rank=1 i=' "$tmp/out")" 2 "tee: console lines carry [trainer1]:"
is "$(grep -c '^oops rank=' "$tmp/err")" 2 "tee 1 leaves stderr alone (direct, unprefixed)"
is "$(cat "$tmp/l2/r2/attempt_0/0/stdout.log")" "$(printf 'hello rank=0 i=%d\n' 0 1)" "and the file has the raw lines"
ok $([ ! -e "$tmp/l2/r2/attempt_0/0/stderr.log" ]; echo $?) "no stderr.log without tee/redirect of stderr"

# 3. --log-line-prefix-template
"$EXEC" --nproc-per-node 2 --log-line-prefix-template '[${role_name}:${rank}/${local_rank}@${hostname}] ' \
    "$WORKER" print:1:x eprint:1:y > "$tmp/out" 2> "$tmp/err"
is "$(grep -c "^\[default:1/1@$host\] x rank=1 i=0$" "$tmp/out")" 1 "the template prefixes stdout"
is "$(grep -c "^\[default:0/0@$host\] y rank=0 i=0$" "$tmp/err")" 1 "and stderr"

# 4. a per-rank map: rank 0 to files, rank 1 to the console
"$EXEC" --nproc-per-node 2 --redirects 0:3,1:0 --log-dir "$tmp/l4" --run-id r4 \
    "$WORKER" print:2:m > "$tmp/out" 2> "$tmp/err"
is "$(grep -c 'rank=0' "$tmp/out") $(grep -c 'rank=1' "$tmp/out")" "0 2" "0:3,1:0: rank 0 off the console, rank 1 on it"
is "$(wc -l < "$tmp/l4/r4/attempt_0/0/stdout.log")" 2 "rank 0's lines are in its file"
ok $([ ! -e "$tmp/l4/r4/attempt_0/1/stdout.log" ]; echo $?) "rank 1 has no file"

# 5. --local-ranks-filter: console for rank 1 only; files untouched
"$EXEC" --nproc-per-node 3 --local-ranks-filter 1 --tee 3 --log-dir "$tmp/l5" --run-id r5 \
    "$WORKER" print:2:f eprint:2:g > "$tmp/out" 2> "$tmp/err"
is "$(grep -c 'rank=' "$tmp/out") $(grep -c 'rank=1' "$tmp/out")" "2 2" "only rank 1's stdout on the console"
is "$(grep -c 'rank=' "$tmp/err")" 2 "only rank 1's stderr on the console"
is "$(cat "$tmp"/l5/r5/attempt_0/*/stdout.log | wc -l)" 6 "the tee files still have every rank's lines"

# 6. --duplicate-stdout-filters / --duplicate-stderr-filters
"$EXEC" --nproc-per-node 2 --tee 3 --log-dir "$tmp/l6" --run-id r6 \
    --duplicate-stdout-filters apple,orange --duplicate-stderr-filters pear \
    "$WORKER" print:1:apple print:1:banana print:1:orange eprint:1:pear eprint:1:plum > "$tmp/out" 2> "$tmp/err"
f=$tmp/l6/r6/attempt_0/filtered_stdout.log
is "$(sort "$f")" "$(printf '[default%d]:%s rank=%d i=0\n' 0 apple 0 0 orange 0 1 apple 1 1 orange 1 | sort)" \
    "filtered_stdout.log has exactly the apple and orange lines of both ranks, prefixed"
is "$(sort "$tmp/l6/r6/attempt_0/filtered_stderr.log")" "$(printf '[default%d]:pear rank=%d i=0\n' 0 0 1 1)" \
    "filtered_stderr.log has the pear lines"
is "$(grep -c banana "$tmp/out")" 2 "the console still has every line"

# 7. a last line without a newline is not lost
"$EXEC" --tee 1 "$WORKER" print:1:first partial:tail-without-newline > "$tmp/out" 2> "$tmp/err"
is "$(tail -n 1 "$tmp/out")" "[default0]:tail-without-newline" "the partial last line reaches the console"

# 8. one directory per attempt
"$EXEC" --nproc-per-node 2 --max-restarts 1 --redirects 1 --log-dir "$tmp/l8" --run-id r8 \
    "$WORKER" print:1:attempt "ready:$tmp" "waitfor:$tmp/ready.0.0" "crash:1:0:exit=2" "crash:*:0:hang" \
    > "$tmp/out" 2> "$tmp/err"
is "$?" 0 "a restart with redirected output"
ok $([ -s "$tmp/l8/r8/attempt_0/0/stdout.log" ] && [ -s "$tmp/l8/r8/attempt_1/0/stdout.log" ]; echo $?) \
    "attempt_0 and attempt_1 each have rank 0's stdout.log"

# 9. last words: a worker's stdout is a pseudo-terminal unless it goes to a
#    terminal already, so its C library (here Python's) line-buffers it and
#    the lines it printed before it was killed are not lost in a buffer
# (each waits until every worker has printed before it dies: the first death
# stops the group, which must not stop a worker before it printed)
lastwords='import os, sys, time
print("tty=%d" % os.isatty(1)); print("last words of", os.environ["RANK"])
open("%s/printed.%s" % (sys.argv[1], os.environ["RANK"]), "w").close()
for i in range(3000):
    if all(os.path.exists("%s/printed.%d" % (sys.argv[1], r)) for r in range(int(os.environ["LOCAL_WORLD_SIZE"]))):
        break
    time.sleep(0.01)
os.kill(os.getpid(), 9)'
lw() { rm -rf "$tmp/lw"; mkdir -p "$tmp/lw"; "$@"; }
lw "$EXEC" --nproc-per-node 2 "$PY" -c "$lastwords" "$tmp/lw" > "$tmp/out" 2> "$tmp/err"
is "$?" 137 "killed workers: the group failed with SIGKILL"
is "$(grep -c '^tty=1$' "$tmp/out")/$(grep -c '^last words of [01]$' "$tmp/out")" "2/2" \
    "agent mode, console a file: both workers saw a terminal, and both last lines arrived" || diag "$(cat "$tmp/out")"
lw "$EXEC" --nproc-per-node 2 --tee 1 --log-dir "$tmp/l9" --run-id r9 "$PY" -c "$lastwords" "$tmp/lw" \
    > "$tmp/out" 2> "$tmp/err"
is "$(grep -c '^\[default[01]\]:last words of [01]$' "$tmp/out")/$(cat "$tmp"/l9/r9/attempt_0/*/stdout.log | grep -c '^last words')" \
    "2/2" "--tee 1: the last lines reached the prefixed console and the files"
lw "$EXEC" --nproc-per-node 2 --redirects 1 --log-dir "$tmp/l9b" --run-id r9 "$PY" -c "$lastwords" "$tmp/lw" \
    > "$tmp/out" 2> "$tmp/err"
is "$(cat "$tmp"/l9b/r9/attempt_0/*/stdout.log | grep -c '^last words')" 2 "--redirects 1: the last lines reached the files"
lw "$EXEC" --nproc-per-node 2 "$PY" -c "$lastwords" "$tmp/lw" 2> "$tmp/err" | cat > "$tmp/out"
is "$(grep -c '^last words of [01]$' "$tmp/out")" 2 "console a pipe: both last lines arrived"
SLURM_JOB_ID=77 SLURM_STEP_ID=3 SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=1 SLURM_LOCALID=0 SLURM_NODEID=0 \
    SLURM_STEP_TASKS_PER_NODE=1 lw "$EXEC" "$PY" -c "$lastwords" "$tmp/lw" > "$tmp/out" 2> "$tmp/err"
is "$?" 137 "wrapper mode: the wrapper dies of the worker's SIGKILL"
is "$(cat "$tmp/out")" "$(printf 'tty=1\nlast words of 0')" "wrapper mode: the last line arrived" || diag "$(cat "$tmp/err")"
# the bytes pass unchanged: no "\r\n", control characters and a last partial line kept
"$EXEC" "$PY" -c 'import sys; sys.stdout.buffer.write(b"a\nb\r\nc\x00\x03\x04\x1a d")' > "$tmp/out" 2> "$tmp/err"
is "$?" 0 "binary output: exit 0"
is "$(od -An -c "$tmp/out" | tr -s ' ')" "$(printf 'a\nb\r\nc\0\003\004\032 d' | od -An -c | tr -s ' ')" \
    "binary output: the bytes arrive unchanged"
"$EXEC" "$PY" -c 'import os, sys; sys.stderr.write("fd1=%s\n" % os.readlink("/proc/self/fd/1"))' \
    > /dev/null 2> "$tmp/err"
is "$(sed -n 's/^fd1=//p' "$tmp/err")" /dev/null "a console on /dev/null is inherited (no pty)"
done_testing
