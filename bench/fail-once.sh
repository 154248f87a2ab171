#!/bin/sh
# fail-once.sh - run PROG ARGS, adding `--fail RANK:STEP` on a job's first
# attempt only (B1: a relaunched or restarted job must not fail again).
#
#   fail-once.sh RANK:STEP PROG [ARGS...]
#
# The first attempt is ELASTIC_ATTEMPT unset or 1 (elastic-mpirun numbers
# its launches from 1 in a fresh run directory) and ELASTIC_RESTART_COUNT
# unset or 0 (elastic-exec's group restarts).  The program is exec'ed, so
# the rank's process is the program itself.
spec=$1
shift
if [ "${ELASTIC_ATTEMPT:-1}" = 1 ] && [ "${ELASTIC_RESTART_COUNT:-0}" = 0 ]; then
    exec "$@" --fail "$spec"
fi
exec "$@"
