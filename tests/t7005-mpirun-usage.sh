#!/bin/bash
# t7005-mpirun-usage.sh - bad input (exit 2 with one clear line) and the
# mpirun command elastic-mpirun builds (--dry-run): defaults, pass-through,
# the wrapper, hostfiles with spares, a Slurm allocation with a down node.
# The mpirun here is a stand-in that only answers --version (and an
# ompi_info beside it): --dry-run never starts it.
. "${srcdir:-.}/mpirun/lib.sh"

mkdir -p "$tmp/ompi5/bin" "$tmp/ompi4/bin" "$tmp/other/bin" "$tmp/bin"
printf '#!/bin/sh\necho "mpirun (Open MPI) 5.0.7"\n' > "$tmp/ompi5/bin/mpirun"
printf '#!/bin/sh\necho "                 Open MPI: 5.0.7"\necho "           FT MPI support: yes"\n' > "$tmp/ompi5/bin/ompi_info"
printf '#!/bin/sh\necho "mpirun.openmpi (OpenRTE) 4.1.4"\n' > "$tmp/ompi4/bin/mpirun"
printf '#!/bin/sh\necho "HYDRA build details:"\n' > "$tmp/other/bin/mpirun"
printf '#!/bin/sh\nexit 0\n' > "$tmp/fake-exec"
chmod +x "$tmp"/*/bin/* "$tmp/fake-exec"
M5=$tmp/ompi5/bin/mpirun
cd "$tmp" || exit 1

# usage_err NAME PATTERN ARGS...: exit 2 and one line matching PATTERN
usage_err() {
    local name=$1 pat=$2 rc=0 out
    shift 2
    out=$("$EM" "$@" 2>&1 > /dev/null) || rc=$?
    is "$rc" 2 "$name: exit 2" || diag "$out"
    printf '%s\n' "$out" | grep -q -e "$pat"
    ok $? "$name: says '$pat'" || diag "$out"
}

usage_err "typo" "unknown option '--max-relaunch' (did you mean --max-relaunches?" --mpirun "$M5" --max-relaunch 3 ./app
usage_err "unknown option" "unknown option '--frobnicate'.*--pass" --mpirun "$M5" --frobnicate ./app
usage_err "bad value" "max-relaunches: 'many' is not an integer" --mpirun "$M5" --max-relaunches many ./app
usage_err "bad --init-timeout" "init-timeout: 'soon' is not a duration" --mpirun "$M5" --init-timeout soon ./app
usage_err "negative --init-timeout" "init-timeout: '-1' is out of range" --mpirun "$M5" --init-timeout -1 ./app
usage_err "missing mpirun" "mpirun '/nonexistent/mpirun' is not executable" --mpirun /nonexistent/mpirun ./app
ELASTIC_MPIRUN=/nonexistent/mpirun usage_err "missing mpirun (ELASTIC_MPIRUN)" "/nonexistent/mpirun' is not executable" ./app
usage_err "not Open MPI" "is not Open MPI's mpirun" --mpirun "$tmp/other/bin/mpirun" --no-wrap ./app
usage_err "np-min above -n" "np-min 8 is larger than -n 4" --mpirun "$M5" --no-wrap -n 4 --np-min 8 ./app
usage_err "np-min above np-max" "np-min 8 is larger than --np-max 4" --mpirun "$M5" --no-wrap --np-min 8 --np-max 4 ./app
printf 'h1 slots=2\nh2 slots=2\n' > hf2
usage_err "np-min impossible on the hosts" "world size 2 is below --np-min 4" --mpirun "$M5" --no-wrap --hostfile hf2 --spares 1 -n 4 ./app
usage_err "np-min above the slots" "world size 4 is below --np-min 5" --mpirun "$M5" --no-wrap --hostfile hf2 --np-min 5 ./app
usage_err "too many spares" "spares: 2 leaves no host" --mpirun "$M5" --no-wrap --hostfile hf2 --spares 2 ./app
usage_err "spares without hosts" "spares 1 needs a host list" --mpirun "$M5" --no-wrap --spares 1 ./app
usage_err "no program" "no program to run" --mpirun "$M5" -n 2
usage_err "missing elastic-exec" "exec /nonexistent/elastic-exec: No such file" --mpirun "$M5" --exec /nonexistent/elastic-exec ./app
printf 'h1 slots=2\nh2 gpus=4\n' > hf3
usage_err "bad hostfile" "hf3:2: unknown key 'gpus'" --mpirun "$M5" --no-wrap --hostfile hf3 ./app
usage_err "ulfm required but absent" "ulfm yes: .* has no ULFM" --mpirun "$tmp/ompi4/bin/mpirun" --ulfm yes --no-wrap ./app

# dry_run NAME ARGS...: the printed command in $tmp/dry
dry_run() {
    local name=$1 rc=0
    shift
    "$EM" --dry-run "$@" > dry 2> dry.err || rc=$?
    is "$rc" 0 "$name: --dry-run exits 0" || diag "$(cat dry.err)"
}
has() { grep -q -F -e "$1" dry; ok $? "$2" || diag "$(cat dry)"; }
hasnt() { grep -q -F -e "$1" dry; ok $((!$?)) "$2" || diag "$(cat dry)"; }

dry_run "defaults" --mpirun "$M5" --no-wrap -n 1 --map-by slot -x FOO --mca btl self,tcp ./app -n 3 --in 'a b'
has "$M5 --with-ft ulfm --mca pml ob1 --mca coll ^han --mca async_mpi_finalize 1 --mca mpi_ft_detector false --map-by slot -x FOO --mca btl self,tcp -n 1 " \
    "ULFM defaults first, then the user's mpirun options untouched and in order, then -n"
has " ./app -n 3 --in 'a b'" "the program keeps its own arguments (quoted for the shell)"
has "-x ELASTIC_EVENT_LOG -x ELASTIC_RUN_DIR -x ELASTIC_ATTEMPT" "the job's variables are exported to the ranks"
hasnt "--oversubscribe" "one rank: no oversubscription"
has "-x ELASTIC_RUN_ID -x ELASTIC_REPORT_INIT" "the ranks report MPI_Init (--init-timeout's default)"
has "ELASTIC_REPORT_INIT=1" "the dry run shows ELASTIC_REPORT_INIT=1"

dry_run "no MPI_Init deadline" --mpirun "$M5" --no-wrap --init-timeout 0 -n 1 ./app
hasnt "ELASTIC_REPORT_INIT" "--init-timeout 0: the ranks do not report MPI_Init"

dry_run "user overrides" --mpirun "$M5" --no-wrap -n 1 --mca coll tuned --with-ft ulfm --mca mpi_ft_detector true ./app
hasnt "coll ^han" "the user's --mca coll replaces the default"
is "$(grep -o -- '--with-ft' dry | wc -l)" 1 "--with-ft given once"
hasnt "mpi_ft_detector false" "the user's detector setting wins"

dry_run "detector" --mpirun "$M5" --no-wrap --detector 0.5,2 -n 1 ./app
has "--mca mpi_ft_detector true --mca mpi_ft_detector_period 0.5 --mca mpi_ft_detector_timeout 2" "--detector 0.5,2"

np=$(($(nproc) + 1))
dry_run "oversubscribe" --mpirun "$M5" --no-wrap -n $np ./app
has "-n $np --oversubscribe --bind-to none" "more ranks than cores on one host: --oversubscribe --bind-to none added"

dry_run "relaunch-only" --mpirun "$tmp/ompi4/bin/mpirun" --no-wrap -n 1 ./app
hasnt "--with-ft" "Open MPI 4: no --with-ft"
grep -q 'relaunch-only mode: .* (Open MPI 4.1.4) has no ULFM' dry.err
ok $? "Open MPI 4: relaunch-only mode announced"

dry_run "wrapper" --mpirun "$M5" --exec "$tmp/fake-exec" --exec-opt --hang-timeout=30 -n 1 ./app x
has " $tmp/fake-exec --hang-timeout=30 -- ./app x" "each rank runs under elastic-exec with its options"

printf '# two and a spare\nh1 slots=2\nh2 slots=2\nh3 slots=4 spare\n' > hf
dry_run "hostfile" --mpirun "$M5" --no-wrap --hostfile hf -n 4 ./app
has "--hostfile " "a generated hostfile replaces the user's"
hasnt "hostfile hf " "the user's hostfile is not passed on"
has "--mca mpi_ft_detector true --mca mpi_ft_detector_period 1 --mca mpi_ft_detector_timeout 4" \
    "two hosts: the heartbeat detector on (1 s / 4 s)"
is "$(sed -n '/^# .*hostfile:$/,/^#/p' dry | grep -v '^#' | tr '\n' ' ')" "h1 slots=2 h2 slots=2 " \
    "the hostfile holds the active hosts, not the spare"

# a Slurm allocation: scontrol and sinfo stand-ins
printf '#!/bin/sh\n[ "$1 $2 $3" = "show hostnames n[1-4]" ] || exit 1\nprintf "n1\\nn2\\nn3\\nn4\\n"\n' > bin/scontrol
printf '#!/bin/sh\nprintf "n1 alloc\\nn2 down*\\nn3 alloc\\nn4 alloc\\n"\n' > bin/sinfo
chmod +x bin/*
PATH=$tmp/bin:$PATH SLURM_JOB_ID=42 SLURM_JOB_NODELIST='n[1-4]' SLURM_TASKS_PER_NODE='2(x4)' \
    dry_run "slurm" --mpirun "$M5" --no-wrap --spares 1 -n 6 ./app
is "$(sed -n '/^# .*hostfile:$/,/^#/p' dry | grep -v '^#' | tr '\n' ' ')" "n1 slots=2 n3 slots=2 n4 slots=2 " \
    "Slurm: n2 (down*) left out, the spare n4 takes its place, slots from SLURM_TASKS_PER_NODE"
has "-n 6" "Slurm: world size 6"
has "ELASTIC_RUN_DIR=.elastic-mpirun/job-42" "Slurm: the default run directory is per job"
done_testing
