# python/python.sh - helpers for the Python binding's tests (source after
# lib/mpitest.sh or lib/tap.sh)
#
#   PY                  the interpreter the binding is built for (configure's PYTHON)
#   PYPATH              the package in the build tree (for PYTHONPATH)
#   HEAT_PY, SGD_PY     the examples (examples/python/)
#   py_skip_unless_built   skip_all when the binding is not built or cannot run
#
# Only PYTHONPATH is set for the programs: which libmpi they load is the
# package's business (elastic/_load.py), never an LD_LIBRARY_PATH here.

PY=${PYTHON:-/usr/bin/python3}
PYPATH=$(cd "${top_builddir:-..}/python" 2> /dev/null && pwd)
HEAT_PY=$(readlink -f "${srcdir:-.}/../examples/python/heat2d.py")
SGD_PY=$(readlink -f "${srcdir:-.}/../examples/python/sgd.py")
unset LD_LIBRARY_PATH

py_skip_unless_built() {
    [ -n "$PYPATH" ] && [ -f "$PYPATH/elastic/_elastic.so" ] ||
        skip_all "the Python binding is not built (configure --with-python)"
    # a sanitizer build's libelastic needs ASan first in the process
    [ "${ENABLE_SANITIZERS:-no}" != yes ] ||
        skip_all "a sanitizer build: libelastic cannot be loaded into an uninstrumented Python"
}
