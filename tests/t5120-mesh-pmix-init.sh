#!/bin/bash
# t5120-mesh-pmix-init.sh - MPI_Init and an allreduce across "nodes" joined by the mesh
#
# Two and three pmix/mesh-pmix-node processes on this machine each play one
# node: a mesh member hosting the PMIx server of its ranks with the mesh
# transport (src/exec/pmix/pmix_transport_mesh.c), the job's whole map
# registered on every server.  Open MPI's ranks (btl self,tcp: every
# "node" is this host) must pass MPI_Init, whose fences carry each node's
# PMIx data to the others, and agree on an allreduce over all ranks.  A
# PMIx client (pmix/pmix_kv) then reads remote keys by direct modex and
# after a collecting fence.
. "${srcdir:-.}/pmix/lib.sh"
. "${srcdir:-.}/pmix/mesh.sh"

# run_init NAME NODES RANKS
run_init() {
    local name=$1 nodes=$2 ranks=$3 k size
    size=$((nodes * ranks))
    mn_start "$name" "$nodes" "$ranks" -- "$FT_APP"
    mn_wait 180
    for ((k = 0; k < nodes; k++)); do
        is "${mn_rc[k]}" 0 "$name: node $k exit 0" || diag "$(mn_out)" "$(mn_ev "$k")"
        grep -q ' initialized ' "$mn_dir/ev.$k"
        ok $? "$name: node $k saw every MPI_Init fence complete"
        is "$(grep -c ' reported ' "$mn_dir/ev.$k")" 0 "$name: node $k was told of no failure"
    done
    is "$(mn_count '^up ')" "$size" "$name: all $size ranks passed MPI_Init"
    is "$(mn_count "^ft-app: ok size $size -> $size")" 1 "$name: the allreduce over $size ranks is right" ||
        diag "$(mn_out)"
    diag "$name: $(mn_out | grep -o 'init_max_ms=[0-9.]*') (slowest rank's MPI_Init)"
    mn_check_clean "$name"
}

run_init two 2 2
run_init three 3 2

# PMIx level (pmix/pmix_kv): a key of the next rank fetched by direct
# modex (a fence without data), one half the job away from a collecting
# fence; each node asks for its last rank's next one and serves one
mn_start kv 3 2 -- ./pmix/pmix_kv
mn_wait 120
for k in 0 1 2; do
    is "${mn_rc[k]}" 0 "kv: node $k exit 0" || diag "$(mn_out)" "$(mn_ev "$k")"
    grep -q ' counts fences_local=0 fences_mesh=2 dmodex_asked=1 dmodex_served=1 ' "$mn_dir/ev.$k"
    ok $? "kv: node $k made 2 mesh fences, asked and served 1 direct modex" || diag "$(mn_ev "$k")"
done
is "$(mn_count '^kv: rank [0-5] ok ')" 6 "kv: every rank read a remote rank's keys (direct modex and collected)" ||
    diag "$(mn_out)"
mn_check_clean kv
done_testing
