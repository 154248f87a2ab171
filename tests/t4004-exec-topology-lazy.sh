#!/bin/bash
# t4004-exec-topology-lazy.sh - elastic-exec loads the hwloc topology only
# when a plan needs it
#
# Discovering the topology with its I/O devices costs every elastic-exec
# tens of milliseconds (B7), and hwloc_topology_init dlopens hwloc's
# plugins: the dynamic linker's own trace (LD_DEBUG=files) shows whether
# that happened.  --bind core must load them (the control); --bind none
# (the default) must not, in wrapper mode (a per-rank wrapper under
# mpirun) nor in agent mode without the hosted PMIx server, nor
# --virtual-local-rank on a node without an NVIDIA device; --print-binding
# still prints the plan.
. "${srcdir:-.}/exec/lib.sh"

tmp=$(mktemp -d)
trap 'kill_marked; rm -rf "$tmp"' EXIT
unset HWLOC_XMLFILE HWLOC_THISSYSTEM CUDA_VISIBLE_DEVICES HWLOC_PLUGINS_BLACKLIST

if ! "$EXEC" --bind core --nproc-per-node 1 --print-binding > /dev/null 2> "$tmp/err"; then
    skip_all "no binding in this build: $(head -n 1 "$tmp/err")"
fi

# plugins ARGS...: how many hwloc plugins the dynamic linker loaded into
# elastic-exec (its own pid's lines only) running /bin/true
plugins() {
    LD_DEBUG=files ELASTIC_TEST_MARK=$test_mark "$EXEC" "$@" -- /bin/true 2> "$tmp/ld" &
    local pid=$! rc
    wait "$pid"
    rc=$?
    [ $rc -eq 0 ] || { diag "elastic-exec $* exited $rc: $(grep -v '^ *[0-9]*:' "$tmp/ld" | head -n 3)"; echo fail; return; }
    grep -c "^ *$pid:.*file=.*/hwloc/.*dynamically loaded" "$tmp/ld"
}

wrapper_env() {
    OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=0 \
        OMPI_COMM_WORLD_LOCAL_SIZE=1 "$@"
}

control=$(wrapper_env plugins --bind core)
if [ "$control" = fail ] || [ "$control" -eq 0 ]; then
    skip_all "this hwloc loads no plugins at init (control: --bind core loaded '$control')"
fi
diag "--bind core: hwloc loaded $control plugins (the control)"

export OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=1 OMPI_COMM_WORLD_LOCAL_RANK=0 \
    OMPI_COMM_WORLD_LOCAL_SIZE=1
is "$(plugins)" 0 "wrapper mode, --bind none (the default): no topology loaded"
is "$(plugins --bind none)" 0 "wrapper mode, explicit --bind none: no topology loaded"
unset OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK \
    OMPI_COMM_WORLD_LOCAL_SIZE
is "$(plugins --nproc-per-node 2 --wireup none)" 0 \
    "agent mode without the PMIx server, --bind none: no topology loaded"
if ls /dev/nvidia[0-9]* > /dev/null 2>&1; then
    skip "this node has an NVIDIA device: --virtual-local-rank chooses GPUs" 1
else
    is "$(plugins --nproc-per-node 2 --wireup none --virtual-local-rank)" 0 \
        "--virtual-local-rank without any NVIDIA device: no topology loaded"
fi
out=$("$EXEC" --nproc-per-node 2 --print-binding 2> "$tmp/err")
is "$(echo "$out" | grep -c '^rank ')" 2 "--print-binding still prints one line per worker" ||
    diag "$out $(cat "$tmp/err")"
done_testing
