#!/bin/bash
# t0005-architecture-doc.sh - doc/architecture.md names every source file of
# the components (src/, slurm/, python/), so that it stays true to the tree.
. "${srcdir:-.}/lib/tap.sh"

top=$(cd "${srcdir:-.}/.." && pwd)
doc=$top/doc/architecture.md
[ -f "$doc" ] || skip_all "no $doc"
n=0 missing=
while IFS= read -r f; do
    n=$((n + 1))
    b=$(basename "$f" .c)
    grep -qF -e "$b.c" -e "\`$b\`" -e "$b.{c,h}" -e "$b.[ch]" "$doc" || missing="$missing ${f#$top/}"
done < <(find "$top/src" "$top/slurm" "$top/python" -name '*.c' 2> /dev/null | sort)
[ "$n" -gt 50 ]
ok $? "the tree's C sources are found ($n)"
[ -z "$missing" ]
ok $? "doc/architecture.md names every one of them" || diag "not named:$missing"
done_testing
