/* The C runtime of an emit = "c" extension: argument parsing and checks, result
   arrays, sparse results, and the helpers of difgen/floats.py with NumPy's semantics.

   Cut into named sections, each opened by a marker comment

       /*@ NAME [defines NAME...] [requires NAME...] *\/

   A generated C file carries a section only when its printers report using what the
   section defines (NAME itself when NAME is a C identifier, and every name after
   `defines`), closed over `requires`, in the order of these files
   (difgen/targets/c/runtime.py). A
   hyphenated NAME is a comment shared by the sections that require it. Nothing
   before the first marker (this comment) is copied. */

/*@ module-prologue defines dg_helpers dg_as_array_fn dg_as_scalar_fn dg_check_out_fn */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <math.h>
#include <string.h>

/* The Python module's own argument checks and result wrappers (bound by _bind). */
static PyObject *dg_helpers = NULL;
static PyObject *dg_as_array_fn = NULL, *dg_as_scalar_fn = NULL, *dg_check_out_fn = NULL;

/*@ numpy-semantics */
/* NumPy's semantics, as the helpers of difgen/floats.py give them to Python: in C
   the IEEE operations and libm already return NumPy's NaN and inf. */

/*@ _div requires numpy-semantics */
#define _div(a, b) ((a) / (b))
/*@ _pow requires numpy-semantics */
#define _pow(a, b) pow((a), (b))
/*@ _sin requires numpy-semantics */
#define _sin sin
/*@ _cos requires numpy-semantics */
#define _cos cos
/*@ _tan requires numpy-semantics */
#define _tan tan
/*@ _asin requires numpy-semantics */
#define _asin asin
/*@ _acos requires numpy-semantics */
#define _acos acos
/*@ _sinh requires numpy-semantics */
#define _sinh sinh
/*@ _cosh requires numpy-semantics */
#define _cosh cosh
/*@ _acosh requires numpy-semantics */
#define _acosh acosh
/*@ _atanh requires numpy-semantics */
#define _atanh atanh
/*@ _exp requires numpy-semantics */
#define _exp exp
/*@ _expm1 requires numpy-semantics */
#define _expm1 expm1
/*@ _log requires numpy-semantics */
#define _log log
/*@ _log1p requires numpy-semantics */
#define _log1p log1p
/*@ _log2 requires numpy-semantics */
#define _log2 log2
/*@ _log10 requires numpy-semantics */
#define _log10 log10
/*@ _sqrt requires numpy-semantics */
#define _sqrt sqrt
/*@ _INF requires numpy-semantics */
#define _INF INFINITY
/*@ _NINF requires numpy-semantics */
#define _NINF (-INFINITY)
/*@ _NAN requires numpy-semantics */
#define _NAN NAN

/*@ numpy-extrema */
/* np.maximum / np.minimum: NaN if either is NaN; of equal values (0.0, -0.0) the
   second, as NumPy (and difgen/floats.py) give it. */

/*@ _maximum requires numpy-extrema */
static inline double _maximum(double a, double b) { return (a > b || a != a) ? a : b; }
/*@ _minimum requires numpy-extrema */
static inline double _minimum(double a, double b) { return (a < b || a != a) ? a : b; }

/*@ _sign */
static inline double _sign(double a)
{
    return a == a ? (double)((a > 0.0) - (a < 0.0)) : a;
}

/*@ libm-rounding */
/* np.floor, np.ceil, np.trunc, np.rint, np.fmod, np.hypot, np.exp2: libm's (IEEE:
   NaN and inf unchanged, the sign of a zero kept; rint rounds half to even). */

/*@ _floor requires libm-rounding */
#define _floor floor
/*@ _ceil requires libm-rounding */
#define _ceil ceil
/*@ _trunc requires libm-rounding */
#define _trunc trunc
/*@ _rint requires libm-rounding */
#define _rint rint
/*@ _fmod requires libm-rounding */
#define _fmod fmod
/*@ _hypot requires libm-rounding */
#define _hypot hypot
/*@ _exp2 requires libm-rounding */
#define _exp2 exp2

/*@ _remainder */
/* np.remainder: NumPy's npy_remainder (npy_divmod), the sign of the divisor. */
static inline double _remainder(double a, double b)
{
    double mod = fmod(a, b);
    if (!b) return mod;
    if (mod) {
        if ((b < 0) != (mod < 0)) mod += b;
    }
    else {
        mod = copysign(0.0, b);
    }
    return mod;
}

/*@ numpy-logaddexp */
/* np.logaddexp and np.logaddexp2: NumPy's npy_logaddexp(2), the same libm calls. */

/*@ _logaddexp requires numpy-logaddexp */
static inline double _logaddexp(double a, double b)
{
    if (a == b) return a + 0.6931471805599453;
    double d = a - b;
    if (d > 0.0) return a + log1p(exp(-d));
    if (d <= 0.0) return b + log1p(exp(d));
    return d;
}

/*@ _logaddexp2 requires numpy-logaddexp */
static inline double _logaddexp2(double a, double b)
{
    if (a == b) return a + 1.0;
    double d = a - b;
    if (d > 0.0) return a + 1.4426950408889634 * log1p(exp2(-d));
    if (d <= 0.0) return b + 1.4426950408889634 * log1p(exp2(d));
    return d;
}

/*@ scipy-special */
/* scipy.special's gammaln, gamma, expit, xlogy, xlog1py with SciPy's values: C99's
   lgamma is +inf at the poles (SciPy's -inf at -inf kept), tgamma is +-inf at +-0
   and NaN at the negative integers, expit takes exp of -|a| only. */

/*@ _gammaln requires scipy-special */
static inline double _gammaln(double a) { return a == -INFINITY ? a : lgamma(a); }
/*@ _gamma requires scipy-special */
static inline double _gamma(double a) { return tgamma(a); }
/*@ _expit requires scipy-special */
static inline double _expit(double a)
{
    if (a >= 0.0) return 1.0 / (1.0 + exp(-a));
    double e = exp(a);
    return e / (1.0 + e);
}
/*@ _xlogy requires scipy-special */
static inline double _xlogy(double a, double b)
{
    return (a == 0.0 && b == b) ? 0.0 : a * log(b);
}
/*@ _xlog1py requires scipy-special */
static inline double _xlog1py(double a, double b)
{
    return (a == 0.0 && b == b) ? 0.0 : a * log1p(b);
}

/*@ dg_parse defines dg_parse_slow */
/* Positional and keyword arguments, as a Python function with these parameters
   (the first `required` without a default, the rest defaulting to None). The
   common call, positional arguments only and all the required ones given, is
   decided first, inline: it needs no name lookup. */
static int dg_parse_slow(const char *fname, PyObject *const *args, Py_ssize_t nargs,
                         PyObject *kwnames, const char *const *names, int nparams,
                         int required, PyObject **argv);

static inline int
dg_parse(const char *fname, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
         const char *const *names, int nparams, int required, PyObject **argv)
{
    if (kwnames == NULL && nargs >= required && nargs <= nparams) {
        for (Py_ssize_t i = 0; i < nargs; i++) argv[i] = args[i];
        return 0;
    }
    return dg_parse_slow(fname, args, nargs, kwnames, names, nparams, required, argv);
}

static int
dg_parse_slow(const char *fname, PyObject *const *args, Py_ssize_t nargs,
              PyObject *kwnames, const char *const *names, int nparams, int required,
              PyObject **argv)
{
    if (nargs > nparams) {
        PyErr_Format(PyExc_TypeError,
                     "%s() takes %d positional arguments but %zd were given",
                     fname, nparams, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) argv[i] = args[i];
    if (kwnames != NULL) {
        Py_ssize_t nkw = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t k = 0; k < nkw; k++) {
            PyObject *key = PyTuple_GET_ITEM(kwnames, k);
            int found = -1;
            for (int j = 0; j < nparams; j++) {
                if (PyUnicode_CompareWithASCIIString(key, names[j]) == 0) {
                    found = j;
                    break;
                }
            }
            if (found < 0) {
                PyErr_Format(PyExc_TypeError,
                             "%s() got an unexpected keyword argument '%U'", fname, key);
                return -1;
            }
            if (argv[found] != NULL) {
                PyErr_Format(PyExc_TypeError,
                             "%s() got multiple values for argument '%s'", fname,
                             names[found]);
                return -1;
            }
            argv[found] = args[nargs + k];
        }
    }
    for (int j = 0; j < required; j++) {
        if (argv[j] == NULL) {
            PyErr_Format(PyExc_TypeError,
                         "%s() missing 1 required positional argument: '%s'", fname,
                         names[j]);
            return -1;
        }
    }
    return 0;
}

/*@ dg_shape */
static PyObject *
dg_shape(int nd, const npy_intp *dims)
{
    PyObject *shape = PyTuple_New(nd);
    if (shape == NULL) return NULL;
    for (int i = 0; i < nd; i++) {
        PyObject *n = PyLong_FromSsize_t((Py_ssize_t)dims[i]);
        if (n == NULL) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, i, n);
    }
    return shape;
}

/*@ dg_same_shape */
static int
dg_same_shape(PyArrayObject *a, int nd, const npy_intp *dims)
{
    if (PyArray_NDIM(a) != nd) return 0;
    const npy_intp *have = PyArray_DIMS(a);
    for (int i = 0; i < nd; i++) {
        if (have[i] != dims[i]) return 0;
    }
    return 1;
}

/*@ dg_convert requires dg_shape */
/* An argument off the fast path, converted by the module's own check `fn`
   (_as_array, or _as_points with the number of points `count` when count >= 0):
   a C-contiguous float64 array (a new reference), or NULL with the error `fn`
   raised, exactly as the Python operators convert or refuse it. */
static PyArrayObject *
dg_convert(PyObject *fn, const char *name, PyObject *obj, int nd, const npy_intp *dims,
           npy_intp count)
{
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "difgen extension used before _bind");
        return NULL;
    }
    PyObject *shape = dg_shape(nd, dims);
    if (shape == NULL) return NULL;
    PyObject *conv = count < 0
        ? PyObject_CallFunction(fn, "sOO", name, obj, shape)
        : PyObject_CallFunction(fn, "sOOn", name, obj, shape, (Py_ssize_t)count);
    Py_DECREF(shape);
    if (conv == NULL) return NULL;
    PyObject *arr = PyArray_FROMANY(conv, NPY_DOUBLE, 0, 0, NPY_ARRAY_IN_ARRAY);
    Py_DECREF(conv);
    return (PyArrayObject *)arr;
}

/*@ dg_array defines dg_array_slow requires module-prologue dg_same_shape dg_convert */
/* An array argument as a C-contiguous float64 array of its shape (a new
   reference): as it is on the fast path (inline), else through the module's
   _as_array, which converts it or raises exactly as the Python operators do. */
static PyArrayObject *dg_array_slow(PyObject *obj, const char *name, int nd,
                                    const npy_intp *dims);

static inline PyArrayObject *
dg_array(PyObject *obj, const char *name, int nd, const npy_intp *dims)
{
    if (PyArray_CheckExact(obj)) {
        PyArrayObject *a = (PyArrayObject *)obj;
        if (PyArray_TYPE(a) == NPY_DOUBLE && PyArray_ISCARRAY_RO(a) &&
            PyArray_ISNOTSWAPPED(a) && dg_same_shape(a, nd, dims)) {
            Py_INCREF(obj);
            return a;
        }
    }
    return dg_array_slow(obj, name, nd, dims);
}

/* The conversion (or the error) when the argument is not on the fast path. */
static PyArrayObject *
dg_array_slow(PyObject *obj, const char *name, int nd, const npy_intp *dims)
{
    return dg_convert(dg_as_array_fn, name, obj, nd, dims, -1);
}

/*@ dg_ints defines dg_int_doubles requires module-prologue dg_shape dg_same_shape */
/* An int64 argument the loops read only as doubles (labels, counts: the operator
   casts it to float64, difgen/targets/c/ints.py), as a new reference to a
   C-contiguous float64 array of `dims`: an exact int64 array of that shape as it
   is, anything else through the module's _as_ints, which converts it or raises
   exactly as the Python operators do; then cast as NumPy's astype(np.float64)
   casts (C's conversion of an int64_t, exact below 2**53). */
static PyArrayObject *
dg_int_doubles(PyObject *checked)
{
    PyObject *arr = PyArray_FROMANY(checked, NPY_DOUBLE, 0, 0,
                                    NPY_ARRAY_IN_ARRAY | NPY_ARRAY_FORCECAST);
    Py_DECREF(checked);
    return (PyArrayObject *)arr;
}

static PyArrayObject *
dg_ints(PyObject *obj, const char *name, int nd, const npy_intp *dims)
{
    if (PyArray_CheckExact(obj) && PyArray_TYPE((PyArrayObject *)obj) == NPY_INT64 &&
        dg_same_shape((PyArrayObject *)obj, nd, dims)) {
        Py_INCREF(obj);
        return dg_int_doubles(obj);
    }
    PyObject *fn = dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, "_as_ints");
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "difgen extension used before _bind");
        return NULL;
    }
    PyObject *shape = dg_shape(nd, dims);
    if (shape == NULL) return NULL;
    PyObject *checked = PyObject_CallFunction(fn, "sOO", name, obj, shape);
    Py_DECREF(shape);
    if (checked == NULL) return NULL;
    return dg_int_doubles(checked);
}

/*@ dg_int_scalar requires dg_ints */
/* A scalar int64 argument read as a double (dg_ints of shape ()). */
static int
dg_int_scalar(PyObject *obj, const char *name, double *value)
{
    PyArrayObject *a = dg_ints(obj, name, 0, NULL);
    if (a == NULL) return -1;
    *value = *(const double *)PyArray_DATA(a);
    Py_DECREF(a);
    return 0;
}

/*@ dg_scalar requires module-prologue */
/* A scalar argument: a float as it is, anything else through _as_scalar. */
static int
dg_scalar(PyObject *obj, const char *name, double *value)
{
    if (PyFloat_Check(obj)) {
        *value = PyFloat_AS_DOUBLE(obj);
        return 0;
    }
    if (dg_as_scalar_fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "difgen extension used before _bind");
        return -1;
    }
    PyObject *conv = PyObject_CallFunction(dg_as_scalar_fn, "sO", name, obj);
    if (conv == NULL) return -1;
    *value = PyFloat_AsDouble(conv);
    Py_DECREF(conv);
    return (*value == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/*@ dg_new defines dg_float64 */
/* NumPy's float64 descriptor, looked up once (PyArray_SimpleNew looks it up on
   every call; a new result array is most of a small operator's cost). */
static PyArray_Descr *dg_float64 = NULL;

/* A new C-contiguous float64 array of `dims` (what PyArray_SimpleNew makes). */
static PyObject *
dg_new(int nd, const npy_intp *dims, double **data)
{
    if (dg_float64 == NULL) {
        dg_float64 = PyArray_DescrFromType(NPY_DOUBLE);
        if (dg_float64 == NULL) return NULL;
    }
    Py_INCREF(dg_float64); /* PyArray_NewFromDescr steals a reference */
    PyObject *a = PyArray_NewFromDescr(&PyArray_Type, dg_float64, nd, (npy_intp *)dims,
                                       NULL, NULL, 0, NULL);
    if (a != NULL) *data = (double *)PyArray_DATA((PyArrayObject *)a);
    return a;
}

/*@ dg_recycled defines dg_slots dg_unreachable requires dg_new dg_same_shape */
/* Small result arrays recycled. Each result of an operator keeps the last two
   arrays it returned (a loop `g = gradient(x)` still holds the newer one during
   the next call) and reuses one when nothing else can reach it: its reference
   count is 1 (ours: no variable, container, view or buffer export holds it), no
   weak reference was taken, and its type, dtype, shape, strides and flags are
   still those it was made with. The array is then indistinguishable from a new
   one, and every element is overwritten, as a new array's would be. Free-threaded
   builds, where a count of 1 proves nothing, always allocate. Only results of
   at most RECYCLE_MAX elements (c_code.py) are made here. */

typedef struct {
    PyObject *array[2];
    int flags[2];
    int next;
} dg_slots;

static int
dg_unreachable(PyObject *obj, int flags, int nd, const npy_intp *dims)
{
#ifdef Py_GIL_DISABLED
    return 0;
#else
    if (obj == NULL || Py_REFCNT(obj) != 1 || Py_TYPE(obj) != &PyArray_Type) return 0;
    PyArrayObject *a = (PyArrayObject *)obj;
    PyArrayObject_fields *fields = (PyArrayObject_fields *)obj;
    if (fields->weakreflist != NULL || PyArray_BASE(a) != NULL ||
        PyArray_DESCR(a) != dg_float64 || PyArray_FLAGS(a) != flags ||
        !dg_same_shape(a, nd, dims)) {
        return 0;
    }
    npy_intp stride = sizeof(double);
    for (int i = nd - 1; i >= 0; i--) {
        if (PyArray_STRIDES(a)[i] != stride) return 0;
        stride *= dims[i];
    }
    return 1;
#endif
}

/* dg_new, or an array of `slots` that nothing else can reach any more. */
static PyObject *
dg_recycled(dg_slots *slots, int nd, const npy_intp *dims, double **data)
{
    for (int i = 0; i < 2; i++) {
        PyObject *a = slots->array[i];
        if (dg_unreachable(a, slots->flags[i], nd, dims)) {
            Py_INCREF(a);
            *data = (double *)PyArray_DATA((PyArrayObject *)a);
            return a;
        }
    }
    PyObject *a = dg_new(nd, dims, data);
#ifndef Py_GIL_DISABLED
    if (a != NULL) {
        int k = slots->next;
        Py_INCREF(a);
        Py_XSETREF(slots->array[k], a);
        slots->flags[k] = PyArray_FLAGS((PyArrayObject *)a);
        slots->next = 1 - k;
    }
#endif
    return a;
}

/*@ dg_out_direct requires dg_same_shape */
/* Whether `out` can be written directly: an exact, writeable, aligned,
   C-contiguous native float64 array of the result's shape. */
static int
dg_out_direct(PyObject *out, int nd, const npy_intp *dims)
{
    if (out == NULL || !PyArray_CheckExact(out)) return 0;
    PyArrayObject *a = (PyArrayObject *)out;
    return PyArray_TYPE(a) == NPY_DOUBLE && PyArray_ISCARRAY(a) &&
           PyArray_ISNOTSWAPPED(a) && dg_same_shape(a, nd, dims);
}

/*@ dg_result requires dg_out_direct dg_new dg_recycled */
/* Where the last result goes: `out` itself when it can be written directly,
   else a fresh array (dg_into_out then checks and copies, as Python does),
   recycled from `slots` unless they are NULL. */
static PyObject *
dg_result(dg_slots *slots, PyObject *out, int nd, const npy_intp *dims, double **data)
{
    if (out != NULL && out != Py_None && dg_out_direct(out, nd, dims)) {
        Py_INCREF(out);
        *data = (double *)PyArray_DATA((PyArrayObject *)out);
        return out;
    }
    return slots == NULL ? dg_new(nd, dims, data) : dg_recycled(slots, nd, dims, data);
}

/*@ dg_into_out requires module-prologue dg_shape */
/* `result` returned as it is when there is no out or it was written in place;
   else `_check_out(out, shape, name); out[...] = result; return out`, `name` the
   operator and "out" as its errors say them. Steals result. */
static PyObject *
dg_into_out(PyObject *result, PyObject *out, int nd, const npy_intp *dims,
            const char *name)
{
    if (out == NULL || out == Py_None || result == out) return result;
    PyObject *shape = dg_shape(nd, dims);
    if (shape == NULL) {
        Py_DECREF(result);
        return NULL;
    }
    PyObject *ok = PyObject_CallFunction(dg_check_out_fn, "OOs", out, shape, name);
    Py_DECREF(shape);
    if (ok == NULL || PyObject_SetItem(out, Py_Ellipsis, result) < 0) {
        Py_XDECREF(ok);
        Py_DECREF(result);
        return NULL;
    }
    Py_DECREF(ok);
    Py_DECREF(result);
    Py_INCREF(out);
    return out;
}

/*@ dg_wrap requires module-prologue */
/* A sparse result's nonzeros wrapped by the module's CSR constructor. Steals data. */
static PyObject *
dg_wrap(PyObject *data, const char *kind)
{
    PyObject *wrap = dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, kind);
    if (wrap == NULL) {
        Py_DECREF(data);
        PyErr_Format(PyExc_RuntimeError, "difgen extension: no wrapper for %s", kind);
        return NULL;
    }
    PyObject *result = PyObject_CallOneArg(wrap, data);
    Py_DECREF(data);
    return result;
}

/*@ dg_pattern */
/* The pattern of an operator's sparse result, baked as tables of `itemsize`-byte
   signed integers (the dtype of the module's own <KIND>_INDICES/<KIND>_INDPTR,
   which SciPy keeps in the CSR arrays the operator returns). */
typedef struct {
    long rows, cols;
    npy_intp nnz;
    int itemsize;        /* 4 (int32) or 8 (int64) */
    const void *indices; /* nnz entries */
    const void *indptr;  /* rows + 1 entries */
} dg_pattern;

/*@ dg_same_indices */
/* Whether `obj` is an exact, aligned, native, C-contiguous 1-D ndarray of `n`
   int32 or int64 indices equal to `table` (what SciPy stores in a CSR array). An
   array of the table's dtype is compared by memcmp; the other width element by
   element (slower, as the operator never returns it). */
static int
dg_same_indices(PyObject *obj, const void *table, int itemsize, npy_intp n)
{
    if (obj == NULL || !PyArray_CheckExact(obj)) return 0;
    PyArrayObject *a = (PyArrayObject *)obj;
    if (PyArray_NDIM(a) != 1 || PyArray_DIM(a, 0) != n || !PyArray_ISCARRAY_RO(a) ||
        !PyArray_ISNOTSWAPPED(a) || !PyArray_ISSIGNED(a))
        return 0;
    const int size = (int)PyArray_ITEMSIZE(a);
    if (n == 0) return size == 4 || size == 8;
    if (size == itemsize) return memcmp(PyArray_DATA(a), table, (size_t)size * n) == 0;
    npy_int64 diff = 0;
    if (size == 4 && itemsize == 8) {
        const npy_int32 *v = (const npy_int32 *)PyArray_DATA(a);
        const npy_int64 *t = (const npy_int64 *)table;
        for (npy_intp i = 0; i < n; i++) diff |= (npy_int64)v[i] ^ t[i];
        return diff == 0;
    }
    if (size == 8 && itemsize == 4) {
        const npy_int64 *v = (const npy_int64 *)PyArray_DATA(a);
        const npy_int32 *t = (const npy_int32 *)table;
        for (npy_intp i = 0; i < n; i++) diff |= v[i] ^ (npy_int64)t[i];
        return diff == 0;
    }
    return 0;
}

/*@ dg_attr */
/* out.<name> through an interned attribute name (a new reference, or NULL with
   no error set). */
static PyObject *
dg_attr(PyObject *out, PyObject **interned, const char *name)
{
    if (*interned == NULL) {
        *interned = PyUnicode_InternFromString(name);
        if (*interned == NULL) {
            PyErr_Clear();
            return NULL;
        }
    }
    PyObject *value = PyObject_GetAttr(out, *interned);
    if (value == NULL) PyErr_Clear();
    return value;
}

/*@ dg_csr_fast requires dg_pattern dg_attr dg_same_indices */
/* out.data when `out` is a CSR array of this pattern whose attributes are
   exactly what the operator itself returns (a new reference); else NULL, with
   no error set. Every object accepted here is one the module's _check_csr_out
   accepts, and the same data array is returned. */
static PyObject *
dg_csr_fast(PyObject *out, const dg_pattern *p)
{
    static PyObject *s_format = NULL, *s_shape = NULL, *s_data = NULL;
    static PyObject *s_indices = NULL, *s_indptr = NULL;
    int ok = 0;
    PyObject *format = dg_attr(out, &s_format, "format");
    PyObject *shape = format == NULL ? NULL : dg_attr(out, &s_shape, "shape");
    PyObject *data = shape == NULL ? NULL : dg_attr(out, &s_data, "data");
    PyObject *indices = data == NULL ? NULL : dg_attr(out, &s_indices, "indices");
    PyObject *indptr = indices == NULL ? NULL : dg_attr(out, &s_indptr, "indptr");
    if (indptr != NULL && PyUnicode_CheckExact(format) &&
        PyUnicode_CompareWithASCIIString(format, "csr") == 0 &&
        PyTuple_CheckExact(shape) && PyTuple_GET_SIZE(shape) == 2 &&
        PyLong_CheckExact(PyTuple_GET_ITEM(shape, 0)) &&
        PyLong_CheckExact(PyTuple_GET_ITEM(shape, 1)) &&
        PyLong_AsLong(PyTuple_GET_ITEM(shape, 0)) == p->rows &&
        PyLong_AsLong(PyTuple_GET_ITEM(shape, 1)) == p->cols &&
        PyArray_CheckExact(data)) {
        PyArrayObject *d = (PyArrayObject *)data;
        ok = PyArray_TYPE(d) == NPY_DOUBLE && PyArray_NDIM(d) == 1 &&
             PyArray_DIM(d, 0) == p->nnz && PyArray_ISCARRAY(d) &&
             PyArray_ISNOTSWAPPED(d) &&
             dg_same_indices(indptr, p->indptr, p->itemsize, p->rows + 1) &&
             dg_same_indices(indices, p->indices, p->itemsize, p->nnz);
    }
    if (PyErr_Occurred()) { /* an overflowing shape: the Python check decides */
        PyErr_Clear();
        ok = 0;
    }
    Py_XDECREF(format);
    Py_XDECREF(shape);
    Py_XDECREF(indices);
    Py_XDECREF(indptr);
    if (!ok) {
        Py_XDECREF(data);
        return NULL;
    }
    return data;
}

/*@ dg_csr_data requires module-prologue dg_pattern dg_csr_fast */
/* The data of a CSR `out` of the operator's pattern (a new reference), or NULL
   with the ValueError of the module's _check_csr_out. The common case (a CSR
   array the operator returned, or SciPy's rebuild of one) is checked here
   against the baked pattern; anything else -- a refusal included -- goes to
   _check_csr_out itself, so that the compiled and Python operators accept and
   refuse the same objects with the same messages. */
static PyObject *
dg_csr_data(PyObject *out, const char *key, const dg_pattern *pattern)
{
    PyObject *data = dg_csr_fast(out, pattern);
    if (data != NULL) return data;
    PyObject *check = dg_helpers == NULL ? NULL : PyDict_GetItemString(dg_helpers, key);
    if (check == NULL) {
        PyErr_Format(PyExc_RuntimeError, "difgen extension: no check for %s", key);
        return NULL;
    }
    return PyObject_CallOneArg(check, out);
}

/*@ dg_tuple */
/* A tuple of the results; steals them (clearing the slots) unless it fails. */
static PyObject *
dg_tuple(int n, PyObject **items)
{
    PyObject *t = PyTuple_New(n);
    if (t == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyTuple_SET_ITEM(t, i, items[i]);
        items[i] = NULL;
    }
    return t;
}

/*@ dg_bind requires module-prologue */
static PyObject *
dg_bind(PyObject *self, PyObject *helpers)
{
    if (!PyDict_Check(helpers)) {
        PyErr_SetString(PyExc_TypeError, "_bind expects a dict of helpers");
        return NULL;
    }
    PyObject *as_array = PyDict_GetItemString(helpers, "_as_array");
    PyObject *as_scalar = PyDict_GetItemString(helpers, "_as_scalar");
    PyObject *check_out = PyDict_GetItemString(helpers, "_check_out");
    if (as_array == NULL || as_scalar == NULL || check_out == NULL) {
        PyErr_SetString(PyExc_KeyError, "_bind: a helper is missing");
        return NULL;
    }
    Py_INCREF(helpers);
    Py_XSETREF(dg_helpers, helpers);
    dg_as_array_fn = as_array;
    dg_as_scalar_fn = as_scalar;
    dg_check_out_fn = check_out;
    Py_RETURN_NONE;
}
