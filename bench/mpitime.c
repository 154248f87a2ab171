/* mpitime.c - an LD_PRELOAD library that times an unmodified MPI program
 * from outside (B1 and B6 drivers).
 *
 *   mpirun -x LD_PRELOAD=.../libbenchmpitime.so -x BENCH_MPITIME=FILE \
 *          -x BENCH_STEPLOG=FILE2 ... ./app
 *
 * BENCH_MPITIME: each rank that reaches MPI_Finalize appends one line
 *   PID INIT_ENTER INIT_LEAVE FINALIZE_ENTER CPU_S NIVCSW CALLS BYTES LIB_S
 *   OTHER_CPU_S
 * (CLOCK_REALTIME seconds, comparable across the ranks of one machine), so a
 * driver can take the application's own run time (MPI_Init returned ->
 * MPI_Finalize entered) without the launcher's start-up and tear-down.  The
 * wrappers are MPI's profiling interface: MPI_Init and MPI_Finalize call
 * PMPI_Init and PMPI_Finalize.  Over the same interval (MPI_Init returned ->
 * MPI_Finalize entered) the line has the process's CPU time (CPU_S:
 * getrusage RUSAGE_SELF, user + sys, every thread; an MPI rank that waits
 * polls, so this counts waiting as well as working), its involuntary
 * context switches (NIVCSW: how often the kernel took the core away, a
 * measure of the load from outside) and a count of the communication it
 * started: CALLS, the calls of the MPI functions below that start
 * communication (collectives, point-to-point sends and receives, ULFM's
 * agreement; not the MPI_Wait/MPI_Test that complete them, whose count
 * depends on timing), BYTES the bytes those calls send (count x type size
 * of the send buffer; a collective counts its send buffer once).  The
 * program's and libelastic's calls are counted alike (libelastic calls the
 * MPI_ names, which this library interposes before libmpi): the same
 * program with and without the library's work differs by exactly the
 * library's calls.
 *
 * Two more fields follow (B6: what the library costs, measured directly
 * rather than as the difference of two noisy run times): LIB_S, the wall
 * time spent inside libelastic's calls that heat2d makes (manager create,
 * start and destroy, maybe_snapshot, maybe_reshard_up and _down; the
 * outermost call only, from entry to return, waits for the other ranks
 * included), and OTHER_CPU_S, the CPU time of the process's threads but
 * the main one (getrusage RUSAGE_SELF less RUSAGE_THREAD of the thread
 * that calls MPI_Init and MPI_Finalize: MPI's and PMIx's progress threads,
 * libelastic's background L3 writer).  Neither counts what the library
 * costs outside its calls on the main thread: an overlapped L2 exchange
 * progressing inside the program's own MPI calls, caches it evicted.
 *
 * BENCH_CALLLOG: every rank appends, at MPI_Finalize, one line per
 *   elastic_maybe_snapshot call it made after MPI_Init returned
 *   PID STEP ENTER LEAVE
 * (CLOCK_MONOTONIC seconds, one clock for every process of a machine), so
 * that a driver can take what a snapshot step costs the job: from the
 * moment the last rank entered the call to the moment the last rank left
 * it (a rank that arrives early waits for the others there, as it would
 * have in the program's next exchange without the library).
 *
 * BENCH_STEPLOG: the process of rank 0 (RANK, else OMPI_COMM_WORLD_RANK,
 * else PMIX_RANK, as the launcher set it) appends "STEP TIME" each time it
 * enters elastic_maybe_snapshot, libelastic's call at the top of every
 * step, which this library interposes (the real function is called through
 * dlsym RTLD_NEXT, unchanged).  Across a failure, a recovery or a relaunch
 * (every attempt appends), the log says when the job first reached a step
 * and when it reached a later one again.
 *
 * The library is not linked against MPI or libelastic (the PMPI symbols are
 * weak, libelastic's is looked up when first called; mpi.h only gives the
 * types), so that a launcher or a wrapper that inherits LD_PRELOAD loads it
 * harmlessly: a program that does not call MPI never reaches a wrapper.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#pragma weak PMPI_Init
#pragma weak PMPI_Init_thread
#pragma weak PMPI_Finalize
int PMPI_Init (int *argc, char ***argv);
int PMPI_Init_thread (int *argc, char ***argv, int required, int *provided);
int PMPI_Finalize (void);
int PMPIX_Comm_agree (MPI_Comm comm, int *flag);
int MPIX_Comm_agree (MPI_Comm comm, int *flag);
#pragma weak PMPI_Type_size
#pragma weak PMPI_Allreduce
#pragma weak PMPI_Reduce
#pragma weak PMPI_Bcast
#pragma weak PMPI_Barrier
#pragma weak PMPI_Allgather
#pragma weak PMPI_Allgatherv
#pragma weak PMPI_Isend
#pragma weak PMPI_Irecv
#pragma weak PMPI_Send
#pragma weak PMPI_Recv
#pragma weak PMPI_Sendrecv
#pragma weak PMPIX_Comm_agree

int MPI_Init (int *argc, char ***argv);
int MPI_Init_thread (int *argc, char ***argv, int required, int *provided);
int MPI_Finalize (void);

static double t_init_enter, t_init_leave;
static double cpu_init_leave, thread_cpu_init_leave;
static double lib_s;  /* inside libelastic's calls (outermost) */
static int lib_depth; /* calls of the main thread only: not atomic */
static long nivcsw_init_leave;
static unsigned long long mpi_calls, mpi_bytes;

/* BENCH_CALLLOG: the maybe_snapshot calls (grows by doubling; a call that
 * finds no memory is not logged) */
struct call_rec {
    long long step;
    double enter, leave;
};
static struct call_rec *calls;
static size_t ncalls, calls_cap;

static void call_log (long long step, double enter, double leave)
{
    if (ncalls == calls_cap) {
        size_t cap = calls_cap ? 2 * calls_cap : 4096;
        struct call_rec *c = realloc (calls, cap * sizeof (*c));
        if (!c)
            return;
        calls = c;
        calls_cap = cap;
    }
    calls[ncalls++] = (struct call_rec){step, enter, leave};
}

/* append the logged calls to path, a buffer at a time */
static void call_log_write (const char *path)
{
    char buf[8192];
    size_t len = 0;
    int fd;

    if ((fd = open (path, O_WRONLY | O_APPEND | O_CREAT, 0644)) < 0)
        return;
    for (size_t i = 0; i <= ncalls; i++) {
        if (i == ncalls || len > sizeof (buf) - 100) {
            if (len > 0 && write (fd, buf, len) != (ssize_t)len) {
            }
            len = 0;
        }
        if (i < ncalls)
            len += (size_t)snprintf (buf + len,
                                     sizeof (buf) - len,
                                     "%ld %lld %.7f %.7f\n",
                                     (long)getpid (),
                                     calls[i].step,
                                     calls[i].enter,
                                     calls[i].leave);
    }
    close (fd);
}

static double cpu_now (long *nivcsw)
{
    struct rusage ru;

    if (getrusage (RUSAGE_SELF, &ru) < 0)
        return 0.;
    if (nivcsw)
        *nivcsw = ru.ru_nivcsw;
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* CPU time (user + sys) of the calling thread */
static double thread_cpu_now (void)
{
    struct rusage ru;

    if (getrusage (RUSAGE_THREAD, &ru) < 0)
        return 0.;
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static double mono (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double now (void)
{
    struct timespec ts;

    clock_gettime (CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int MPI_Init (int *argc, char ***argv)
{
    int rc;

    t_init_enter = now ();
    rc = PMPI_Init (argc, argv);
    t_init_leave = now ();
    cpu_init_leave = cpu_now (&nivcsw_init_leave);
    thread_cpu_init_leave = thread_cpu_now ();
    return rc;
}

int MPI_Init_thread (int *argc, char ***argv, int required, int *provided)
{
    int rc;

    t_init_enter = now ();
    rc = PMPI_Init_thread (argc, argv, required, provided);
    t_init_leave = now ();
    cpu_init_leave = cpu_now (&nivcsw_init_leave);
    thread_cpu_init_leave = thread_cpu_now ();
    return rc;
}

static int rank0 = -1; /* 1: this process is rank 0 (-1: not known yet) */

static int is_rank0 (void)
{
    static const char *vars[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"};

    if (rank0 < 0) {
        rank0 = 0;
        for (size_t i = 0; i < sizeof (vars) / sizeof (vars[0]); i++) {
            const char *v = getenv (vars[i]);
            if (v && *v) {
                rank0 = strcmp (v, "0") == 0;
                break;
            }
        }
    }
    return rank0;
}

/* The timer around a libelastic call: LIB_ENTER before the real call,
 * LIB_LEAVE after it; only the outermost call is counted. */
#define LIB_ENTER double t0_ = lib_depth++ == 0 ? mono () : 0.
#define LIB_LEAVE                                                                        \
    do {                                                                                 \
        if (--lib_depth == 0)                                                            \
            lib_s += mono () - t0_;                                                      \
    } while (0)

/* real_: the real function NAME, of pointer type TYPE (looked up once). */
#define REAL(type, name)                                                                 \
    static type real_;                                                                   \
    if (!real_)                                                                          \
    *(void **)&real_ = dlsym (RTLD_NEXT, name)

typedef void (*handler_f) (void);

int elastic_manager_create (MPI_Comm comm, const void *cfg, void **mp, void *err);
int elastic_manager_create (MPI_Comm comm, const void *cfg, void **mp, void *err)
{
    typedef int (*fn) (MPI_Comm, const void *, void **, void *);
    REAL (fn, "elastic_manager_create");
    LIB_ENTER;
    int rc = real_ ? real_ (comm, cfg, mp, err) : 1;
    LIB_LEAVE;
    return rc;
}

int elastic_manager_start (void *m, handler_f h, void *arg, int *active, void *err);
int elastic_manager_start (void *m, handler_f h, void *arg, int *active, void *err)
{
    typedef int (*fn) (void *, handler_f, void *, int *, void *);
    REAL (fn, "elastic_manager_start");
    LIB_ENTER;
    int rc = real_ ? real_ (m, h, arg, active, err) : 1;
    LIB_LEAVE;
    return rc;
}

void elastic_manager_destroy (void *m);
void elastic_manager_destroy (void *m)
{
    typedef void (*fn) (void *);
    REAL (fn, "elastic_manager_destroy");
    LIB_ENTER;
    if (real_)
        real_ (m);
    LIB_LEAVE;
}

int elastic_maybe_reshard_up (
    void *m, int64_t step, handler_f h, void *arg, int *resharded, void *err);
int elastic_maybe_reshard_up (
    void *m, int64_t step, handler_f h, void *arg, int *resharded, void *err)
{
    typedef int (*fn) (void *, int64_t, handler_f, void *, int *, void *);
    REAL (fn, "elastic_maybe_reshard_up");
    LIB_ENTER;
    int rc = real_ ? real_ (m, step, h, arg, resharded, err) : 1;
    LIB_LEAVE;
    return rc;
}

int elastic_maybe_reshard_down (void *m, int mpi_err, handler_f h, void *arg, void *err);
int elastic_maybe_reshard_down (void *m, int mpi_err, handler_f h, void *arg, void *err)
{
    typedef int (*fn) (void *, int, handler_f, void *, void *);
    REAL (fn, "elastic_maybe_reshard_down");
    LIB_ENTER;
    int rc = real_ ? real_ (m, mpi_err, h, arg, err) : 1;
    LIB_LEAVE;
    return rc;
}

int elastic_maybe_snapshot (void *m, int64_t step, void *err);

int elastic_maybe_snapshot (void *m, int64_t step, void *err)
{
    static int (*real) (void *, int64_t, void *);
    const char *path = getenv ("BENCH_STEPLOG");
    int rc;

    if (path && *path && is_rank0 ()) {
        char line[80];
        int fd,
            n = snprintf (line, sizeof (line), "%lld %.6f\n", (long long)step, now ());
        if ((fd = open (path, O_WRONLY | O_APPEND | O_CREAT, 0644)) >= 0) {
            if (write (fd, line, (size_t)n) != n) {
            }
            close (fd);
        }
    }
    if (!real)
        *(void **)&real = dlsym (RTLD_NEXT, "elastic_maybe_snapshot");
    LIB_ENTER;
    double enter = mono ();
    rc = real ? real (m, step, err) : 1; /* ELASTIC_ERR_INVAL: cannot happen */
    if (t_init_leave > 0)
        call_log ((long long)step, enter, mono ());
    LIB_LEAVE;
    return rc;
}

/* count one call that sends COUNT elements of TYPE */
static void count (int n, MPI_Datatype type)
{
    int size = 0;

    mpi_calls++;
    if (n > 0 && PMPI_Type_size (type, &size) == MPI_SUCCESS && size > 0)
        mpi_bytes += (unsigned long long)n * (unsigned long long)size;
}

int MPI_Allreduce (const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c)
{
    count (n, t);
    return PMPI_Allreduce (sb, rb, n, t, op, c);
}

int MPI_Reduce (
    const void *sb, void *rb, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c)
{
    count (n, t);
    return PMPI_Reduce (sb, rb, n, t, op, root, c);
}

int MPI_Bcast (void *b, int n, MPI_Datatype t, int root, MPI_Comm c)
{
    count (n, t);
    return PMPI_Bcast (b, n, t, root, c);
}

int MPI_Barrier (MPI_Comm c)
{
    mpi_calls++;
    return PMPI_Barrier (c);
}

int MPI_Allgather (const void *sb,
                   int sn,
                   MPI_Datatype st,
                   void *rb,
                   int rn,
                   MPI_Datatype rt,
                   MPI_Comm c)
{
    count (sn, st);
    return PMPI_Allgather (sb, sn, st, rb, rn, rt, c);
}

int MPI_Allgatherv (const void *sb,
                    int sn,
                    MPI_Datatype st,
                    void *rb,
                    const int *rn,
                    const int *displs,
                    MPI_Datatype rt,
                    MPI_Comm c)
{
    count (sn, st);
    return PMPI_Allgatherv (sb, sn, st, rb, rn, displs, rt, c);
}

int MPI_Isend (
    const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request *r)
{
    count (n, t);
    return PMPI_Isend (b, n, t, to, tag, c, r);
}

int MPI_Irecv (
    void *b, int n, MPI_Datatype t, int from, int tag, MPI_Comm c, MPI_Request *r)
{
    mpi_calls++;
    return PMPI_Irecv (b, n, t, from, tag, c, r);
}

int MPI_Send (const void *b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c)
{
    count (n, t);
    return PMPI_Send (b, n, t, to, tag, c);
}

int MPI_Recv (
    void *b, int n, MPI_Datatype t, int from, int tag, MPI_Comm c, MPI_Status *st)
{
    mpi_calls++;
    return PMPI_Recv (b, n, t, from, tag, c, st);
}

int MPI_Sendrecv (const void *sb,
                  int sn,
                  MPI_Datatype st,
                  int to,
                  int stag,
                  void *rb,
                  int rn,
                  MPI_Datatype rt,
                  int from,
                  int rtag,
                  MPI_Comm c,
                  MPI_Status *status)
{
    count (sn, st);
    return PMPI_Sendrecv (sb, sn, st, to, stag, rb, rn, rt, from, rtag, c, status);
}

int MPIX_Comm_agree (MPI_Comm c, int *flag)
{
    mpi_calls++;
    return PMPIX_Comm_agree (c, flag);
}

int MPI_Finalize (void)
{
    double t = now ();
    long nivcsw = 0;
    double cpu = cpu_now (&nivcsw) - cpu_init_leave;
    double other = cpu - (thread_cpu_now () - thread_cpu_init_leave);
    const char *path = getenv ("BENCH_MPITIME");
    const char *clog = getenv ("BENCH_CALLLOG");
    char line[240];
    int fd, n;

    if (clog && *clog)
        call_log_write (clog);

    if (path && *path && (fd = open (path, O_WRONLY | O_APPEND | O_CREAT, 0644)) >= 0) {
        n = snprintf (line,
                      sizeof (line),
                      "%ld %.6f %.6f %.6f %.6f %ld %llu %llu %.6f %.6f\n",
                      (long)getpid (),
                      t_init_enter,
                      t_init_leave,
                      t,
                      cpu,
                      nivcsw - nivcsw_init_leave,
                      mpi_calls,
                      mpi_bytes,
                      lib_s,
                      other > 0 ? other : 0.);
        if (write (fd, line, (size_t)n) != n) {
        }
        close (fd);
    }
    return PMPI_Finalize ();
}
