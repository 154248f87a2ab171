#!/bin/sh
# init-kill.sh VICTIM GOFILE PROG [ARGS...] - kill rank VICTIM inside MPI_Init
#
# In a worker group's first attempt (ELASTIC_RESTART_COUNT unset or 0) rank
# VICTIM starts PROG first, waits until it has mapped its Open MPI
# shared-memory segment (it is then inside MPI_Init, blocked in the first
# fence, since no other rank has started yet), SIGKILLs it, creates GOFILE
# and SIGKILLs itself; every other rank waits for GOFILE before it starts
# PROG.  Later attempts run PROG at once.  For any MPI program (heat2d).
victim=$1 go=$2
shift 2
if [ "${ELASTIC_RESTART_COUNT:-0}" != 0 ]; then
    exec "$@"
fi
if [ "$RANK" != "$victim" ]; then
    n=0
    while [ ! -e "$go" ]; do
        n=$((n + 1))
        [ $n -gt 6000 ] && exit 99 # 60 s: the victim never got there
        sleep 0.01
    done
    exec "$@"
fi
"$@" &
child=$!
n=0
until grep -q ' /dev/shm/' "/proc/$child/maps" 2> /dev/null; do
    n=$((n + 1))
    if [ $n -gt 6000 ] || ! kill -0 "$child" 2> /dev/null; then
        echo "init-kill: rank $RANK never mapped a segment" >&2
        touch "$go"
        exit 98
    fi
    sleep 0.01
done
kill -KILL "$child"
wait "$child"
echo "init-kill: rank $RANK killed inside MPI_Init" >&2
touch "$go"
kill -KILL $$
