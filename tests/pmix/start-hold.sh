#!/bin/sh
# start-hold.sh HOW VICTIM PROG [ARGS...] - hold rank VICTIM before it can
# make its first progress report, then run PROG
#
#   stop     in the first attempt (ELASTIC_RESTART_COUNT unset or 0), the
#            victim stops itself (SIGSTOP) before it execs PROG: before
#            MPI_Init, while its peers wait inside it
#   sleep    in the first attempt, the victim sleeps 60 s before PROG (it
#            runs, it is not stopped: only MPI_Init's deadline finds it)
#   nohb     the victim runs PROG without ELASTIC_HEARTBEAT_FILE, so that it
#            never attaches its heartbeat: to its agent it is before its
#            first report for as long as it runs (a test stops it then)
how=$1 victim=$2
shift 2
[ "$RANK" = "$victim" ] || exec "$@"
case $how in
    stop)
        [ "${ELASTIC_RESTART_COUNT:-0}" = 0 ] && kill -STOP $$ ;;
    sleep)
        [ "${ELASTIC_RESTART_COUNT:-0}" = 0 ] && sleep 60 ;;
    nohb)
        unset ELASTIC_HEARTBEAT_FILE ;;
esac
exec "$@"
