#!/bin/bash
# t4002-binding-apply.sh - real bindings of real processes on this machine
#
# print-binding --apply forks a child that applies a local rank's binding
# and execs a command; the binding is read back from the kernel
# (/proc/PID/status Cpus_allowed_list, /proc/PID/numa_maps) while the
# processes run.  Also: the launcher's binding kept or divided (taskset +
# OMPI_COMM_WORLD_LOCAL_RANK), the OS refusing a memory binding, the GPU
# policy on a node without GPU, and bad input.
. "$srcdir/lib/tap.sh"

PB=$top_builddir/tests/binding/print-binding
XML=$srcdir/binding
tmp=$(mktemp -d "${TMPDIR:-/tmp}/t4002.XXXXXX")
pids=
cleanup() {
    for p in $pids; do kill "$p" 2> /dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
unset HWLOC_XMLFILE HWLOC_THISSYSTEM CUDA_VISIBLE_DEVICES OMPI_COMM_WORLD_LOCAL_RANK \
    MPI_LOCALRANKID SLURM_CPU_BIND_TYPE

# field N of local rank L's line: "rank R local L cpus CPUS (K cores) ..."
cpus_of() { awk -v l="$1" '$4 == l { print $6 }'; }

line=$("$PB" --bind core --nproc 1) || { diag "$line"; skip_all "print-binding fails here"; }
cores=$(printf '%s\n' "$line" | sed -n 's/.* (\([0-9]*\) cores\{0,1\}).*/\1/p')
diag "this machine: $line"

# 1. two ranks bound to distinct cores, read back while both run
if [ "${cores:-0}" -ge 2 ]; then
    plan=$("$PB" --bind core --nproc 2)
    want0=$(printf '%s\n' "$plan" | cpus_of 0)
    want1=$(printf '%s\n' "$plan" | cpus_of 1)
    for r in 0 1; do
        "$PB" --bind core --nproc 2 --apply $r -- \
            sh -c 'echo $$ > "$0.tmp" && mv "$0.tmp" "$0" && exec sleep 300' "$tmp/pid$r" &
        pids="$pids $!"
    done
    wait_for_file "$tmp/pid0" 20 && wait_for_file "$tmp/pid1" 20
    ok $? "two --apply'd ranks are running"
    got0=$(awk '/^Cpus_allowed_list/ { print $2 }' "/proc/$(cat "$tmp/pid0")/status")
    got1=$(awk '/^Cpus_allowed_list/ { print $2 }' "/proc/$(cat "$tmp/pid1")/status")
    is "$got0" "$want0" "--bind core: rank 0 runs on cpus $want0 (kernel: $got0)"
    is "$got1" "$want1" "--bind core: rank 1 runs on cpus $want1 (kernel: $got1)"
    [ "$got0" != "$got1" ]
    ok $? "the two ranks do not share a cpu"
    for p in $(cat "$tmp/pid0" "$tmp/pid1"); do kill "$p"; done
    wait $pids 2> /dev/null
    pids=
else
    skip "one core: no two-rank placement"
    skip "one core"
    skip "one core"
    skip "one core"
fi

# 2. NUMA policy binds memory too (MPOL_BIND, shown as bind:N in numa_maps)
plan=$("$PB" --bind numa --nproc 1)
node=$(printf '%s\n' "$plan" | awk '{ print $10 }')
out=$("$PB" --bind numa --nproc 1 --apply 0 -- cat /proc/self/numa_maps)
printf '%s\n' "$out" | grep -q " bind:$node "
ok $? "--bind numa: the process's memory policy is bind:$node" || diag "$(printf '%s\n' "$out" | head -3)"
out=$("$PB" --bind core --nproc 1 --apply 0 -- cat /proc/self/numa_maps)
! printf '%s\n' "$out" | grep -q " bind:"
ok $? "--bind core: memory left to the default policy"

# 3. a GPU policy on a node without GPU, and too many ranks
if printf '%s\n' "$line" | grep -q 'gpu none'; then
    out=$("$PB" --numa-binding node --nproc 2 2>&1)
    rc=$?
    [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "no GPU for 2 local ranks (hwloc found 0 NVIDIA GPUs)"
    ok $? "--numa-binding node without GPU: exit 1, counts named" || diag "rc $rc: $out"
    out=$("$PB" --bind numa --nproc 1 --virtual-local-rank)
    printf '%s\n' "$out" | grep -q 'gpu none CUDA_VISIBLE_DEVICES unchanged'
    ok $? "--bind numa without GPU: no GPU, CUDA_VISIBLE_DEVICES left alone" || diag "$out"
else
    skip "this machine has a GPU"
    skip "this machine has a GPU"
fi
n=$((cores + 1))
out=$("$PB" --bind core --nproc $n 2>&1)
rc=$?
[ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "$n local ranks need $n cores but the cpuset to divide has $cores"
ok $? "--bind core with $n ranks on $cores cores: exit 1, counts named" || diag "rc $rc: $out"
out=$("$PB" --nproc $n 2> "$tmp/err")
rc=$?
[ $rc -eq 0 ] && grep -q "each rank is bound to its whole NUMA node" "$tmp/err" \
    && [ "$(printf '%s\n' "$out" | wc -l)" -eq $n ]
ok $? "--bind auto with $n ranks: the documented NUMA fallback, noted" || diag "rc $rc: $(cat "$tmp/err")"

# 4. the launcher's binding: divided when we are asked, kept when it says it bound
c=$(printf '%s\n' "$line" | cpus_of 0 | sed 's/[-,].*//')
if command -v taskset > /dev/null 2>&1 && [ "${cores:-0}" -ge 2 ]; then
    c=$(printf '%s\n' "$("$PB" --bind core --nproc 2)" | cpus_of 1 | sed 's/[-,].*//')
    out=$(taskset -c "$c" "$PB" --nproc 1)
    printf '%s\n' "$out" | grep -q "cpus $c (1 core)"
    ok $? "taskset -c $c: the inherited cpuset is what gets divided" || diag "$out"
    out=$(OMPI_COMM_WORLD_LOCAL_RANK=0 taskset -c "$c" "$PB" --nproc 2 2> "$tmp/err")
    [ "$(printf '%s\n' "$out" | grep -c "cpus $c (launcher's binding)")" -eq 2 ] \
        && grep -q "kept the binding of Open MPI's mpirun" "$tmp/err"
    ok $? "mpirun bound us (OMPI_COMM_WORLD_LOCAL_RANK + narrower cpuset): binding kept" || diag "$out" "$(cat "$tmp/err")"
    out=$(OMPI_COMM_WORLD_LOCAL_RANK=0 taskset -c "$c" "$PB" --nproc 2 --apply 1 -- \
        grep Cpus_allowed_list /proc/self/status 2> /dev/null)
    is "$(printf '%s\n' "$out" | awk '{ print $2 }')" "$c" "kept binding: the rank still runs on cpu $c"
    out=$(OMPI_COMM_WORLD_LOCAL_RANK=0 taskset -c "$c" "$PB" --bind core --nproc 2 2>&1)
    printf '%s\n' "$out" | grep -q "2 local ranks need 2 cores but the cpuset to divide has 1 (cpus $c, narrowed by this process's binding)"
    ok $? "asked to bind inside a 1-cpu launcher binding: error names it" || diag "$out"
else
    for i in 1 2 3 4; do skip "needs taskset and 2 cores"; done
fi

# 5. the OS refusing: a topology claiming a NUMA node 1 this machine lacks
if [ ! -e /sys/devices/system/node/node1 ] && [ -e /sys/devices/system/cpu/cpu1 ] \
    && [ "${cores:-0}" -ge 2 ]; then
    out=$(HWLOC_THISSYSTEM=1 HWLOC_XMLFILE=$XML/fake-2numa-2cpu.xml "$PB" --bind numa \
        --nproc 2 --apply 1 -- true 2>&1)
    rc=$?
    [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "the OS refused to bind the memory of local rank 1 to NUMA node 1: Invalid argument"
    ok $? "membind to a node the kernel lacks: refusal reported, exit 1" || diag "rc $rc: $out"
    out=$(HWLOC_THISSYSTEM=1 HWLOC_XMLFILE=$XML/fake-2numa-2cpu.xml "$PB" --bind numa \
        --nproc 2 --apply 0 -- sh -c 'grep Cpus_allowed_list /proc/self/status; grep -c " bind:0 " /proc/self/numa_maps')
    printf '%s\n' "$out" | grep -q 'Cpus_allowed_list:.0$'
    ok $? "rank 0 of that topology: bound to cpu 0 and node 0" || diag "$out"
else
    skip "this machine has a NUMA node 1 or a single cpu"
    skip "this machine has a NUMA node 1 or a single cpu"
fi

# 6. plans of other machines are not applied here; CUDA_VISIBLE_DEVICES is
out=$(HWLOC_XMLFILE=$XML/small-1s4c.xml "$PB" --bind core --nproc 2 --apply 0 -- true 2>&1)
rc=$?
[ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "not this machine's (HWLOC_XMLFILE="
ok $? "an XML topology is not bound to (exit 1, says why)" || diag "rc $rc: $out"
out=$(HWLOC_XMLFILE=$XML/2s64c-8gpu.xml "$PB" --bind none --virtual-local-rank --nproc 8 \
    --apply 5 -- printenv CUDA_VISIBLE_DEVICES)
is "$out" "5" "--virtual-local-rank: the child of local rank 5 sees CUDA_VISIBLE_DEVICES=5"
out=$(HWLOC_XMLFILE=$XML/2s64c-8gpu.xml "$PB" --bind core --nproc 8)
[ "$(printf '%s\n' "$out" | grep -c 'CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7$')" -eq 8 ]
ok $? "2s64c-8gpu core x8: one line per rank with CUDA_VISIBLE_DEVICES" || diag "$out"

# 7. bad input
out=$("$PB" --bind cores --nproc 2 2>&1)
rc=$?
[ $rc -eq 2 ] && printf '%s\n' "$out" | grep -q "unknown policy 'cores' (accepted: none, core, l3, numa, socket, auto)"
ok $? "--bind cores: exit 2 naming the value and the accepted ones" || diag "rc $rc: $out"
out=$("$PB" --bind core 2>&1)
[ $? -eq 2 ] && printf '%s\n' "$out" | grep -q -- "--nproc N is required"
ok $? "missing --nproc: exit 2" || diag "$out"
out=$("$PB" --nproc 0 2>&1)
[ $? -eq 2 ] && printf '%s\n' "$out" | grep -q -- "--nproc: 0 is out of range"
ok $? "--nproc 0: exit 2" || diag "$out"
out=$("$PB" --nproc 2 --apply 3 -- true 2>&1)
[ $? -eq 1 ] && printf '%s\n' "$out" | grep -q -- "--apply 3: not a local rank of this plan (accepted: 0..1)"
ok $? "--apply 3 of 2 ranks: exit 1 naming the range" || diag "$out"

done_testing
