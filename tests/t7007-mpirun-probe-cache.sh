#!/bin/bash
# t7007-mpirun-probe-cache.sh - elastic-mpirun asks mpirun --version and
# ompi_info once, not at every start: their answers are cached under
# $XDG_CACHE_HOME/elastic, and asked again when mpirun or ompi_info change
# (or with ELASTIC_MPI_PROBE_CACHE=0).  The mpirun here is a stand-in that
# counts its --version calls; --dry-run never starts it otherwise.
. "${srcdir:-.}/mpirun/lib.sh"

export XDG_CACHE_HOME=$tmp/cache
unset ELASTIC_MPI_PROBE_CACHE
mkdir -p "$tmp/ompi/bin"
M=$tmp/ompi/bin/mpirun
cat > "$M" << EOF
#!/bin/sh
echo x >> "$tmp/version-calls"
echo "mpirun (Open MPI) 5.0.7"
EOF
cat > "$tmp/ompi/bin/ompi_info" << EOF
#!/bin/sh
echo x >> "$tmp/info-calls"
echo "                 Open MPI: 5.0.7"
echo "           FT MPI support: \$(cat "$tmp/ft")"
EOF
echo yes > "$tmp/ft"
chmod +x "$M" "$tmp/ompi/bin/ompi_info"
cd "$tmp" || exit 1

calls() { cat "$tmp/$1-calls" 2> /dev/null | wc -l; }
# dry: the first line of --dry-run (the mpirun command)
dry() { "$EM" --dry-run --no-wrap -n 2 --mpirun "$M" "$@" ./app 2> dry.err | head -n 1; }

out1=$(dry)
is "$(calls version) $(calls info)" "1 1" "the first start asks mpirun --version and ompi_info" ||
    diag "$(cat dry.err)"
ok $(echo "$out1" | grep -q -e "--with-ft ulfm"; echo $?) "ULFM found: --with-ft ulfm" || diag "$out1"
is "$(ls "$XDG_CACHE_HOME"/elastic/mpi-probe-* 2> /dev/null | wc -l)" 1 "the answer is cached"
out2=$(dry)
is "$(calls version) $(calls info)" "1 1" "the second start asks neither"
is "$out2" "$out1" "and builds the same command"

# ompi_info changes (a rebuild without ULFM): asked again, and the answer is the new one
echo no > "$tmp/ft"
printf '\n# rebuilt\n' >> "$tmp/ompi/bin/ompi_info"
out3=$(dry)
is "$(calls version) $(calls info)" "2 2" "a changed ompi_info is asked again"
ok $(echo "$out3" | grep -q -e "--with-ft ulfm"; echo $((!$?))) "no ULFM now: no --with-ft ulfm" ||
    diag "$out3"

# a changed mpirun is asked again
printf '# new\n' >> "$M"
dry > /dev/null
is "$(calls version)" 3 "a changed mpirun is asked again"

# the cache turned off
ELASTIC_MPI_PROBE_CACHE=0 dry > /dev/null
is "$(calls version)" 4 "ELASTIC_MPI_PROBE_CACHE=0 asks every time"

# a cache that cannot be written is not an error
rc=0
XDG_CACHE_HOME=/nonexistent/dir "$EM" --dry-run --no-wrap -n 2 --mpirun "$M" ./app > /dev/null 2> dry.err || rc=$?
is "$rc" 0 "an unwritable cache directory: still works" || diag "$(cat dry.err)"
is "$(calls version)" 5 "(and asks)"
done_testing
