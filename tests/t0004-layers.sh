#!/bin/bash
# t0004-layers.sh - each layer calls only downward, checked on the built
# objects with nm (what an object file uses that another one defines):
#
#   src/common       uses nothing of any other component;
#   libelastic       uses nothing of the tools (src/exec, src/mpirun);
#   the PMIx server  (src/exec/pmix/ but pmix_backend) uses nothing of the
#                    agent: it is below the backend that drives it;
#   the mesh         (src/exec/mesh/) uses nothing of the agent, its backends
#                    or the PMIx server: they will drive it;
#   the agent core   (agent, agent_loop, agent_setup, machine, group) uses no
#                    symbol a backend (local, drain, pmix_backend) defines:
#                    only backends.c, the table of built-in backends, names
#                    them;
#   a backend        uses of the core only what <elastic/agent.h> and
#                    src/exec/agent_backend.h (with the worker.h it
#                    includes) declare.
# A failing check names the object and the symbols that go the wrong way.
. "${srcdir:-.}/lib/tap.sh"

build=$(cd "${top_builddir:-..}" && pwd)
src=$(cd "${srcdir:-.}/.." && pwd)
command -v nm > /dev/null || skip_all "nm is not installed"
lib() { echo "$build/src/$1/.libs"; }
[ -d "$(lib common)" ] && ls "$(lib common)"/*.o > /dev/null 2>&1 || skip_all "no objects in $(lib common)"

# defined SYMBOLS / used SYMBOLS of object files (global, text and data)
defined() { nm --defined-only -g "$@" 2> /dev/null | awk 'NF == 3 { print $3 }' | sort -u; }
used() { nm -u "$@" 2> /dev/null | awk 'NF >= 2 { print $2 }' | sort -u; }
# objs DIR NAME...: the objects of those sources (libtool may prefix them)
objs() {
    local d=$1 n f
    shift
    for n in "$@"; do
        for f in "$d/$n.o" "$d"/*-"$n.o"; do
            [ -f "$f" ] && echo "$f"
        done
    done
}
# wrong_way WHAT USERS... -- PROVIDERS...: ok if USERS use nothing PROVIDERS define
wrong_way() {
    local what=$1 users=() providers=() bad
    shift
    while [ "$1" != "--" ]; do
        users+=("$1")
        shift
    done
    shift
    providers=("$@")
    if [ ${#users[@]} -eq 0 ] || [ ${#providers[@]} -eq 0 ]; then
        skip "$what: objects not built in this configuration"
        return
    fi
    bad=$(comm -12 <(used "${users[@]}") <(defined "${providers[@]}") | tr '\n' ' ')
    [ -z "$bad" ]
    ok $? "$what" || diag "used the wrong way: $bad"
}

common=($(ls "$(lib common)"/*.o))
exec_all=($(ls "$(lib exec)"/*.o "$(lib exec)"/../pmix/.libs/*.o 2> /dev/null))
mpirun_all=($(ls "$(lib mpirun)"/*.o 2> /dev/null))
libelastic_all=($(ls "$(lib libelastic)"/*.o 2> /dev/null))
snapshot_all=($(ls "$build"/src/snapshot/*.o 2> /dev/null))

wrong_way "src/common uses nothing of libelastic, elastic-exec, elastic-mpirun, elastic-snapshot" \
    "${common[@]}" -- "${libelastic_all[@]}" "${exec_all[@]}" "${mpirun_all[@]}" "${snapshot_all[@]}"
wrong_way "libelastic uses nothing of elastic-exec or elastic-mpirun" \
    "${libelastic_all[@]}" -- "${exec_all[@]}" "${mpirun_all[@]}"

core=($(objs "$(lib exec)" agent agent_loop agent_setup machine group))
backends=($(objs "$(lib exec)" local drain) $(objs "$build/src/exec/pmix/.libs" pmix_backend))
pmixsrv=($(objs "$build/src/exec/pmix/.libs" pmix_host pmix_upcalls pmix_jobinfo pmix_nodelay pmix_transport_local))
[ ${#pmixsrv[@]} -gt 0 ] || pmixsrv=($(objs "$(lib exec)" pmix_host pmix_upcalls pmix_jobinfo pmix_nodelay pmix_transport_local))
services=($(objs "$(lib exec)" watchdog health metrics result eventlog output guardian loop))

wrong_way "the agent core uses no backend's symbol (only backends.c names them)" \
    "${core[@]}" -- "${backends[@]}"
wrong_way "the services (watchdog, health, metrics, ...) use no backend's symbol" \
    "${services[@]}" -- "${backends[@]}"
wrong_way "the PMIx server uses nothing of the agent core or its backends" \
    "${pmixsrv[@]}" -- "${core[@]}" "${backends[@]}"

mesh=($(ls "$build"/src/exec/mesh/.libs/*.o 2> /dev/null))
wrong_way "the mesh uses nothing of the agent core, its services, backends or the PMIx server" \
    "${mesh[@]}" -- "${core[@]}" "${services[@]}" "${backends[@]}" "${pmixsrv[@]}"

# a backend: of the core's symbols, only the declared ones
api=$(sed -n 's/^[a-z].*[ *]\([a-z_][a-z0-9_]*\) (.*/\1/p' \
    "$src/include/elastic/agent.h" "$src/src/exec/agent_backend.h" "$src/src/exec/worker.h" | sort -u)
if [ ${#backends[@]} -gt 0 ] && [ ${#core[@]} -gt 0 ]; then
    [ -n "$api" ]
    ok $? "the backend API is read from agent.h, agent_backend.h and worker.h ($(echo $api | wc -w) functions)"
    bad=$(comm -23 <(comm -12 <(used "${backends[@]}") <(defined "${core[@]}")) <(echo "$api") | tr '\n' ' ')
    [ -z "$bad" ]
    ok $? "the backends call the core only through <elastic/agent.h> and agent_backend.h" ||
        diag "undeclared core symbols used by a backend: $bad"
    n=$(comm -12 <(used "${backends[@]}") <(defined "${core[@]}") | wc -l)
    [ "$n" -gt 0 ]
    ok $? "the check sees the backends' calls into the core ($n symbols): it can fail"
else
    skip "backend objects not built"
fi
table=($(objs "$(lib exec)" backends))
if [ ${#table[@]} -gt 0 ]; then
    n=$(comm -12 <(used "${table[@]}") <(defined "${backends[@]}") | wc -l)
    [ "$n" -gt 0 ]
    ok $? "backends.c names the built-in backends ($n symbols)"
fi
done_testing
