#!/bin/sh
# first-attempt.sh EXTRA PROG [ARGS...] - run PROG ARGS, with the words of
# EXTRA added only in a worker group's first attempt (ELASTIC_RESTART_COUNT
# unset or 0): a failure injected with --fail is not injected again after
# the group restarted.
extra=$1
shift
if [ "${ELASTIC_RESTART_COUNT:-0}" = 0 ]; then
    # shellcheck disable=SC2086
    exec "$@" $extra
fi
exec "$@"
