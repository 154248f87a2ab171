#!/bin/bash
# t9003-campaign-srun.sh - a bounded fault campaign under `srun --no-kill
# elastic-exec` (mesh mode) on the emulated 3-node cluster
# (bench/campaign/campaign.py --launchers srun): one run of each kind, real
# faults at a random time of the computation - 1-2 ranks SIGKILLed (exit 0,
# or 76 and a resume when a rank and its buddy are both lost), a whole node
# SIGKILLed (kill-node: its slurmd and every process; started and resumed in
# Slurm afterwards), a node's network cut (its veth down: its member must
# fence itself, the others go on; the link up again afterwards), a
# preemption (scancel -s USR1: 75, then a resume on 2 nodes).  Each must
# end with the members' agreed exit code and the failure-free checksum,
# hang nowhere and leave nothing behind on any node (processes, TMPDIR,
# /dev/shm, /tmp/elastic-*), the killed node's own files apart (nothing on
# it is alive to remove them; counted in the report).  The seed is fixed:
# the schedules are the same each time (their timing is not).  The long
# version (>= 40 runs) and its figures: doc/reliability.md.
. "${srcdir:-.}/lib/slurm.sh"

slurm_require
build=$(cd "${top_builddir:-..}" && pwd)
EXEC=$build/src/exec/elastic-exec
[ -x "$build/examples/heat2d" ] || skip_all "heat2d is not built: no MPI in this configuration"
[ -x "$EXEC" ] || skip_all "elastic-exec is not built ($EXEC)"
"$EXEC" --help 2>&1 | grep -q -- '--node-timeout' || skip_all "elastic-exec has no mesh mode in this build (libsodium, PMIx)"
probe=esl-t9003-$$
ip netns add "$probe" 2> /dev/null || skip_all "network namespaces cannot be made here (mesh mode needs an address per node)"
ip netns del "$probe"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
out=$(mktemp -d "${TMPDIR:-/tmp}/t9003.XXXXXX")
trap '[ "$tap_failed" -eq 0 ] && rm -rf "$out"' EXIT

"$PY" "$srcdir/../bench/campaign/campaign.py" --build "$build" --runs 4 --launchers srun \
    --kinds kill,node,cut,term --nodes 3 --nproc-per-node 2 --nx 64 --steps 3000 --sleep 1 \
    --persist-period 1000 --seed 9003 --timeout 300 --out "$out/srun" > "$out/log" 2>&1
rc=$?
sed 's/^/# /' "$out/log"
[ "$rc" -le 1 ]
ok $? "the campaign ran (exit $rc: 0 every run right, 1 some wrong)" || diag "kept: $out"
for kind in kill node cut term; do
    is "$(grep -c "^ *[0-9]* srun *$kind *exit .* ok" "$out/log")" 1 "srun, $kind: 1 of 1 run right" ||
        diag "kept: $out" "$(grep "^ *[0-9]* srun *$kind " "$out/log")"
done
done_testing
