#!/bin/bash
# t5109-mesh-ports.sh - the mesh's candidate ports (mesh_config.ports, the
# job map's deterministic ports under Slurm): a member whose first port is
# taken listens on the next free one, and its peers find it there
#
# Three members on 127.0.0.1 share four candidate ports; a stranger (a
# socket that accepts and says nothing) holds the first.  Each member
# listens on another of the other three (so two of them also find their
# first free choices taken by a member), and with a chain (radix 1) every
# member looks for its parent past the stranger and past members that are
# not its parent.  Then the middle member is killed: the last one, whose
# new parent it never spoke to, finds that member's port within the node
# timeout, and nobody else is lost.  Every candidate in use: a clear error.
. "${srcdir:-.}/mesh/lib.sh"

# four consecutive free ports
ports=$("$PYTHON" - << 'EOF'
import random, socket
for _ in range(200):
    base = random.randrange(20000, 30000)
    socks = []
    try:
        for p in range(base, base + 4):
            s = socket.socket()
            s.bind(("127.0.0.1", p))
            socks.append(s)
    except OSError:
        continue
    finally:
        for s in socks:
            s.close()
    print(",".join(str(p) for p in range(base, base + 4)))
    break
EOF
)
[ -n "$ports" ] || skip_all "no four free consecutive ports on 127.0.0.1"
p0=${ports%%,*}

# the stranger on the first candidate: accepts, reads, never answers
"$PYTHON" - "$p0" "$mesh_dir/stranger.ready" << 'EOF' &
import socket, sys, threading
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
open(sys.argv[2], "w").close()
held = []
while True:
    c, _ = s.accept()
    held.append(c)
EOF
stranger=$!
trap 'kill "$stranger" 2> /dev/null; mesh_cleanup' EXIT
wait_until 30 test -e "$mesh_dir/stranger.ready"
ok $? "a silent stranger listens on port $p0"

mesh_start 3 --ports "$ports" --radix 1 --timeout 1
ok $? "3 members joined over candidate ports $ports" || diag "$(mesh_err 0)" "$(mesh_err 1)" "$(mesh_err 2)"
got=()
for i in 0 1 2; do
    got[i]=$(sed -n "s/^ready $i port //p" "$mesh_dir/out$i")
done
diag "listening: member 0 on ${got[0]}, 1 on ${got[1]}, 2 on ${got[2]}"
distinct=$(printf '%s\n' "${got[@]}" | sort -u | wc -l)
inlist=0
for g in "${got[@]}"; do
    [ "$g" != "$p0" ] && case ",$ports," in *",$g,"*) inlist=$((inlist + 1)) ;; esac
done
[ "$distinct" = 3 ] && [ "$inlist" = 3 ]
ok $? "each listens on a different candidate, none on the stranger's"
for i in 0 1 2; do
    grep -q "port $p0 is in use here; listening on port ${got[i]}" "$mesh_dir/err$i"
    ok $? "member $i says where it listens instead" || diag "$(mesh_err "$i")"
done

mesh_fence 0 1 2
for i in 0 1 2; do
    grep -q '^fence 1 ok epoch 0 members 0,1,2 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 1 with all three" || diag "$(mesh_out "$i")"
done

# the chain 0 <- 1 <- 2 repaired to 0 <- 2: member 2 never spoke to member 0
kill -KILL "$(mesh_pid 1)"
mesh_wait 0 '^lost 1 ' 60
ok $? "member 0: member 1 lost"
mesh_wait 2 '^lost 1 ' 60
ok $? "member 2: member 1 lost"
mesh_fence 0 2
for i in 0 2; do
    grep -q '^fence 2 ok epoch 1 members 0,2 ' "$mesh_dir/out$i"
    ok $? "member $i: fence 2 over the repaired tree" || diag "$(mesh_out "$i")"
    ! grep -q '^lost [02]\b\|^lost .*,[02]\b' "$mesh_dir/out$i"
    ok $? "member $i: nobody else lost (member 2 found member 0's port in time)" ||
        diag "$(mesh_out "$i")" "$(mesh_err "$i")"
done
mesh_stop

# every candidate taken (by the four members of another mesh): one line
# naming the ports, a non-zero exit
mesh_dir2=$(mktemp -d "${TMPDIR:-/tmp}/mesh-test2.XXXXXX")
mkfifo "$mesh_dir2/in"
exec {fd2}<> "$mesh_dir2/in"
for i in 0 1 2 3; do
    "$MESH_MEMBER" --members 4 --self "$i" --ports "$ports" --timeout 1 \
        < "$mesh_dir2/in" > "$mesh_dir2/out$i" 2> "$mesh_dir2/err$i" &
    mesh_pids[o$i]=$!
done
for i in 0 1 2 3; do wait_for_grep '^joined' "$mesh_dir2/out$i" 60 || break; done
ok $? "another mesh of four holds every candidate" || diag "$(cat "$mesh_dir2"/err*)"
out=$(timeout 60 "$MESH_MEMBER" --members 4 --self 0 --ports "$ports" --timeout 1 < /dev/null 2>&1)
is "$?" 2 "a fifth member with every candidate in use exits 2"
echo "$out" | grep -q "every candidate port is in use here ($ports)"
ok $? "... and says so, naming the ports" || diag "$out"
for i in 0 1 2 3; do kill "${mesh_pids[o$i]}" 2> /dev/null; done
for i in 0 1 2 3; do wait "${mesh_pids[o$i]}" 2> /dev/null; done
rm -rf "$mesh_dir2"
done_testing
