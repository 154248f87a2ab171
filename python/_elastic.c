/* _elastic.c - elastic._elastic, the CPython extension under `import elastic`
 *
 * A thin layer over libelastic's C API (include/elastic.h): one Python type,
 * _elastic.Manager, whose methods call the elastic_* functions with the
 * buffers of the objects they are given -- the library reads and writes the
 * ndarrays' own memory, nothing is copied -- and C trampolines that run the
 * Python handler, placement hooks and event callback from inside library
 * calls.  The Python API (keyword arguments, dtypes, pickled blobs, mpi4py
 * communicators, exception classes) is elastic/__init__.py; this file only
 * checks what C needs and turns every ELASTIC_ERR_* into the exception the
 * Python side's error factory makes, with libelastic's own message.
 *
 * Buffers.  Each registered array, value and blob keeps a Py_buffer on the
 * object that holds its memory (view.obj), released when it is replaced
 * (placement hook, array_restore, a blob update) or at destroy: the memory
 * libelastic points to stays alive and, for an ndarray, cannot be resized.
 *
 * The GIL is released around every library call that communicates; the
 * trampolines take it back (PyGILState_Ensure).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include <elastic.h>

enum { REG_VALUE, REG_ARRAY, REG_BLOB };

typedef struct mgr Mgr;

/* One registered array, value or blob. */
struct reg {
    struct reg *next;
    Mgr *owner;
    char *name;
    int kind;
    Py_buffer view; /* the memory libelastic uses (view.obj owns it) */
    int have_view;
    size_t elem_size; /* arrays: bytes per element */
    PyObject *place;  /* arrays: place(new_count) -> an object with a buffer */
};

/* A handler with its arguments, and what its last call returned. */
struct call {
    Mgr *owner;
    PyObject *fn, *args, *kwargs;
    PyObject *result;
};

struct mgr {
    PyObject_HEAD elastic_manager_t *m;
    int destroyed;
    int busy;       /* inside start, maybe_*, destroy */
    int in_handler; /* inside the Python handler */
    struct reg *regs;
    struct call start;    /* the handler of start (recoveries inside library calls) */
    PyObject *after;      /* called after every successful handler (or None) */
    PyObject *event_cb;   /* event_cb(json_text) (or NULL) */
    PyObject *cb_error;   /* the last exception a handler or hook raised */
    const char *cb_where; /* ... and where */
};

/* Run stmt with the GIL released (a library call that may communicate). */
#define UNLOCKED(stmt)                                                                   \
    do {                                                                                 \
        PyThreadState *ts_ = PyEval_SaveThread ();                                       \
        stmt;                                                                            \
        PyEval_RestoreThread (ts_);                                                      \
    } while (0)

static PyObject *error_factory; /* factory(code, text) -> an elastic.Error */

/* Raise the elastic.Error for code with text (the cause, if any, chained
 * as __cause__).  Returns NULL. */
static PyObject *raise_code (int code, const char *text, PyObject *cause)
{
    PyObject *exc;

    if (!error_factory) {
        PyErr_Format (
            PyExc_RuntimeError, "elastic: %s (%s)", text, elastic_strerror (code));
        return NULL;
    }
    if (!(exc = PyObject_CallFunction (error_factory, "is", code, text)))
        return NULL;
    if (cause) {
        Py_INCREF (cause);
        PyException_SetCause (exc, cause);
    }
    PyErr_SetObject ((PyObject *)Py_TYPE (exc), exc);
    Py_DECREF (exc);
    return NULL;
}

/* Raise for a failed library call: err's text, or the code's name. */
static PyObject *raise_err (Mgr *self, int code, const elastic_error_t *err)
{
    const char *text = err && err->text[0] ? err->text : elastic_strerror (code);
    PyObject *cause = self ? self->cb_error : NULL;
    PyObject *r;

    Py_XINCREF (cause);
    if (self)
        Py_CLEAR (self->cb_error);
    r = raise_code (code, text, cause);
    Py_XDECREF (cause);
    return r;
}

/* A callback raised (the GIL is held, the exception set): keep it as the
 * cause of the error the library may end with, and say so on stderr (the
 * library retries a handler). */
static void callback_failed (Mgr *self, const char *where)
{
    PyObject *type, *value, *tb, *s;
    int rank = -1;

    PyErr_Fetch (&type, &value, &tb);
    PyErr_NormalizeException (&type, &value, &tb);
    if (tb && value)
        PyException_SetTraceback (value, tb);
    s = value ? PyObject_Str (value) : NULL;
    MPI_Comm_rank (MPI_COMM_WORLD, &rank);
    fprintf (stderr,
             "elastic: rank %d: the %s raised %s: %s\n",
             rank,
             where,
             type ? ((PyTypeObject *)type)->tp_name : "an exception",
             s && PyUnicode_Check (s) ? PyUnicode_AsUTF8 (s) : "?");
    fflush (stderr);
    if (!s)
        PyErr_Clear ();
    Py_XDECREF (s);
    Py_XSETREF (self->cb_error, value);
    self->cb_where = where;
    Py_XDECREF (type);
    Py_XDECREF (tb);
}

static int check_live (Mgr *self)
{
    if (!self->m) {
        raise_code (ELASTIC_ERR_STATE,
                    self->destroyed ? "the manager was destroyed (destroy() or the end "
                                      "of its with block): create a new one"
                                    : "the manager was not created",
                    NULL);
        return -1;
    }
    return 0;
}

/* start, maybe_* and destroy may not run inside one of them (from a
 * handler, a hook or an event callback). */
static int check_idle (Mgr *self, const char *what)
{
    char text[200];

    if (check_live (self) < 0)
        return -1;
    if (self->busy) {
        snprintf (text,
                  sizeof (text),
                  "%s inside %s is invalid (expected it outside the handler, the "
                  "placement hooks and the event callback)",
                  what,
                  self->in_handler ? "the elastic handler" : "another manager call");
        raise_code (ELASTIC_ERR_STATE, text, NULL);
        return -1;
    }
    return 0;
}

static struct reg *find_reg (Mgr *self, const char *name, int kind)
{
    for (struct reg *r = self->regs; r; r = r->next)
        if (r->kind == kind && !strcmp (r->name, name))
            return r;
    return NULL;
}

static void reg_set_view (struct reg *r, Py_buffer *v)
{
    if (r->have_view)
        PyBuffer_Release (&r->view);
    r->view = *v;
    r->have_view = 1;
}

static void free_regs (Mgr *self)
{
    struct reg *r = self->regs, *next;

    for (; r; r = next) {
        next = r->next;
        if (r->have_view)
            PyBuffer_Release (&r->view);
        Py_XDECREF (r->place);
        PyMem_Free (r->name);
        PyMem_Free (r);
    }
    self->regs = NULL;
}

static struct reg *new_reg (Mgr *self, const char *name, int kind)
{
    struct reg *r = PyMem_Calloc (1, sizeof (*r));

    if (!r || !(r->name = PyMem_Malloc (strlen (name) + 1))) {
        PyMem_Free (r);
        PyErr_NoMemory ();
        return NULL;
    }
    strcpy (r->name, name);
    r->kind = kind;
    r->owner = self;
    r->next = self->regs;
    self->regs = r;
    return r;
}

static void call_clear (struct call *c)
{
    Py_CLEAR (c->fn);
    Py_CLEAR (c->args);
    Py_CLEAR (c->kwargs);
    Py_CLEAR (c->result);
}

/* Take handler, args, kwargs into c (None handler: none).  Returns -1 with
 * TypeError. */
static int
call_set (struct call *c, Mgr *self, PyObject *fn, PyObject *args, PyObject *kw)
{
    if (fn != Py_None && !PyCallable_Check (fn)) {
        PyErr_Format (PyExc_TypeError,
                      "elastic: the handler must be callable (got %s)",
                      Py_TYPE (fn)->tp_name);
        return -1;
    }
    if (!PyTuple_Check (args) || (kw != Py_None && !PyDict_Check (kw))) {
        PyErr_SetString (PyExc_TypeError,
                         "elastic: handler arguments: a tuple and a dict");
        return -1;
    }
    call_clear (c);
    c->owner = self;
    if (fn != Py_None) {
        Py_INCREF (fn);
        c->fn = fn;
    }
    Py_INCREF (args);
    c->args = args;
    if (kw != Py_None) {
        Py_INCREF (kw);
        c->kwargs = kw;
    }
    return 0;
}

/* ---- trampolines: called by libelastic, the GIL released ---- */

static int handler_tramp (elastic_manager_t *m, MPI_Comm comm, void *arg)
{
    struct call *c = arg;
    Mgr *self = c->owner;
    PyGILState_STATE g = PyGILState_Ensure ();
    PyObject *r;
    int rc = 0;

    (void)m;
    (void)comm;
    self->in_handler++;
    r = PyObject_Call (c->fn, c->args, c->kwargs);
    if (r && self->after && self->after != Py_None) {
        PyObject *t = PyObject_CallNoArgs (self->after);
        if (!t)
            Py_CLEAR (r);
        Py_XDECREF (t);
    }
    self->in_handler--;
    if (!r) {
        callback_failed (self, "elastic handler");
        rc = 1;
    } else {
        Py_XSETREF (c->result, r);
        Py_CLEAR (self->cb_error);
    }
    PyGILState_Release (g);
    return rc;
}

static void *place_tramp (void *data, uint64_t count, uint64_t new_count, void *arg)
{
    struct reg *r = arg;
    PyGILState_STATE g = PyGILState_Ensure ();
    PyObject *o;
    Py_buffer v;
    void *p = NULL;

    (void)data;
    (void)count;
    if (!(o = PyObject_CallFunction (r->place, "K", (unsigned long long)new_count)))
        goto fail;
    if (PyObject_GetBuffer (o, &v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        goto fail;
    if ((uint64_t)v.len != new_count * r->elem_size) {
        PyErr_Format (PyExc_ValueError,
                      "array '%s': the placement hook gave %zd bytes (expected %llu "
                      "elements of %zu bytes)",
                      r->name,
                      v.len,
                      (unsigned long long)new_count,
                      r->elem_size);
        PyBuffer_Release (&v);
        goto fail;
    }
    reg_set_view (r, &v);
    /* a 0-element block may have no memory: any non-NULL pointer will do */
    p = v.buf ? v.buf : (void *)r;
    Py_DECREF (o);
    PyGILState_Release (g);
    return p;
fail:
    Py_XDECREF (o);
    callback_failed (r->owner, "placement hook");
    PyGILState_Release (g);
    return NULL;
}

static void event_tramp (const char *json, void *arg)
{
    Mgr *self = arg;
    PyGILState_STATE g = PyGILState_Ensure ();
    PyObject *r;

    if (self->event_cb) {
        if (!(r = PyObject_CallFunction (self->event_cb, "s", json)))
            PyErr_WriteUnraisable (self->event_cb);
        Py_XDECREF (r);
    }
    PyGILState_Release (g);
}

/* ---- the Manager type ---- */

/* A config dict (keys: elastic_config_t field names) into cfg.  String
 * values stay owned by the dict. */
static int config_from_dict (PyObject *d, elastic_config_t *cfg)
{
    static const struct {
        const char *name;
        size_t off;
        char kind; /* i int, L int64, s string */
    } fields[] = {
        {"snapshot_period", offsetof (elastic_config_t, snapshot_period), 'i'},
        {"snapshot_buffer_size", offsetof (elastic_config_t, snapshot_buffer_size), 'i'},
        {"persist_period", offsetof (elastic_config_t, persist_period), 'i'},
        {"reshard_check_period", offsetof (elastic_config_t, reshard_check_period), 'i'},
        {"max_elastic_down_event_count",
         offsetof (elastic_config_t, max_elastic_down_event_count),
         'i'},
        {"max_reshard_retry_count",
         offsetof (elastic_config_t, max_reshard_retry_count),
         'i'},
        {"min_world_size", offsetof (elastic_config_t, min_world_size), 'i'},
        {"spare_ranks", offsetof (elastic_config_t, spare_ranks), 'i'},
        {"spare_takeover", offsetof (elastic_config_t, spare_takeover), 'i'},
        {"snapshot_dir", offsetof (elastic_config_t, snapshot_dir), 's'},
        {"event_log", offsetof (elastic_config_t, event_log), 's'},
        {"run_id", offsetof (elastic_config_t, run_id), 's'},
        {"snapshot_keep", offsetof (elastic_config_t, snapshot_keep), 'i'},
        {"resume", offsetof (elastic_config_t, resume), 'i'},
        {"resume_fresh_ok", offsetof (elastic_config_t, resume_fresh_ok), 'i'},
        {"resume_from", offsetof (elastic_config_t, resume_from), 's'},
        {"signals", offsetof (elastic_config_t, signals), 's'},
        {"signal_check_period", offsetof (elastic_config_t, signal_check_period), 'i'},
        {"deadline", offsetof (elastic_config_t, deadline), 'L'},
        {"deadline_margin", offsetof (elastic_config_t, deadline_margin), 'i'},
    };
    PyObject *key, *val;
    Py_ssize_t pos = 0;

    while (PyDict_Next (d, &pos, &key, &val)) {
        const char *k = PyUnicode_Check (key) ? PyUnicode_AsUTF8 (key) : NULL;
        size_t i, n = sizeof (fields) / sizeof (fields[0]);
        char *p = (char *)cfg;

        if (!k)
            return PyErr_Format (PyExc_TypeError, "elastic: config keys are strings"), -1;
        for (i = 0; i < n && strcmp (fields[i].name, k); i++)
            ;
        if (i == n)
            return PyErr_Format (
                       PyExc_TypeError, "elastic: unknown config field '%s'", k),
                   -1;
        if (val == Py_None)
            continue;
        if (fields[i].kind == 's') {
            const char *s = PyUnicode_Check (val) ? PyUnicode_AsUTF8 (val) : NULL;
            if (!s)
                return PyErr_Format (PyExc_TypeError, "elastic: %s: expected a str", k),
                       -1;
            *(const char **)(p + fields[i].off) = s;
        } else {
            long long v = PyLong_AsLongLong (val);
            if (v == -1 && PyErr_Occurred ())
                return -1;
            if (fields[i].kind == 'i') {
                if (v < INT_MIN || v > INT_MAX) {
                    char text[160];
                    snprintf (text,
                              sizeof (text),
                              "%s: %lld is invalid (expected an int of 32 bits)",
                              k,
                              v);
                    raise_code (ELASTIC_ERR_INVAL, text, NULL);
                    return -1;
                }
                *(int *)(p + fields[i].off) = (int)v;
            } else
                *(int64_t *)(p + fields[i].off) = (int64_t)v;
        }
    }
    return 0;
}

static int Mgr_init (Mgr *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"comm", "config", NULL};
    long long fcomm;
    PyObject *config;
    elastic_config_t cfg;
    elastic_error_t err = {{0}};
    elastic_manager_t *m = NULL;
    MPI_Comm comm;
    int init = 0, fin = 0, rc;

    if (!PyArg_ParseTupleAndKeywords (
            args, kw, "LO!", kwlist, &fcomm, &PyDict_Type, &config))
        return -1;
    if (self->m || self->destroyed) {
        raise_code (ELASTIC_ERR_STATE, "the manager is already created", NULL);
        return -1;
    }
    MPI_Initialized (&init);
    MPI_Finalized (&fin);
    if (!init || fin) {
        raise_code (ELASTIC_ERR_STATE,
                    fin ? "MPI is finalized"
                        : "MPI is not initialized (import mpi4py.MPI)",
                    NULL);
        return -1;
    }
    comm = MPI_Comm_f2c ((MPI_Fint)fcomm);
    if (comm == MPI_COMM_NULL) {
        raise_code (ELASTIC_ERR_INVAL,
                    "comm: MPI.COMM_NULL is invalid (expected an intracommunicator)",
                    NULL);
        return -1;
    }
    elastic_config_init (&cfg);
    if (config_from_dict (config, &cfg) < 0)
        return -1;
    UNLOCKED (rc = elastic_manager_create (comm, &cfg, &m, &err));
    if (rc != ELASTIC_OK) {
        raise_err (NULL, rc, &err);
        return -1;
    }
    self->m = m;
    return 0;
}

static PyObject *Mgr_destroy (Mgr *self, PyObject *unused)
{
    elastic_manager_t *m = self->m;

    (void)unused;
    if (!m)
        Py_RETURN_NONE; /* twice is fine */
    if (check_idle (self, "destroy") < 0)
        return NULL;
    self->busy = 1;
    UNLOCKED (elastic_manager_destroy (m));
    self->busy = 0;
    self->m = NULL;
    self->destroyed = 1;
    free_regs (self);
    call_clear (&self->start);
    Py_CLEAR (self->after);
    Py_CLEAR (self->event_cb);
    Py_CLEAR (self->cb_error);
    Py_RETURN_NONE;
}

static void Mgr_dealloc (Mgr *self)
{
    /* destroy is collective: never from the garbage collector.  A manager
     * never destroyed stays allocated (its memory is what libelastic points
     * to), only the Python references go. */
    if (self->m) {
        for (struct reg *r = self->regs; r; r = r->next)
            if (r->have_view)
                Py_XINCREF (r->view.obj); /* keep the memory libelastic holds */
        elastic_manager_set_event_callback (self->m, NULL, NULL);
    }
    free_regs (self);
    call_clear (&self->start);
    Py_CLEAR (self->after);
    Py_CLEAR (self->event_cb);
    Py_CLEAR (self->cb_error);
    Py_TYPE (self)->tp_free ((PyObject *)self);
}

static PyObject *finish (Mgr *self, int rc, elastic_error_t *err)
{
    if (rc != ELASTIC_OK && rc != ELASTIC_SUSPENDED)
        return raise_err (self, rc, err);
    return PyLong_FromLong (rc);
}

/* register_value(name, buffer, type) */
static PyObject *Mgr_register_value (Mgr *self, PyObject *args)
{
    const char *name;
    PyObject *obj;
    int type, rc;
    Py_buffer v;
    elastic_error_t err = {{0}};
    struct reg *r;

    if (!PyArg_ParseTuple (args, "sOi", &name, &obj, &type) || check_live (self) < 0)
        return NULL;
    if (PyObject_GetBuffer (obj, &v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if ((rc = elastic_register_value (self->m, name, v.buf, (size_t)v.len, &err)) !=
        ELASTIC_OK) {
        PyBuffer_Release (&v);
        return raise_err (self, rc, &err);
    }
    if (!(r = new_reg (self, name, REG_VALUE))) {
        PyBuffer_Release (&v);
        return NULL;
    }
    reg_set_view (r, &v);
    if ((rc = elastic_set_type (self->m, name, type, &err)) != ELASTIC_OK)
        return raise_err (self, rc, &err);
    Py_RETURN_NONE;
}

/* register_array(name, buffer, elem_size, type, place) */
static PyObject *Mgr_register_array (Mgr *self, PyObject *args)
{
    const char *name;
    PyObject *obj, *place;
    Py_ssize_t elem_size;
    int type, rc;
    Py_buffer v;
    elastic_error_t err = {{0}};
    struct reg *r;
    uint64_t count;

    if (!PyArg_ParseTuple (args, "sOniO", &name, &obj, &elem_size, &type, &place) ||
        check_live (self) < 0)
        return NULL;
    if (elem_size <= 0 || !PyCallable_Check (place)) {
        PyErr_SetString (PyExc_ValueError, "elastic: elem_size > 0 and a callable place");
        return NULL;
    }
    if (PyObject_GetBuffer (obj, &v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (v.len % elem_size) {
        PyBuffer_Release (&v);
        return PyErr_Format (PyExc_ValueError,
                             "elastic: array '%s': %zd bytes is not a whole number of "
                             "%zd-byte elements",
                             name,
                             v.len,
                             elem_size);
    }
    count = (uint64_t)(v.len / elem_size);
    if ((rc = elastic_register_array (
             self->m, name, count ? v.buf : NULL, (size_t)elem_size, count, &err)) !=
        ELASTIC_OK) {
        PyBuffer_Release (&v);
        return raise_err (self, rc, &err);
    }
    if (!(r = new_reg (self, name, REG_ARRAY))) {
        PyBuffer_Release (&v);
        return NULL;
    }
    reg_set_view (r, &v);
    r->elem_size = (size_t)elem_size;
    Py_INCREF (place);
    r->place = place;
    if ((rc = elastic_set_type (self->m, name, type, &err)) != ELASTIC_OK ||
        (rc = elastic_array_set_realloc (self->m, name, place_tramp, r, &err)) !=
            ELASTIC_OK)
        return raise_err (self, rc, &err);
    Py_RETURN_NONE;
}

/* register_blob(name, buffer): register, or update the data of, a blob */
static PyObject *Mgr_register_blob (Mgr *self, PyObject *args)
{
    const char *name;
    PyObject *obj;
    Py_buffer v;
    elastic_error_t err = {{0}};
    struct reg *r;
    int rc;

    if (!PyArg_ParseTuple (args, "sO", &name, &obj) || check_live (self) < 0)
        return NULL;
    if (PyObject_GetBuffer (obj, &v, PyBUF_SIMPLE) < 0)
        return NULL;
    if ((rc = elastic_register_blob (self->m, name, v.buf, (size_t)v.len, &err)) !=
        ELASTIC_OK) {
        PyBuffer_Release (&v);
        return raise_err (self, rc, &err);
    }
    if (!(r = find_reg (self, name, REG_BLOB)) && !(r = new_reg (self, name, REG_BLOB))) {
        PyBuffer_Release (&v);
        return NULL;
    }
    reg_set_view (r, &v); /* the previous data is no longer referenced */
    Py_RETURN_NONE;
}

/* set_event_callback(cb or None): cb(json_text) for every event line */
static PyObject *Mgr_set_event_callback (Mgr *self, PyObject *cb)
{
    if (check_live (self) < 0)
        return NULL;
    if (cb != Py_None && !PyCallable_Check (cb))
        return PyErr_Format (PyExc_TypeError,
                             "elastic: the event callback must be callable (got %s)",
                             Py_TYPE (cb)->tp_name);
    if (cb == Py_None) {
        elastic_manager_set_event_callback (self->m, NULL, NULL);
        Py_CLEAR (self->event_cb);
    } else {
        Py_INCREF (cb);
        Py_XSETREF (self->event_cb, cb);
        elastic_manager_set_event_callback (self->m, event_tramp, self);
    }
    Py_RETURN_NONE;
}

/* set_after_handler(fn or None): fn() after every successful handler call */
static PyObject *Mgr_set_after_handler (Mgr *self, PyObject *fn)
{
    Py_INCREF (fn);
    Py_XSETREF (self->after, fn);
    Py_RETURN_NONE;
}

/* start(handler, args, kwargs) -> active (bool) */
static PyObject *Mgr_start (Mgr *self, PyObject *args)
{
    PyObject *fn, *hargs, *hkw;
    elastic_error_t err = {{0}};
    int rc, active = 0;

    if (!PyArg_ParseTuple (args, "OOO", &fn, &hargs, &hkw) ||
        check_idle (self, "start") < 0 ||
        call_set (&self->start, self, fn, hargs, hkw) < 0)
        return NULL;
    Py_CLEAR (self->cb_error);
    self->busy = 1;
    UNLOCKED (
        rc = elastic_manager_start (
            self->m, self->start.fn ? handler_tramp : NULL, &self->start, &active, &err));
    self->busy = 0;
    if (rc != ELASTIC_OK)
        return raise_err (self, rc, &err);
    return PyBool_FromLong (active);
}

/* maybe_snapshot(step) -> 0 or SUSPENDED */
static PyObject *Mgr_maybe_snapshot (Mgr *self, PyObject *arg)
{
    long long step = PyLong_AsLongLong (arg);
    elastic_error_t err = {{0}};
    int rc;

    if ((step == -1 && PyErr_Occurred ()) || check_idle (self, "maybe_snapshot") < 0)
        return NULL;
    self->busy = 1;
    UNLOCKED (rc = elastic_maybe_snapshot (self->m, step, &err));
    self->busy = 0;
    return finish (self, rc, &err);
}

/* maybe_reshard_down(mpi_err, handler, args, kwargs) -> (rc, result): rc 0
 * (recovered, or nothing to do) or ERR_MPI (not an elastic event) */
static PyObject *Mgr_maybe_reshard_down (Mgr *self, PyObject *args)
{
    PyObject *fn, *hargs, *hkw, *res;
    struct call c = {0};
    elastic_error_t err = {{0}};
    int mpi_err, rc;

    if (!PyArg_ParseTuple (args, "iOOO", &mpi_err, &fn, &hargs, &hkw) ||
        check_idle (self, "maybe_reshard_down") < 0 ||
        call_set (&c, self, fn, hargs, hkw) < 0)
        return NULL;
    Py_CLEAR (self->cb_error);
    self->busy = 1;
    UNLOCKED (rc = elastic_maybe_reshard_down (
                  self->m, mpi_err, c.fn ? handler_tramp : NULL, &c, &err));
    self->busy = 0;
    if (rc != ELASTIC_OK && rc != ELASTIC_ERR_MPI) {
        call_clear (&c);
        return raise_err (self, rc, &err);
    }
    res = Py_BuildValue ("iO", rc, c.result ? c.result : Py_None);
    call_clear (&c);
    return res;
}

/* maybe_reshard_up(step, handler, args, kwargs) -> (resharded, result) */
static PyObject *Mgr_maybe_reshard_up (Mgr *self, PyObject *args)
{
    PyObject *fn, *hargs, *hkw, *res;
    struct call c = {0};
    elastic_error_t err = {{0}};
    long long step;
    int rc, resharded = 0;

    if (!PyArg_ParseTuple (args, "LOOO", &step, &fn, &hargs, &hkw) ||
        check_idle (self, "maybe_reshard_up") < 0 ||
        call_set (&c, self, fn, hargs, hkw) < 0)
        return NULL;
    Py_CLEAR (self->cb_error);
    self->busy = 1;
    UNLOCKED (rc = elastic_maybe_reshard_up (
                  self->m, step, c.fn ? handler_tramp : NULL, &c, &resharded, &err));
    self->busy = 0;
    if (rc != ELASTIC_OK && rc != ELASTIC_SUSPENDED) {
        call_clear (&c);
        return raise_err (self, rc, &err);
    }
    res = Py_BuildValue ("iiO", rc, resharded, c.result ? c.result : Py_None);
    call_clear (&c);
    return res;
}

/* comm() -> (fortran handle, address) of the working communicator, or None */
static PyObject *Mgr_comm (Mgr *self, PyObject *unused)
{
    MPI_Comm c;

    (void)unused;
    if (check_live (self) < 0)
        return NULL;
    if ((c = elastic_manager_comm (self->m)) == MPI_COMM_NULL)
        Py_RETURN_NONE;
    return Py_BuildValue ("iK", (int)MPI_Comm_c2f (c), (unsigned long long)(uintptr_t)c);
}

/* info() -> a tuple in elastic_info_t's order */
static PyObject *Mgr_info (Mgr *self, PyObject *unused)
{
    elastic_info_t i;

    (void)unused;
    if (check_live (self) < 0)
        return NULL;
    elastic_manager_info (self->m, &i);
    return Py_BuildValue ("iiiiiiiKLiLLiz",
                          i.rank,
                          i.size,
                          i.is_spare,
                          i.original_rank,
                          i.original_size,
                          i.idle_spares,
                          i.events,
                          (unsigned long long)i.generation,
                          (long long)i.snapshot_step,
                          i.old_size,
                          (long long)i.persist_step,
                          (long long)i.resumed_step,
                          i.resumed_size,
                          i.resumed_from);
}

static PyObject *not_found (const char *name)
{
    char text[200];

    snprintf (text, sizeof (text), "array '%s' is not registered", name);
    return raise_code (ELASTIC_ERR_NOT_FOUND, text, NULL);
}

/* array_block(name) -> (offset, count, global_count) */
static PyObject *Mgr_array_block (Mgr *self, PyObject *args)
{
    const char *name;
    uint64_t off = 0, count = 0, global = 0;

    if (!PyArg_ParseTuple (args, "s", &name) || check_live (self) < 0)
        return NULL;
    if (elastic_array_block (self->m, name, &off, &count, &global) != ELASTIC_OK)
        return not_found (name);
    return Py_BuildValue ("KKK",
                          (unsigned long long)off,
                          (unsigned long long)count,
                          (unsigned long long)global);
}

/* array_storage(name) -> the object whose memory holds the array now */
static PyObject *Mgr_array_storage (Mgr *self, PyObject *args)
{
    const char *name;
    struct reg *r;

    if (!PyArg_ParseTuple (args, "s", &name) || check_live (self) < 0)
        return NULL;
    if (!(r = find_reg (self, name, REG_ARRAY)))
        return not_found (name);
    Py_INCREF (r->view.obj);
    return r->view.obj;
}

/* array_restore(name, buffer): restore this rank's block into buffer,
 * which becomes the array's storage */
static PyObject *Mgr_array_restore (Mgr *self, PyObject *args)
{
    const char *name;
    PyObject *obj;
    Py_buffer v;
    elastic_error_t err = {{0}};
    struct reg *r;
    int rc;

    if (!PyArg_ParseTuple (args, "sO", &name, &obj) || check_live (self) < 0)
        return NULL;
    if (!(r = find_reg (self, name, REG_ARRAY)))
        return not_found (name);
    if (PyObject_GetBuffer (obj, &v, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (v.len % r->elem_size) {
        PyBuffer_Release (&v);
        return PyErr_Format (PyExc_ValueError,
                             "elastic: array '%s': %zd bytes is not a whole number of "
                             "%zu-byte elements",
                             name,
                             v.len,
                             r->elem_size);
    }
    UNLOCKED (rc = elastic_array_restore (self->m,
                                          name,
                                          v.len ? v.buf : (void *)r,
                                          (uint64_t)(v.len / r->elem_size),
                                          &err));
    if (rc != ELASTIC_OK) {
        PyBuffer_Release (&v);
        return raise_err (self, rc, &err);
    }
    if (r->have_view && r->view.obj == obj)
        PyBuffer_Release (&v);
    else
        reg_set_view (r, &v);
    Py_RETURN_NONE;
}

/* blob_fetch(name, old_ranks) -> [bytes] */
static PyObject *Mgr_blob_fetch (Mgr *self, PyObject *args)
{
    const char *name;
    PyObject *seq, *fast = NULL, *out = NULL;
    elastic_error_t err = {{0}};
    int n, rc, *ranks = NULL;
    void **bufs = NULL;
    size_t *sizes = NULL;

    if (!PyArg_ParseTuple (args, "sO", &name, &seq) || check_live (self) < 0)
        return NULL;
    if (!(fast = PySequence_Fast (seq, "elastic: old_ranks: expected a sequence of int")))
        return NULL;
    n = (int)PySequence_Fast_GET_SIZE (fast);
    ranks = PyMem_Calloc (n ? n : 1, sizeof (*ranks));
    bufs = PyMem_Calloc (n ? n : 1, sizeof (*bufs));
    sizes = PyMem_Calloc (n ? n : 1, sizeof (*sizes));
    if (!ranks || !bufs || !sizes) {
        PyErr_NoMemory ();
        goto out;
    }
    for (int i = 0; i < n; i++) {
        long v = PyLong_AsLong (PySequence_Fast_GET_ITEM (fast, i));
        if (v == -1 && PyErr_Occurred ())
            goto out;
        ranks[i] = (int)v;
    }
    UNLOCKED (rc = elastic_blob_fetch (self->m, name, n, ranks, bufs, sizes, &err));
    if (rc != ELASTIC_OK) {
        raise_err (self, rc, &err);
        goto out;
    }
    if (!(out = PyList_New (n)))
        goto out;
    for (int i = 0; i < n; i++) {
        PyObject *b = PyBytes_FromStringAndSize (bufs[i], (Py_ssize_t)sizes[i]);
        if (!b) {
            Py_CLEAR (out);
            goto out;
        }
        PyList_SET_ITEM (out, i, b);
    }
out:
    if (bufs)
        for (int i = 0; i < n; i++)
            free (bufs[i]);
    PyMem_Free (ranks);
    PyMem_Free (bufs);
    PyMem_Free (sizes);
    Py_XDECREF (fast);
    return out;
}

/* _address() -> the elastic_manager_t pointer, for calling libelastic
 * directly through ctypes on the same manager (bench/py_snapshot.py's
 * baseline); 0 once destroyed */
static PyObject *Mgr_address (Mgr *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromVoidPtr (self->m);
}

static PyObject *Mgr_get_destroyed (Mgr *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong (self->m == NULL);
}

static PyObject *Mgr_get_in_handler (Mgr *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong (self->in_handler > 0);
}

static PyMethodDef Mgr_methods[] = {
    {"destroy", (PyCFunction)Mgr_destroy, METH_NOARGS, "destroy() (collective)"},
    {"register_value", (PyCFunction)Mgr_register_value, METH_VARARGS, NULL},
    {"register_array", (PyCFunction)Mgr_register_array, METH_VARARGS, NULL},
    {"register_blob", (PyCFunction)Mgr_register_blob, METH_VARARGS, NULL},
    {"set_event_callback", (PyCFunction)Mgr_set_event_callback, METH_O, NULL},
    {"set_after_handler", (PyCFunction)Mgr_set_after_handler, METH_O, NULL},
    {"start", (PyCFunction)Mgr_start, METH_VARARGS, NULL},
    {"maybe_snapshot", (PyCFunction)Mgr_maybe_snapshot, METH_O, NULL},
    {"maybe_reshard_down", (PyCFunction)Mgr_maybe_reshard_down, METH_VARARGS, NULL},
    {"maybe_reshard_up", (PyCFunction)Mgr_maybe_reshard_up, METH_VARARGS, NULL},
    {"comm", (PyCFunction)Mgr_comm, METH_NOARGS, NULL},
    {"info", (PyCFunction)Mgr_info, METH_NOARGS, NULL},
    {"array_block", (PyCFunction)Mgr_array_block, METH_VARARGS, NULL},
    {"array_storage", (PyCFunction)Mgr_array_storage, METH_VARARGS, NULL},
    {"array_restore", (PyCFunction)Mgr_array_restore, METH_VARARGS, NULL},
    {"blob_fetch", (PyCFunction)Mgr_blob_fetch, METH_VARARGS, NULL},
    {"_address", (PyCFunction)Mgr_address, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef Mgr_getset[] = {
    {"destroyed", (getter)Mgr_get_destroyed, NULL, "True once destroyed", NULL},
    {"in_handler", (getter)Mgr_get_in_handler, NULL, "True inside the handler", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject MgrType = {
    PyVarObject_HEAD_INIT (NULL, 0).tp_name = "elastic._elastic.Manager",
    .tp_doc = "libelastic's manager (use elastic.Manager)",
    .tp_basicsize = sizeof (Mgr),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Mgr_init,
    .tp_dealloc = (destructor)Mgr_dealloc,
    .tp_methods = Mgr_methods,
    .tp_getset = Mgr_getset,
};

/* ---- module functions ---- */

static PyObject *mod_set_error_factory (PyObject *mod, PyObject *fn)
{
    (void)mod;
    Py_INCREF (fn);
    Py_XSETREF (error_factory, fn);
    Py_RETURN_NONE;
}

static PyObject *mod_version (PyObject *mod, PyObject *unused)
{
    int major, minor, patch;
    const char *v = elastic_version (&major, &minor, &patch);

    (void)mod;
    (void)unused;
    return Py_BuildValue ("siii", v, major, minor, patch);
}

static PyObject *mod_strerror (PyObject *mod, PyObject *arg)
{
    long code = PyLong_AsLong (arg);

    (void)mod;
    if (code == -1 && PyErr_Occurred ())
        return NULL;
    return PyUnicode_FromString (elastic_strerror ((int)code));
}

static PyObject *mod_exit_code (PyObject *mod, PyObject *arg)
{
    long rc = PyLong_AsLong (arg);

    (void)mod;
    if (rc == -1 && PyErr_Occurred ())
        return NULL;
    return PyLong_FromLong (elastic_exit_code ((int)rc));
}

static PyObject *mod_progress (PyObject *mod, PyObject *args)
{
    long long step;
    int snapshot = 0, rc;

    (void)mod;
    if (!PyArg_ParseTuple (args, "L|p", &step, &snapshot))
        return NULL;
    rc = snapshot ? elastic_progress_snapshot (step) : elastic_progress (step);
    if (rc != ELASTIC_OK)
        return raise_code (rc, "cannot write the heartbeat file", NULL);
    Py_RETURN_NONE;
}

static PyObject *mod_record_error (PyObject *mod, PyObject *arg)
{
    const char *text = PyUnicode_Check (arg) ? PyUnicode_AsUTF8 (arg) : NULL;
    int rc;

    (void)mod;
    if (!text)
        return PyErr_Format (PyExc_TypeError, "elastic.record_error: expected a str");
    if ((rc = elastic_record_error ("%s", text)) != ELASTIC_OK)
        return raise_code (rc, "cannot write the error file", NULL);
    Py_RETURN_NONE;
}

/* The file the process loaded libmpi from (the one this module calls). */
static PyObject *mod_libmpi (PyObject *mod, PyObject *unused)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;

    (void)mod;
    (void)unused;
    MPI_Get_library_version (v, &len);
    return PyUnicode_DecodeUTF8 (v, len, "replace");
}

static PyMethodDef mod_methods[] = {
    {"_set_error_factory", mod_set_error_factory, METH_O, NULL},
    {"version", mod_version, METH_NOARGS, "version() -> (text, major, minor, patch)"},
    {"strerror", mod_strerror, METH_O, "strerror(code) -> the code's name"},
    {"exit_code", mod_exit_code, METH_O, "exit_code(rc) -> the process exit code"},
    {"progress", mod_progress, METH_VARARGS, "progress(step[, snapshot])"},
    {"record_error", mod_record_error, METH_O, "record_error(text)"},
    {"mpi_library_version", mod_libmpi, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT,
    .m_name = "elastic._elastic",
    .m_doc = "libelastic, the C library under the elastic package",
    .m_size = -1,
    .m_methods = mod_methods,
};

PyMODINIT_FUNC PyInit__elastic (void)
{
    static const struct {
        const char *name;
        long value;
    } consts[] = {
        {"OK", ELASTIC_OK},
        {"ERR_INVAL", ELASTIC_ERR_INVAL},
        {"ERR_NOMEM", ELASTIC_ERR_NOMEM},
        {"ERR_MPI", ELASTIC_ERR_MPI},
        {"ERR_RELAUNCH", ELASTIC_ERR_RELAUNCH},
        {"ERR_NO_ULFM", ELASTIC_ERR_NO_ULFM},
        {"ERR_IO", ELASTIC_ERR_IO},
        {"ERR_CORRUPT", ELASTIC_ERR_CORRUPT},
        {"ERR_NO_SNAPSHOT", ELASTIC_ERR_NO_SNAPSHOT},
        {"ERR_EXISTS", ELASTIC_ERR_EXISTS},
        {"ERR_NOT_FOUND", ELASTIC_ERR_NOT_FOUND},
        {"ERR_STATE", ELASTIC_ERR_STATE},
        {"ERR_UNSUPPORTED", ELASTIC_ERR_UNSUPPORTED},
        {"ERR_PROC_FAILED", ELASTIC_ERR_PROC_FAILED},
        {"SUSPENDED", ELASTIC_SUSPENDED},
        {"EXIT_SUSPENDED", ELASTIC_EXIT_SUSPENDED},
        {"EXIT_RELAUNCH", ELASTIC_EXIT_RELAUNCH},
        {"TYPE_BYTES", ELASTIC_TYPE_BYTES},
        {"TYPE_INT32", ELASTIC_TYPE_INT32},
        {"TYPE_INT64", ELASTIC_TYPE_INT64},
        {"TYPE_UINT32", ELASTIC_TYPE_UINT32},
        {"TYPE_UINT64", ELASTIC_TYPE_UINT64},
        {"TYPE_FLOAT32", ELASTIC_TYPE_FLOAT32},
        {"TYPE_FLOAT64", ELASTIC_TYPE_FLOAT64},
        {"RESUME_AUTO", ELASTIC_RESUME_AUTO},
        {"RESUME_ALWAYS", ELASTIC_RESUME_ALWAYS},
        {"RESUME_NEVER", ELASTIC_RESUME_NEVER},
    };
    PyObject *mod;

    if (PyType_Ready (&MgrType) < 0 || !(mod = PyModule_Create (&moddef)))
        return NULL;
    Py_INCREF (&MgrType);
    if (PyModule_AddObject (mod, "Manager", (PyObject *)&MgrType) < 0)
        goto error;
    for (size_t i = 0; i < sizeof (consts) / sizeof (consts[0]); i++)
        if (PyModule_AddIntConstant (mod, consts[i].name, consts[i].value) < 0)
            goto error;
    return mod;
error:
    Py_DECREF (mod);
    return NULL;
}
