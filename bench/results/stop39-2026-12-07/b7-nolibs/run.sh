#!/bin/bash
# A/B: elastic-exec as built vs the same binary without hwloc/sodium/munge mapped
# (the record of the 2026-12-07 run, doc/benchmarks.md; the copy was made with
#   cp build/src/exec/elastic-exec /tmp/ee-nolibs
#   patchelf --remove-needed libhwloc.so.15 --remove-needed libsodium.so.23 \
#            --remove-needed libmunge.so.2 /tmp/ee-nolibs
# usage: run.sh OUTDIR [ROUNDS])
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_opal_cuda_support=0 PRTE_MCA_prte_silence_shared_fs=1
M="/opt/elastic-deps/openmpi-5.0.7-ulfm/bin/mpirun --with-ft ulfm --mca pml ob1 --mca coll ^han --mca async_mpi_finalize 1 --mca mpi_ft_detector false --oversubscribe --bind-to none -n 8"
A=/work/main/build/tests/bench_mpi_hello
out=$1; rounds=${2:-20}; mkdir -p $out
for r in $(seq $rounds); do
  hyperfine -N --style none --warmup 1 --runs 4 --export-json $out/r$r.json \
    -n mpirun "$M $A" -n exec "$M /work/main/build/src/exec/elastic-exec -- $A" -n nolibs "$M /tmp/ee-nolibs -- $A" > /dev/null 2>&1
done
python3 - $out $rounds <<'PY'
import json,sys,statistics,random
out,R=sys.argv[1],int(sys.argv[2])
rat={'exec':[],'nolibs':[],'nolibs/exec':[]}; cpu={'exec':[],'nolibs':[],'nolibs/exec':[]}
for r in range(1,R+1):
    d={x['command']:x for x in json.load(open('%s/r%d.json'%(out,r)))['results']}
    w={k:statistics.median(v['times']) for k,v in d.items()}; c={k:v['user']+v['system'] for k,v in d.items()}
    for k in ('exec','nolibs'):
        rat[k].append(w[k]/w['mpirun']-1); cpu[k].append(c[k]/c['mpirun']-1)
    rat['nolibs/exec'].append(w['nolibs']/w['exec']-1); cpu['nolibs/exec'].append(c['nolibs']/c['exec']-1)
def ci(v):
    random.seed(1); m=sorted(statistics.median(random.choices(v,k=len(v))) for _ in range(2000)); return m[50],m[1949]
for k in rat:
    a=ci(rat[k]); b=ci(cpu[k])
    print("%-12s wall %+.1f%% [%+.1f, %+.1f]  CPU %+.1f%% [%+.1f, %+.1f]  (%d rounds)"%(k,100*statistics.median(rat[k]),100*a[0],100*a[1],100*statistics.median(cpu[k]),100*b[0],100*b[1],len(rat[k])))
PY
