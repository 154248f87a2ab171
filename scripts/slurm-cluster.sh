#!/usr/bin/env bash
# slurm-cluster.sh - an emulated multi-node Slurm cluster on this one machine
#
#   slurm-cluster.sh up DIR [--nodes N] [--cpus C] [--grace S] [--mode M]
#                           [--plugstack FILE] [--timeout S]
#   slurm-cluster.sh down DIR            stop everything, delete the namespaces
#   slurm-cluster.sh status DIR          daemons, namespaces, sinfo
#   slurm-cluster.sh env DIR             the environment to use (eval it)
#   slurm-cluster.sh ctl DIR CMD...      run a client command (srun, sbatch...)
#   slurm-cluster.sh node DIR nK CMD...  run a command on node nK (its hostname)
#   slurm-cluster.sh kill-node DIR nK    SIGKILL every process of node nK
#   slurm-cluster.sh start-node DIR nK   start node nK's slurmd again
#   slurm-cluster.sh pids DIR nK         the process ids of node nK
#
# Mode netns (the default where it works): slurmctld runs in a network
# namespace that holds a bridge with 10.77.0.1/24 (a range used only inside
# these namespaces); node nK runs `slurmd -N nK` in its own network namespace
# (10.77.0.(10+K) on a veth to that bridge) and its own UTS namespace whose
# hostname is nK.  munged runs in the root namespace; its socket is a path
# under DIR, visible everywhere.  Client commands must run in the controller's
# namespace: `nsenter --net=/run/netns/<prefix>-ctl` (never `ip netns exec`:
# it remounts /sys, hides /sys/fs/cgroup, and slurmd dies).
#
# Mode local (the fallback where namespaces cannot be made): every slurmd
# runs on 127.0.0.1 with its own port and %n paths; all nodes share this
# machine's hostname, SLURMD_NODENAME tells them apart.
#
# Everything lives under DIR (fresh per run): etc/slurm.conf,
# etc/plugstack.conf, munge/, state/, spool/nK, log/, run/ (pids), tmp/nK.
# Every process the fixture starts carries ELASTIC_SLURM_CLUSTER=DIR in its
# environment, and so do the clients started through `ctl` and their tasks
# and batch jobs; `down` kills all of them by PID, every process in the
# namespaces and every process holding a file under DIR open, with SIGKILL
# (a pending srun ignores SIGTERM once slurmctld is gone), then deletes the
# namespaces.  Exit status: 0 on success, 1 on failure (the
# message names what failed and shows the log's tail), 2 on bad usage.
set -u
prog=slurm-cluster.sh
NET=10.77.0
CTL_ADDR=$NET.1

die() {
    echo "$prog: $*" >&2
    exit 1
}
usage_error() {
    echo "$prog: $*" >&2
    echo "usage: $prog up|down|status|env|ctl|node|kill-node|start-node|pids DIR [...]" >&2
    exit 2
}
now_ms() { date +%s%3N; }

# wait_until TIMEOUT CMD...: poll CMD every 0.1 s; 1 if TIMEOUT s pass first.
wait_until() {
    local deadline=$(($(now_ms) + $1 * 1000))
    shift
    until "$@" > /dev/null 2>&1; do
        [ "$(now_ms)" -lt "$deadline" ] || return 1
        sleep 0.1
    done
}

# positive_int NAME VALUE MAX: check a numeric option.
positive_int() {
    case $2 in
        '' | *[!0-9]*) usage_error "$1: '$2' is not a positive integer" ;;
    esac
    [ "$2" -ge 1 ] && [ "$2" -le "$3" ] || usage_error "$1: $2 is out of range (expected 1..$3)"
}

load_env() {
    [ -f "$DIR/cluster.env" ] || die "$DIR: no cluster here (no cluster.env)"
    # shellcheck disable=SC1091
    . "$DIR/cluster.env"
}

# The process ids of a network namespace (none if it does not exist).
ns_pids() {
    [ -e "/run/netns/$1" ] && ip netns pids "$1" 2> /dev/null
}

# ancestors: this process and its ancestors (never killed by a sweep).
ancestors() {
    local p=$$
    while [ -n "$p" ] && [ "$p" -gt 1 ]; do
        echo "$p"
        p=$(awk '{print $4}' "/proc/$p/stat" 2> /dev/null)
    done
}

# Every live process started for this cluster: the marker is in its
# environment (clients started through `ctl` and their tasks and batch
# jobs carry it too).  Zombies have no environment and are not listed.
marked_pids() {
    grep -lzxF "ELASTIC_SLURM_CLUSTER=$DIR" /proc/[0-9]*/environ 2> /dev/null \
        | sed 's|^/proc/||; s|/environ$||' | grep -vxF "$(ancestors)"
}

# Processes holding a file under DIR open (slurmstepd, whose environment
# is not marked, keeps its node's log file open).
open_pids() {
    find /proc/[0-9]*/fd -maxdepth 1 -lname "$DIR/*" 2> /dev/null | cut -d/ -f3 | sort -u \
        | grep -vxF "$(ancestors)"
}

# alive PID...: those that are running (not gone, not zombies).
alive() {
    local p
    for p in "$@"; do
        [ "$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null)" = "" ] && continue
        [ "$(awk '{print $3}' "/proc/$p/stat" 2> /dev/null)" = Z ] && continue
        echo "$p"
    done
}

# descendants PID...: all descendants of the given processes.
descendants() {
    local all
    all=$(ps -e -o pid=,ppid= 2> /dev/null)
    local queue="$*" p c
    while [ -n "$queue" ]; do
        set -- $queue
        p=$1
        shift
        queue="$*"
        for c in $(echo "$all" | awk -v p="$p" '$2 == p { print $1 }'); do
            echo "$c"
            queue="$queue $c"
        done
    done
}

# kill_all PID...: SIGKILL the processes, their descendants first found.
kill_all() {
    [ $# -gt 0 ] || return 0
    local pids
    pids="$* $(descendants "$@")"
    # shellcheck disable=SC2086
    kill -KILL $pids 2> /dev/null
    return 0
}

# The processes of node nK: its namespace (netns), or its slurmd, the
# slurmstepds that log to its log file and the tasks that name it (local).
node_pids() {
    local node=$1
    if [ "$MODE" = netns ]; then
        ns_pids "$PREFIX-$node"
        return
    fi
    [ -f "$DIR/run/$node.pid" ] && alive "$(cat "$DIR/run/$node.pid")"
    # its slurmstepds keep its log file open
    find /proc/[0-9]*/fd -maxdepth 1 -lname "$DIR/log/slurmd-$node.log" 2> /dev/null | cut -d/ -f3
    # its tasks: both lines in the environment
    grep -lzxF "SLURMD_NODENAME=$node" /proc/[0-9]*/environ 2> /dev/null \
        | xargs -r grep -lzxF "ELASTIC_SLURM_CLUSTER=$DIR" 2> /dev/null \
        | sed 's|^/proc/||; s|/environ$||'
}

# kill_node nK: SIGKILL every process of the node; wait until none is left.
kill_node() {
    local node=$1 pids deadline=$(($(now_ms) + 15000))
    while :; do
        pids=$(node_pids "$node" | sort -u)
        [ -n "$pids" ] || return 0
        # shellcheck disable=SC2086
        kill_all $pids
        [ "$(now_ms)" -lt "$deadline" ] || die "kill-node $node: processes left: $pids"
        sleep 0.05
    done
}

# client CMD...: run a command where the cluster's clients run.
client() {
    if [ "$MODE" = netns ]; then
        exec env SLURM_CONF="$DIR/etc/slurm.conf" ELASTIC_SLURM_CLUSTER="$DIR" \
            nsenter --net="/run/netns/$PREFIX-ctl" -- "$@"
    fi
    exec env SLURM_CONF="$DIR/etc/slurm.conf" ELASTIC_SLURM_CLUSTER="$DIR" "$@"
}

start_munged() {
    local m=$DIR/munge
    mkdir -p "$m" && chmod 700 "$m"
    dd if=/dev/urandom of="$m/munge.key" bs=1024 count=1 2> /dev/null && chmod 400 "$m/munge.key" \
        || die "cannot write $m/munge.key"
    ELASTIC_SLURM_CLUSTER=$DIR setsid munged -F --force --socket="$m/munge.socket.2" \
        --key-file="$m/munge.key" --pid-file="$m/munged.pid" --log-file="$m/munged.log" \
        --seed-file="$m/munged.seed" --num-threads=2 > "$DIR/log/munged.out" 2>&1 < /dev/null &
    echo $! > "$DIR/run/munged.pid"
    wait_until 20 sh -c "munge -n -S '$m/munge.socket.2' | unmunge -S '$m/munge.socket.2'" \
        || fail "munged did not start" "$m/munged.log" "$DIR/log/munged.out"
}

write_conf() {
    local conf=$DIR/etc/slurm.conf k addr host ctl_host port
    if [ "$MODE" = netns ]; then
        ctl_host=ctl
    else
        ctl_host=$(hostname -s)
    fi
    {
        echo "# written by $prog for an emulated cluster under $DIR"
        echo "ClusterName=elastic"
        if [ "$MODE" = netns ]; then
            echo "SlurmctldHost=$ctl_host($CTL_ADDR)"
        else
            echo "SlurmctldHost=$ctl_host(127.0.0.1)"
            echo "SlurmctldPort=$BASE_PORT"
        fi
        echo "SlurmUser=root"
        echo "SlurmdUser=root"
        echo "AuthType=auth/munge"
        echo "CredType=cred/munge"
        echo "AuthInfo=socket=$DIR/munge/munge.socket.2,cred_expire=$CRED_EXPIRE"
        echo "StateSaveLocation=$DIR/state"
        echo "SlurmdSpoolDir=$DIR/spool/%n"
        echo "SlurmctldPidFile=$DIR/run/slurmctld.pid"
        echo "SlurmdPidFile=$DIR/run/slurmd-%n.pid"
        echo "SlurmctldLogFile=$DIR/log/slurmctld.log"
        echo "SlurmdLogFile=$DIR/log/slurmd-%n.log"
        echo "SlurmctldDebug=info"
        echo "SlurmdDebug=info"
        echo "PlugStackConfig=$DIR/etc/plugstack.conf"
        echo "TmpFS=$DIR/tmp/%n"
        echo "ProctrackType=proctrack/linuxproc"
        echo "TaskPlugin=task/none"
        echo "JobAcctGatherType=jobacct_gather/none"
        echo "AccountingStorageType=accounting_storage/none"
        echo "JobCompType=jobcomp/none"
        echo "MpiDefault=none"
        # ports srun reserves for a step with --resv-ports (the mesh's, in
        # elastic-exec's mesh mode: SLURM_STEP_RESV_PORTS)
        echo "MpiParams=ports=20000-20999"
        echo "SchedulerType=sched/backfill"
        # backfill every second (default 30 s): a requeued job released
        # with a start time a few seconds ahead starts soon after it
        echo "SchedulerParameters=bf_interval=1"
        echo "SelectType=select/cons_tres"
        echo "SelectTypeParameters=CR_Core"
        echo "SlurmdParameters=config_overrides"
        echo "ReturnToService=1"
        echo "SlurmdTimeout=10"
        echo "MessageTimeout=5"
        echo "KillWait=5"
        echo "InactiveLimit=0"
        echo "MinJobAge=300"
        echo "JobRequeue=1"
        echo "PreemptType=preempt/partition_prio"
        echo "PreemptMode=REQUEUE"
        # a preempted job that asked for --signal gets that signal at once
        # (to the batch shell with B:), not SIGTERM to all of its processes
        # (which would reach mpirun, and mpirun kills its ranks on SIGTERM)
        echo "SlurmctldParameters=preempt_send_user_signal"
        echo "MailProg=/bin/true"
        for k in $(seq 1 "$NODES"); do
            if [ "$MODE" = netns ]; then
                addr=$NET.$((10 + k))
                host=n$k
                port=
            else
                addr=127.0.0.1
                host=$(hostname -s)
                port=" Port=$((BASE_PORT + k))"
            fi
            echo "NodeName=n$k NodeHostname=$host NodeAddr=$addr$port CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=1000 State=UNKNOWN"
        done
        echo "PartitionName=normal Nodes=ALL Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime=$GRACE"
        echo "PartitionName=high Nodes=ALL Default=NO MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF"
    } > "$conf"
    if [ -n "$PLUGSTACK" ]; then
        cp "$PLUGSTACK" "$DIR/etc/plugstack.conf" || die "cannot copy $PLUGSTACK"
    else
        echo "# SPANK plugins for this cluster, e.g.: optional /path/spank_elastic.so" > "$DIR/etc/plugstack.conf"
    fi
}

# fail WHAT LOG...: report, show the logs' tails, tear down, exit 1.
fail() {
    local what=$1 f
    shift
    echo "$prog: up $DIR: $what" >&2
    for f in "$@"; do
        [ -s "$f" ] && {
            echo "--- last lines of $f:" >&2
            tail -n 15 "$f" >&2
        }
    done
    do_down > /dev/null 2>&1
    exit 1
}

# pick_ports: BASE_PORT such that BASE_PORT..BASE_PORT+NODES are free and
# below the ephemeral range (where outgoing connections could take them).
pick_ports() {
    local low used p busy
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2> /dev/null)
    [ -n "$low" ] && [ "$low" -gt $((12000 + NODES)) ] || low=32768
    used=$(awk 'FNR > 1 { split($2, a, ":"); print a[2] }' /proc/net/tcp /proc/net/tcp6 2> /dev/null \
        | while read -r h; do echo $((16#$h)); done | sort -un)
    for _ in $(seq 1 50); do
        BASE_PORT=$((10000 + RANDOM % (low - 10000 - NODES - 1)))
        busy=0
        for p in $(seq "$BASE_PORT" $((BASE_PORT + NODES))); do
            echo "$used" | grep -qx "$p" && busy=1 && break
        done
        [ $busy = 0 ] && return 0
    done
    die "no free range of $((NODES + 1)) TCP ports below $low"
}

# Can this machine make namespaces, bridges and veths?
netns_works() {
    local p=esl-probe-$$
    ip netns add "$p" 2> /dev/null || return 1
    local ok=0
    ip -n "$p" link add br0 type bridge 2> /dev/null || ok=1
    [ $ok = 0 ] && { ip -n "$p" link add v0 type veth peer name v1 2> /dev/null || ok=1; }
    [ $ok = 0 ] && { nsenter --net="/run/netns/$p" unshare --uts true 2> /dev/null || ok=1; }
    ip netns del "$p" 2> /dev/null
    return $ok
}

make_netns() {
    local ns=$1
    ip netns add "$ns" || fail "cannot create network namespace $ns"
    echo "$ns" >> "$DIR/run/netns.list"
    ip -n "$ns" link set lo up || fail "cannot bring up lo in $ns"
}

setup_network() {
    local ctl=$PREFIX-ctl k ns
    make_netns "$ctl"
    ip -n "$ctl" link add br0 type bridge && ip -n "$ctl" addr add "$CTL_ADDR/24" dev br0 \
        && ip -n "$ctl" link set br0 up || fail "cannot set up the bridge in $ctl"
    for k in $(seq 1 "$NODES"); do
        ns=$PREFIX-n$k
        make_netns "$ns"
        ip -n "$ctl" link add "veth$k" type veth peer name eth0 netns "$ns" \
            && ip -n "$ctl" link set "veth$k" master br0 up \
            && ip -n "$ns" addr add "$NET.$((10 + k))/24" dev eth0 \
            && ip -n "$ns" link set eth0 up || fail "cannot connect $ns to the bridge"
    done
}

# start_daemon NAME HOSTNAME NETNS CMD...: a daemon in the foreground, in
# its own session; its pid in run/NAME.pid, its output in log/NAME.out.
start_daemon() {
    local name=$1 host=$2 ns=$3
    shift 3
    if [ "$MODE" = netns ]; then
        ELASTIC_SLURM_CLUSTER=$DIR SLURM_CONF=$DIR/etc/slurm.conf setsid \
            nsenter --net="/run/netns/$ns" -- unshare --uts -- \
            sh -c 'hostname "$1" && shift && exec "$@"' sh "$host" "$@" \
            > "$DIR/log/$name.out" 2>&1 < /dev/null &
    else
        ELASTIC_SLURM_CLUSTER=$DIR SLURM_CONF=$DIR/etc/slurm.conf setsid "$@" \
            > "$DIR/log/$name.out" 2>&1 < /dev/null &
    fi
    echo $! > "$DIR/run/$name.pid"
}

start_slurmd() {
    local node=$1
    mkdir -p "$DIR/spool/$node" "$DIR/tmp/$node"
    start_daemon "$node" "$node" "$PREFIX-$node" slurmd -D -N "$node" -f "$DIR/etc/slurm.conf"
}

# node_states: "name state" per node, state without its flags (lower case).
node_states() {
    env SLURM_CONF="$DIR/etc/slurm.conf" ${CTL_ENTER:-} sinfo -h -N -o '%N %T' 2> /dev/null \
        | sed 's/[*~#!%$@^-]*$//; s/+.*//' | sort -u
}

all_idle() {
    local s
    s=$(node_states)
    [ "$(echo "$s" | grep -c ' idle$')" -eq "$NODES" ]
}

do_up() {
    local t0 k
    t0=$(now_ms)
    [ -e "$DIR" ] && [ -n "$(ls -A "$DIR" 2> /dev/null)" ] && usage_error "$DIR exists and is not empty (use a fresh directory)"
    mkdir -p "$DIR" || die "cannot create $DIR"
    DIR=$(cd "$DIR" && pwd)
    [ ${#DIR} -le 60 ] || usage_error "$DIR: path too long for munge's socket (at most 60 characters)"
    for c in slurmctld slurmd munged munge unmunge srun sinfo scontrol setsid; do
        command -v "$c" > /dev/null || die "$c not found (on Debian: apt-get install slurmctld slurmd slurm-client munge)"
    done
    case $MODE in
        auto)
            if netns_works; then MODE=netns; else
                MODE=local
                echo "$prog: network namespaces cannot be made here: using the 127.0.0.1 fallback" >&2
            fi
            ;;
        netns) netns_works || die "--mode netns: cannot create network namespaces, bridges or veths here" ;;
        local) ;;
        *) usage_error "--mode: '$MODE' is not a mode (expected auto, netns or local)" ;;
    esac
    PREFIX=esl$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
    BASE_PORT=
    [ "$MODE" = local ] && pick_ports
    mkdir -p "$DIR/etc" "$DIR/state" "$DIR/spool" "$DIR/log" "$DIR/run" "$DIR/tmp"
    CTL_ENTER=
    [ "$MODE" = netns ] && CTL_ENTER="nsenter --net=/run/netns/$PREFIX-ctl --"
    cat > "$DIR/cluster.env" << EOF
MODE=$MODE
PREFIX=$PREFIX
NODES=$NODES
CPUS=$CPUS
BASE_PORT=$BASE_PORT
CTL_ENTER="$CTL_ENTER"
EOF
    trap 'fail "interrupted"' INT TERM HUP
    write_conf
    start_munged
    [ "$MODE" = netns ] && setup_network
    start_daemon slurmctld ctl "$PREFIX-ctl" slurmctld -D -i -f "$DIR/etc/slurm.conf"
    for k in $(seq 1 "$NODES"); do
        start_slurmd "n$k"
    done
    wait_until "$TIMEOUT" all_idle \
        || fail "the nodes are not all idle after ${TIMEOUT}s: $(node_states | tr '\n' ' ')" \
            "$DIR/log/slurmctld.log" "$DIR/log/slurmctld.out" "$DIR/log/slurmd-n1.log" "$DIR/log/n1.out"
    trap - INT TERM HUP
    echo "UP_MS=$(($(now_ms) - t0))" >> "$DIR/cluster.env"
    echo "# $NODES-node Slurm cluster up in $(($(now_ms) - t0)) ms (mode $MODE, $CPUS CPUs per node)"
    print_env
}

print_env() {
    echo "export SLURM_CONF=$DIR/etc/slurm.conf"
    if [ "$MODE" = netns ]; then
        echo "# clients (srun, sbatch, scontrol) run in the controller's namespace:"
        echo "#   nsenter --net=/run/netns/$PREFIX-ctl -- srun -N$NODES hostname"
        echo "# or: $0 ctl $DIR srun -N$NODES hostname"
    else
        echo "# clients run here: srun -N$NODES printenv SLURMD_NODENAME"
    fi
}

# do_down: kill everything of this cluster, delete its namespaces.
do_down() {
    local t0 deadline pids ns f left
    t0=$(now_ms)
    deadline=$((t0 + 20000))
    while :; do
        pids=
        if [ -f "$DIR/run/netns.list" ]; then
            while read -r ns; do
                pids="$pids $(ns_pids "$ns")"
            done < "$DIR/run/netns.list"
        fi
        for f in "$DIR"/run/*.pid "$DIR/munge/munged.pid"; do
            [ -f "$f" ] || continue
            read -r p < "$f" 2> /dev/null && [ -n "$p" ] && pids="$pids $(alive "$p")"
        done
        pids="$pids $(marked_pids) $(open_pids)"
        # shellcheck disable=SC2116,SC2086 # one line, single spaces
        pids=$(echo $pids)
        [ -n "$pids" ] || break
        # shellcheck disable=SC2086
        kill_all $pids
        if [ "$(now_ms)" -ge "$deadline" ]; then
            echo "$prog: down $DIR: processes left after 20 s: $pids" >&2
            break
        fi
        sleep 0.05
    done
    left=
    if [ -f "$DIR/run/netns.list" ]; then
        while read -r ns; do
            [ -e "/run/netns/$ns" ] || continue
            ip netns del "$ns" 2> /dev/null || left="$left $ns"
        done < "$DIR/run/netns.list"
    fi
    [ -z "$left" ] || {
        echo "$prog: down $DIR: cannot delete namespaces:$left" >&2
        return 1
    }
    [ -z "$pids" ] || return 1
    echo "# cluster $DIR down in $(($(now_ms) - t0)) ms"
}

do_status() {
    local name p state ns
    echo "mode $MODE, prefix $PREFIX, $NODES nodes, $CPUS CPUs each"
    for f in "$DIR"/run/*.pid; do
        [ -f "$f" ] || continue
        name=$(basename "$f" .pid)
        case $name in slurmd-*) continue ;; esac
        read -r p < "$f"
        state=dead
        [ -n "$(alive "$p")" ] && state=running
        echo "$name pid $p $state"
    done
    if [ -f "$DIR/run/netns.list" ]; then
        while read -r ns; do
            if [ -e "/run/netns/$ns" ]; then
                echo "namespace $ns: $(ns_pids "$ns" | wc -l) processes"
            else
                echo "namespace $ns: gone"
            fi
        done < "$DIR/run/netns.list"
    fi
    env SLURM_CONF="$DIR/etc/slurm.conf" $CTL_ENTER sinfo -N -o '%N %T %C %P' 2>&1
}

[ $# -ge 2 ] || usage_error "missing command or DIR"
cmd=$1
DIR=$2
shift 2
case $cmd in
    up)
        NODES=3 CPUS=4 GRACE=10 MODE=auto PLUGSTACK="" TIMEOUT=120 CRED_EXPIRE=30
        while [ $# -gt 0 ]; do
            case $1 in
                --nodes=*) NODES=${1#*=} ;;
                --nodes) NODES=${2-}; shift ;;
                --cpus=*) CPUS=${1#*=} ;;
                --cpus) CPUS=${2-}; shift ;;
                --grace=*) GRACE=${1#*=} ;;
                --grace) GRACE=${2-}; shift ;;
                --mode=*) MODE=${1#*=} ;;
                --mode) MODE=${2-}; shift ;;
                --plugstack=*) PLUGSTACK=${1#*=} ;;
                --plugstack) PLUGSTACK=${2-}; shift ;;
                --timeout=*) TIMEOUT=${1#*=} ;;
                --timeout) TIMEOUT=${2-}; shift ;;
                *) usage_error "up: unknown option '$1' (expected --nodes, --cpus, --grace, --mode, --plugstack, --timeout)" ;;
            esac
            shift
        done
        positive_int --nodes "$NODES" 64
        positive_int --cpus "$CPUS" 256
        positive_int --timeout "$TIMEOUT" 3600
        case $GRACE in '' | *[!0-9]*) usage_error "--grace: '$GRACE' is not a number of seconds" ;; esac
        [ -z "$PLUGSTACK" ] || [ -f "$PLUGSTACK" ] || usage_error "--plugstack: $PLUGSTACK: no such file"
        do_up
        ;;
    down)
        [ -d "$DIR" ] || die "$DIR: no such directory"
        DIR=$(cd "$DIR" && pwd)
        MODE=unknown
        [ -f "$DIR/cluster.env" ] && . "$DIR/cluster.env"
        do_down
        ;;
    status)
        DIR=$(cd "$DIR" 2> /dev/null && pwd) || die "$2: no such directory"
        load_env
        do_status
        ;;
    env)
        DIR=$(cd "$DIR" 2> /dev/null && pwd) || die "$2: no such directory"
        load_env
        print_env
        ;;
    ctl)
        DIR=$(cd "$DIR" 2> /dev/null && pwd) || die "$2: no such directory"
        load_env
        [ $# -ge 1 ] || usage_error "ctl: no command"
        client "$@"
        ;;
    node)
        DIR=$(cd "$DIR" 2> /dev/null && pwd) || die "$2: no such directory"
        load_env
        [ $# -ge 2 ] || usage_error "node: usage: node DIR nK CMD..."
        node=$1
        shift
        if [ "$MODE" = netns ]; then
            read -r p < "$DIR/run/$node.pid" 2> /dev/null || die "node $node: no such node"
            [ -d "/proc/$p" ] || die "node $node: its slurmd (pid $p) is not running"
            exec env SLURM_CONF="$DIR/etc/slurm.conf" ELASTIC_SLURM_CLUSTER="$DIR" \
                nsenter --target "$p" --net --uts -- "$@"
        fi
        exec env SLURM_CONF="$DIR/etc/slurm.conf" ELASTIC_SLURM_CLUSTER="$DIR" SLURMD_NODENAME="$node" "$@"
        ;;
    kill-node)
        DIR=$(cd "$DIR" 2> /dev/null && pwd) || die "$2: no such directory"
        load_env
        [ $# -eq 1 ] || usage_error "kill-node: usage: kill-node DIR nK"
        grep -q "^NodeName=$1 " "$DIR/etc/slurm.conf" || usage_error "kill-node: '$1' is not a node of this cluster"
        kill_node "$1"
        ;;
    start-node)
        DIR=$(cd "$DIR" 2> /dev/null && pwd) || die "$2: no such directory"
        load_env
        [ $# -eq 1 ] || usage_error "start-node: usage: start-node DIR nK"
        grep -q "^NodeName=$1 " "$DIR/etc/slurm.conf" || usage_error "start-node: '$1' is not a node of this cluster"
        [ -z "$(node_pids "$1")" ] || die "start-node $1: the node still has processes (kill-node it first)"
        start_slurmd "$1"
        ;;
    pids)
        DIR=$(cd "$DIR" 2> /dev/null && pwd) || die "$2: no such directory"
        load_env
        [ $# -eq 1 ] || usage_error "pids: usage: pids DIR nK"
        grep -q "^NodeName=$1 " "$DIR/etc/slurm.conf" || usage_error "pids: '$1' is not a node of this cluster"
        node_pids "$1" | sort -un
        ;;
    *) usage_error "unknown command '$cmd'" ;;
esac
