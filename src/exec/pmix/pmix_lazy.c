/* pmix_lazy.c - libpmix is loaded when the PMIx server is first used, not
 * when elastic-exec starts
 *
 * elastic-exec is not linked against libpmix: this file defines the PMIx
 * functions that the server's files call (pmix_host.c, pmix_upcalls.c,
 * pmix_pubsub.c, pmix_spawn.c, pmix_jobinfo.c, pmix_transport_local.c,
 * pmix_transport_mesh.c), with PMIx's own
 * prototypes, and each forwards to libpmix's, which the first call loads (dlopen, once,
 * under pthread_once) and looks up (dlsym).  A per-rank wrapper under
 * mpirun or srun and an agent with --wireup none never call one, so they
 * no longer map libpmix, libevent and libmunge and bind their symbols at
 * start (about two thirds of the dynamic loader's work for elastic-exec;
 * doc/benchmarks.md, B7).  The library is the one configure found: the
 * -L directories of PMIX_LIBS (passed as ELASTIC_PMIX_LIBS) are tried
 * first, then the loader's search path.  If it cannot be loaded,
 * PMIx_server_init (always the first call) returns PMIX_ERR_INIT after
 * one line on the log with dlerror's reason, and the server does not
 * start, as when libpmix's own initialisation fails.
 *
 * The executable does not export these functions (nothing it links at
 * link time refers to them), so they cannot interpose libpmix's own
 * internal calls once it is loaded.  A program that links libpmix itself
 * (tests/pmix.am, the fuzzers) does not need this file and does not link
 * it.  A PMIx function that the server's files start to call must be
 * added here (the link of elastic-exec fails until it is).
 */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <pmix.h>
#include <pmix_server.h>

#include "common/log.h"

#ifndef ELASTIC_PMIX_LIBS
#define ELASTIC_PMIX_LIBS ""
#endif

#define PMIX_LAZY_FUNCS(X)                                                               \
    X (PMIx_Data_array_destruct)                                                         \
    X (PMIx_Data_load)                                                                   \
    X (PMIx_Data_pack)                                                                   \
    X (PMIx_Data_unload)                                                                 \
    X (PMIx_Data_unpack)                                                                 \
    X (PMIx_Deregister_event_handler)                                                    \
    X (PMIx_Error_string)                                                                \
    X (PMIx_Info_list_add)                                                               \
    X (PMIx_Info_list_convert)                                                           \
    X (PMIx_Info_list_release)                                                           \
    X (PMIx_Info_list_start)                                                             \
    X (PMIx_Info_load)                                                                   \
    X (PMIx_Notify_event)                                                                \
    X (PMIx_Register_event_handler)                                                      \
    X (PMIx_Value_destruct)                                                              \
    X (PMIx_Value_xfer)                                                                  \
    X (PMIx_generate_ppn)                                                                \
    X (PMIx_generate_regex)                                                              \
    X (PMIx_server_deregister_client)                                                    \
    X (PMIx_server_deregister_nspace)                                                    \
    X (PMIx_server_dmodex_request)                                                       \
    X (PMIx_server_finalize)                                                             \
    X (PMIx_server_init)                                                                 \
    X (PMIx_server_register_client)                                                      \
    X (PMIx_server_register_nspace)                                                      \
    X (PMIx_server_setup_fork)

static struct {
#define PMIX_LAZY_FIELD(name) __typeof__ (name) *name;
    PMIX_LAZY_FUNCS (PMIX_LAZY_FIELD)
#undef PMIX_LAZY_FIELD
} real;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static int loaded; /* 1: every field of real is set */

/* dlopen libpmix: DIR/libpmix.so.2 for every -LDIR of ELASTIC_PMIX_LIBS,
 * then the loader's search path.  RTLD_GLOBAL: libpmix's own plugins
 * (mca_*.so, dlopened by it) may resolve its symbols in the global scope. */
static void *open_pmix (char *why, size_t size)
{
    static const char *names[] = {"libpmix.so.2", "libpmix.so"};
    const char *p = ELASTIC_PMIX_LIBS;
    char path[4096];
    void *lib;

    while ((p = strstr (p, "-L"))) {
        size_t n = strcspn (p + 2, " \t");
        for (size_t i = 0; i < sizeof (names) / sizeof (names[0]); i++) {
            snprintf (path, sizeof (path), "%.*s/%s", (int)n, p + 2, names[i]);
            if ((lib = dlopen (path, RTLD_NOW | RTLD_GLOBAL)))
                return lib;
        }
        p += 2 + n;
    }
    for (size_t i = 0; i < sizeof (names) / sizeof (names[0]); i++) {
        if ((lib = dlopen (names[i], RTLD_NOW | RTLD_GLOBAL)))
            return lib;
        if (i == 0) {
            const char *e = dlerror ();
            snprintf (why, size, "%s", e ? e : "not found");
        }
    }
    return NULL;
}

static void load (void)
{
    char why[512] = "";
    void *lib;

    if (!(lib = open_pmix (why, sizeof (why)))) {
        log_err ("the PMIx server needs libpmix, which cannot be loaded (%s)", why);
        return;
    }
#define PMIX_LAZY_SYM(name)                                                              \
    if (!(*(void **)&real.name = dlsym (lib, #name))) {                                  \
        log_err ("the loaded libpmix lacks %s (%s)", #name, dlerror ());                 \
        return;                                                                          \
    }
    PMIX_LAZY_FUNCS (PMIX_LAZY_SYM)
#undef PMIX_LAZY_SYM
    loaded = 1;
}

static int ready (void)
{
    pthread_once (&load_once, load);
    return loaded;
}

void PMIx_Data_array_destruct (pmix_data_array_t *d)
{
    if (ready ())
        real.PMIx_Data_array_destruct (d);
}

pmix_status_t PMIx_Data_load (pmix_data_buffer_t *buffer, pmix_byte_object_t *payload)
{
    return ready () ? real.PMIx_Data_load (buffer, payload) : PMIX_ERR_INIT;
}

pmix_status_t PMIx_Data_pack (const pmix_proc_t *target,
                              pmix_data_buffer_t *buffer,
                              void *src,
                              int32_t num_vals,
                              pmix_data_type_t type)
{
    return ready () ? real.PMIx_Data_pack (target, buffer, src, num_vals, type)
                    : PMIX_ERR_INIT;
}

pmix_status_t PMIx_Data_unload (pmix_data_buffer_t *buffer, pmix_byte_object_t *payload)
{
    return ready () ? real.PMIx_Data_unload (buffer, payload) : PMIX_ERR_INIT;
}

pmix_status_t PMIx_Data_unpack (const pmix_proc_t *source,
                                pmix_data_buffer_t *buffer,
                                void *dest,
                                int32_t *max_num_values,
                                pmix_data_type_t type)
{
    return ready () ? real.PMIx_Data_unpack (source, buffer, dest, max_num_values, type)
                    : PMIX_ERR_INIT;
}

pmix_status_t
PMIx_Deregister_event_handler (size_t ref, pmix_op_cbfunc_t cb, void *cbdata)
{
    return ready () ? real.PMIx_Deregister_event_handler (ref, cb, cbdata)
                    : PMIX_ERR_INIT;
}

const char *PMIx_Error_string (pmix_status_t status)
{
    return ready () ? real.PMIx_Error_string (status) : "libpmix is not loaded";
}

pmix_status_t
PMIx_Info_list_add (void *ptr, const char *key, const void *value, pmix_data_type_t type)
{
    return ready () ? real.PMIx_Info_list_add (ptr, key, value, type) : PMIX_ERR_INIT;
}

pmix_status_t PMIx_Info_list_convert (void *ptr, pmix_data_array_t *par)
{
    return ready () ? real.PMIx_Info_list_convert (ptr, par) : PMIX_ERR_INIT;
}

void PMIx_Info_list_release (void *ptr)
{
    if (ready ())
        real.PMIx_Info_list_release (ptr);
}

void *PMIx_Info_list_start (void)
{
    return ready () ? real.PMIx_Info_list_start () : NULL;
}

pmix_status_t PMIx_Info_load (pmix_info_t *info,
                              const char *key,
                              const void *data,
                              pmix_data_type_t type)
{
    return ready () ? real.PMIx_Info_load (info, key, data, type) : PMIX_ERR_INIT;
}

pmix_status_t PMIx_Notify_event (pmix_status_t status,
                                 const pmix_proc_t *source,
                                 pmix_data_range_t range,
                                 const pmix_info_t info[],
                                 size_t ninfo,
                                 pmix_op_cbfunc_t cb,
                                 void *cbdata)
{
    return ready ()
               ? real.PMIx_Notify_event (status, source, range, info, ninfo, cb, cbdata)
               : PMIX_ERR_INIT;
}

pmix_status_t PMIx_Register_event_handler (pmix_status_t codes[],
                                           size_t ncodes,
                                           pmix_info_t info[],
                                           size_t ninfo,
                                           pmix_notification_fn_t evhdlr,
                                           pmix_hdlr_reg_cbfunc_t cb,
                                           void *cbdata)
{
    return ready () ? real.PMIx_Register_event_handler (
                          codes, ncodes, info, ninfo, evhdlr, cb, cbdata)
                    : PMIX_ERR_INIT;
}

void PMIx_Value_destruct (pmix_value_t *val)
{
    if (ready ())
        real.PMIx_Value_destruct (val);
}

pmix_status_t PMIx_Value_xfer (pmix_value_t *dest, const pmix_value_t *src)
{
    return ready () ? real.PMIx_Value_xfer (dest, src) : PMIX_ERR_INIT;
}

pmix_status_t PMIx_generate_ppn (const char *input, char **ppn)
{
    return ready () ? real.PMIx_generate_ppn (input, ppn) : PMIX_ERR_INIT;
}

pmix_status_t PMIx_generate_regex (const char *input, char **regex)
{
    return ready () ? real.PMIx_generate_regex (input, regex) : PMIX_ERR_INIT;
}

void PMIx_server_deregister_client (const pmix_proc_t *proc,
                                    pmix_op_cbfunc_t cb,
                                    void *cbdata)
{
    if (ready ())
        real.PMIx_server_deregister_client (proc, cb, cbdata);
}

void PMIx_server_deregister_nspace (const pmix_nspace_t nspace,
                                    pmix_op_cbfunc_t cb,
                                    void *cbdata)
{
    if (ready ())
        real.PMIx_server_deregister_nspace (nspace, cb, cbdata);
}

pmix_status_t PMIx_server_dmodex_request (const pmix_proc_t *proc,
                                          pmix_dmodex_response_fn_t cbfunc,
                                          void *cbdata)
{
    return ready () ? real.PMIx_server_dmodex_request (proc, cbfunc, cbdata)
                    : PMIX_ERR_INIT;
}

pmix_status_t PMIx_server_finalize (void)
{
    return ready () ? real.PMIx_server_finalize () : PMIX_ERR_INIT;
}

pmix_status_t
PMIx_server_init (pmix_server_module_t *module, pmix_info_t info[], size_t ninfo)
{
    return ready () ? real.PMIx_server_init (module, info, ninfo) : PMIX_ERR_INIT;
}

pmix_status_t PMIx_server_register_client (const pmix_proc_t *proc,
                                           uid_t uid,
                                           gid_t gid,
                                           void *server_object,
                                           pmix_op_cbfunc_t cb,
                                           void *cbdata)
{
    return ready () ? real.PMIx_server_register_client (
                          proc, uid, gid, server_object, cb, cbdata)
                    : PMIX_ERR_INIT;
}

pmix_status_t PMIx_server_register_nspace (const pmix_nspace_t nspace,
                                           int nlocalprocs,
                                           pmix_info_t info[],
                                           size_t ninfo,
                                           pmix_op_cbfunc_t cb,
                                           void *cbdata)
{
    return ready () ? real.PMIx_server_register_nspace (
                          nspace, nlocalprocs, info, ninfo, cb, cbdata)
                    : PMIX_ERR_INIT;
}

pmix_status_t PMIx_server_setup_fork (const pmix_proc_t *proc, char ***env)
{
    return ready () ? real.PMIx_server_setup_fork (proc, env) : PMIX_ERR_INIT;
}
