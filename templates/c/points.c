/* The C runtime of points variants (points = true), after runtime.c.

   Cut into named sections, each opened by a marker comment

       /*@ NAME [defines NAME...] [requires NAME...] *\/

   A generated C file carries a section only when it names what the section defines
   (NAME itself when NAME is a C identifier, and every name after `defines`), closed
   over `requires`, in the order of these files (difgen/targets/c/runtime.py). A
   hyphenated NAME is a comment shared by the sections that require it. Nothing
   before the first marker (this comment) is copied. */

/*@ points-variants */
/* Points variants (points = true): argument checks with a leading axis of points. */

/*@ dg_points requires points-variants module-prologue dg_convert */
/* A per-point argument as a C-contiguous float64 array of `count` points of one
   point's shape `dims` (any number when count < 0), a new reference: as it is
   on the fast path (copied to C order if it is not), else through the module's
   _as_points (dg_convert), which converts it or raises exactly as the Python
   variant does. */
static PyArrayObject *
dg_points(PyObject *obj, const char *name, int nd, const npy_intp *dims, npy_intp count)
{
    if (PyArray_CheckExact(obj)) {
        PyArrayObject *a = (PyArrayObject *)obj;
        int fast = PyArray_TYPE(a) == NPY_DOUBLE && PyArray_ISNOTSWAPPED(a) &&
                   PyArray_NDIM(a) == nd + 1 && (count < 0 || PyArray_DIM(a, 0) == count);
        for (int i = 0; fast && i < nd; i++) fast = PyArray_DIM(a, i + 1) == dims[i];
        if (fast) {
            return (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 0, 0,
                                                     NPY_ARRAY_IN_ARRAY);
        }
    }
    PyObject *as_points =
        dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, "_as_points");
    return dg_convert(as_points, name, obj, nd, dims, count);
}

/*@ dg_int_points requires points-variants dg_ints */
/* A per-point int64 argument read as doubles (difgen/targets/c/ints.py): `count`
   points of one point's shape `dims` (any number when count < 0) as a new
   reference to a C-contiguous float64 array. An exact int64 array of that shape
   as it is; anything else through the module's _points_count (its errors name
   `like`, the argument that set the number of points) and _as_ints, as the
   Python variant checks it; then cast as astype(np.float64) casts. */
static PyArrayObject *
dg_int_points(PyObject *obj, const char *name, int nd, const npy_intp *dims,
              npy_intp count, const char *like)
{
    if (PyArray_CheckExact(obj)) {
        PyArrayObject *a = (PyArrayObject *)obj;
        int fast = PyArray_TYPE(a) == NPY_INT64 && PyArray_NDIM(a) == nd + 1 &&
                   (count < 0 || PyArray_DIM(a, 0) == count);
        for (int i = 0; fast && i < nd; i++) fast = PyArray_DIM(a, i + 1) == dims[i];
        if (fast) {
            Py_INCREF(obj);
            return dg_int_doubles(obj);
        }
    }
    PyObject *counter =
        dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, "_points_count");
    PyObject *fn = dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, "_as_ints");
    if (counter == NULL || fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "difgen extension used before _bind");
        return NULL;
    }
    PyObject *shape = dg_shape(nd, dims);
    if (shape == NULL) return NULL;
    PyObject *n = count < 0
        ? PyObject_CallFunction(counter, "sOOOO", name, obj, shape, Py_None, Py_None)
        : PyObject_CallFunction(counter, "sOOns", name, obj, shape, (Py_ssize_t)count,
                                like);
    Py_DECREF(shape);
    if (n == NULL) return NULL;
    Py_ssize_t points = PyLong_AsSsize_t(n);
    Py_DECREF(n);
    if (points == -1 && PyErr_Occurred()) return NULL;
    PyObject *full = PyTuple_New(nd + 1);
    if (full == NULL) return NULL;
    PyObject *first = PyLong_FromSsize_t(points);
    if (first == NULL) {
        Py_DECREF(full);
        return NULL;
    }
    PyTuple_SET_ITEM(full, 0, first);
    for (int i = 0; i < nd; i++) {
        PyObject *d = PyLong_FromSsize_t((Py_ssize_t)dims[i]);
        if (d == NULL) {
            Py_DECREF(full);
            return NULL;
        }
        PyTuple_SET_ITEM(full, i + 1, d);
    }
    PyObject *checked = PyObject_CallFunction(fn, "sOO", name, obj, full);
    Py_DECREF(full);
    if (checked == NULL) return NULL;
    return dg_int_doubles(checked);
}

/*@ dg_points_out requires points-variants module-prologue */
/* A points variant's out=: checked by the module's _points_out (one array, or a
   tuple of one per result, each a writeable C-contiguous float64 array of its
   result's shape sharing no memory with an argument or another of them; the
   errors name the operator and out, as the Python variant's do), then taken as
   the results: res[r] a new reference to result r's array, data[r] its first
   double. `shapes` (the results' shapes) and `args` ((name, argument) pairs)
   are new references, released here; NULL when building them failed. */
static int
dg_points_out(PyObject *out, const char *name, int nres, PyObject *shapes,
              PyObject *args, PyObject **res, double **data)
{
    int status = -1;
    PyObject *fn =
        dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, "_points_out");
    if (shapes == NULL || args == NULL) goto done;
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "difgen extension used before _bind");
        goto done;
    }
    PyObject *checked = PyObject_CallFunction(fn, "sOOO", name, out, shapes, args);
    if (checked == NULL) goto done;
    Py_DECREF(checked);
    for (int r = 0; r < nres; r++) {
        PyObject *a = nres == 1 ? out : PyTuple_GET_ITEM(out, r);
        Py_INCREF(a);
        res[r] = a;
        data[r] = (double *)PyArray_DATA((PyArrayObject *)a);
    }
    status = 0;
done:
    Py_XDECREF(shapes);
    Py_XDECREF(args);
    return status;
}

/*@ dg_run_blocks defines dg_block dg_threads requires points-variants */
/* The points loop on all cores: contiguous blocks of at least DG_THREAD_POINTS
   points (starting and joining a thread costs tens of microseconds), on
   $DIFGEN_THREADS threads if set (a positive integer; anything else is one),
   else on the online processors (os.cpu_count()), at most DG_MAX_THREADS. A
   points variant runs its body on a block through a function of one dg_block;
   each block's thread writes only its own rows, with its own workspace, so the
   results are those of one thread bit for bit. One thread on Windows. */
#include <stdlib.h>
#if !defined(_WIN32)
#include <pthread.h>
#include <unistd.h>
#define DG_HAVE_THREADS 1
#endif
#define DG_THREAD_POINTS 4096
#define DG_MAX_THREADS 16

typedef struct {
    const void *call; /* the call's arguments and results */
    npy_intp start, stop;
    int failed; /* set by a block that could not take its workspace */
} dg_block;

/* How many threads k points take; read with the GIL held, at each call. */
static int
dg_threads(npy_intp k)
{
    long n = 1;
#ifdef DG_HAVE_THREADS
    const char *env = getenv("DIFGEN_THREADS");
    n = (env != NULL && *env != '\0') ? strtol(env, NULL, 10)
                                      : sysconf(_SC_NPROCESSORS_ONLN);
    if (n > DG_MAX_THREADS) n = DG_MAX_THREADS;
    if (n > k / DG_THREAD_POINTS) n = (long)(k / DG_THREAD_POINTS);
#endif
    (void)k;
    return n < 1 ? 1 : (int)n;
}

/* Runs work on n contiguous blocks of the k points (their lengths differ by at
   most one), the first in this thread, as does a block whose thread cannot
   start; nonzero if any block failed. Called without the GIL for many points. */
static int
dg_run_blocks(void *(*work)(void *), const void *call, npy_intp k, int n)
{
    dg_block b[DG_MAX_THREADS];
    int failed = 0;
    for (int t = 0; t < n; t++) {
        b[t].call = call;
        b[t].start = k / n * t + (t < k % n ? t : k % n);
        b[t].stop = b[t].start + k / n + (t < k % n ? 1 : 0);
        b[t].failed = 0;
    }
#ifdef DG_HAVE_THREADS
    pthread_t th[DG_MAX_THREADS];
    int started[DG_MAX_THREADS] = {0};
    for (int t = 1; t < n; t++) started[t] = pthread_create(&th[t], NULL, work, &b[t]) == 0;
    work(&b[0]);
    for (int t = 1; t < n; t++) {
        if (started[t]) pthread_join(th[t], NULL);
        else work(&b[t]);
    }
#else
    for (int t = 0; t < n; t++) work(&b[t]);
#endif
    for (int t = 0; t < n; t++) failed |= b[t].failed;
    return failed;
}

/*@ dg_release */
/* Drop the references held in `items` (NULL slots skipped). */
static void
dg_release(int n, PyObject **items)
{
    for (int i = 0; i < n; i++) {
        Py_XDECREF(items[i]);
        items[i] = NULL;
    }
}
