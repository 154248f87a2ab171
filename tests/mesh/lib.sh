# mesh/lib.sh - start a test mesh of mesh-member processes (source it)
#
#   mesh_start N [ARGS...]   N members on 127.0.0.1 (ARGS to each), joined
#   mesh_start_some N K [ARGS...]  members 0..K-1 of N slots (the others
#                            absent: --start K), joined
#   mesh_join I NAME A [ARGS...]  a newcomer (test index I, its expected
#                            slot) admitted through member A, linked
#   mesh_cmd I CMD           a command line to member I
#   mesh_grep I RE           member I's output has RE
#   mesh_wait I RE [S]       wait up to S (default 60) seconds for RE
#   mesh_fence I...          a fence on members I..., waits for each result
#   mesh_line I RE           member I's last line matching RE
#   mesh_pid I | mesh_out I | mesh_err I
#   mesh_stop                quit every member, wait, kill what is left
#
# Every member's stdin is a FIFO the test holds open; its stdout and stderr
# are files in $mesh_dir.  Waits poll with generous timeouts (the machine
# may be loaded); the trap ends every member this test started.
. "${srcdir:-.}/lib/tap.sh"

MESH_MEMBER=${MESH_MEMBER:-${top_builddir:-..}/tests/mesh/mesh-member}
[ -x "$MESH_MEMBER" ] || MESH_MEMBER=./mesh/mesh-member
mesh_dir=$(mktemp -d "${TMPDIR:-/tmp}/mesh-test.XXXXXX")
mesh_n=0
mesh_fences=0
ELASTIC_MESH_SECRET=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')
ELASTIC_LOG=${ELASTIC_LOG:-info}
export ELASTIC_MESH_SECRET ELASTIC_LOG
declare -A mesh_fd mesh_pids

mesh_cleanup() {
    local i
    for i in "${!mesh_pids[@]}"; do
        kill -CONT "${mesh_pids[$i]}" 2> /dev/null
        kill -KILL "${mesh_pids[$i]}" 2> /dev/null
    done
    wait 2> /dev/null
    [ -n "${MESH_KEEP:-}" ] || rm -rf "$mesh_dir"
}
trap mesh_cleanup EXIT

mesh_pid() { echo "${mesh_pids[$1]}"; }
mesh_out() { cat "$mesh_dir/out$1"; }
mesh_err() { cat "$mesh_dir/err$1"; }
mesh_cmd() { echo "$2" >&"${mesh_fd[$1]}"; }
mesh_grep() { grep -q -e "$2" "$mesh_dir/out$1"; }
mesh_wait() { wait_until "${3:-60}" grep -q -e "$2" "$mesh_dir/out$1"; }
mesh_line() { grep -e "$2" "$mesh_dir/out$1" | tail -n 1; }
mesh_alive() { kill -0 "${mesh_pids[$1]}" 2> /dev/null; }

# mesh_spawn I ARGS...: member process I (stdin a FIFO, output in files)
mesh_spawn() {
    local i=$1 fd
    shift
    mkfifo "$mesh_dir/in$i"
    exec {fd}<> "$mesh_dir/in$i"
    mesh_fd[$i]=$fd
    "$MESH_MEMBER" "$@" < "$mesh_dir/in$i" > "$mesh_dir/out$i" 2> "$mesh_dir/err$i" &
    mesh_pids[$i]=$!
}

mesh_start() {
    local n=$1 i
    shift
    mesh_n=$n
    for ((i = 0; i < n; i++)); do
        mesh_spawn "$i" --members "$n" --self "$i" --dir "$mesh_dir" "$@"
    done
    for ((i = 0; i < n; i++)); do
        mesh_wait "$i" '^joined' 120 || return 1
    done
}

mesh_start_some() {
    local n=$1 k=$2 i
    shift 2
    mesh_n=$n
    for ((i = 0; i < k; i++)); do
        mesh_spawn "$i" --members "$n" --self "$i" --start "$k" --dir "$mesh_dir" "$@"
    done
    for ((i = 0; i < k; i++)); do
        mesh_wait "$i" '^joined' 120 || return 1
    done
}

mesh_join() {
    local i=$1 name=$2 admitter=$3
    shift 3
    mesh_spawn "$i" --members "$mesh_n" --join "$name" --first-fence $((mesh_fences + 1)) \
        --dir "$mesh_dir" "$@"
    mesh_wait "$i" '^listening port' 60 || return 1
    mesh_cmd "$admitter" "admit $name"
    mesh_wait "$admitter" "^admit\(ted\)\? $name " 60 || return 1
    mesh_wait "$i" '^joined' 120
}

# mesh_fence I...: the next fence on each, then wait for every result
mesh_fence() {
    local i rc=0
    mesh_fences=$((mesh_fences + 1))
    for i in "$@"; do mesh_cmd "$i" fence; done
    for i in "$@"; do
        mesh_wait "$i" "^fence $mesh_fences " 120 || rc=1
    done
    return $rc
}

mesh_stop() {
    local i
    for i in "${!mesh_pids[@]}"; do
        mesh_alive "$i" && mesh_cmd "$i" quit
    done
    for i in "${!mesh_pids[@]}"; do
        wait_for_exit "${mesh_pids[$i]}" 30 || kill -KILL "${mesh_pids[$i]}" 2> /dev/null
    done
}

# mesh_lost_ms I T0: milliseconds from T0 to member I's first "lost" line
mesh_lost_ms() {
    local t
    t=$(grep -m1 '^lost ' "$mesh_dir/out$1" | sed -n 's/.* t=\([0-9]*\).*/\1/p')
    [ -n "$t" ] && echo $((t - $2))
}
