/* The extended Rosenbrock function's gradient and hessian-vector product, written
   by hand the way the limit is written: one pass over x (and v), each element of
   the result stored once, nothing else stored. The term a shifted slice carries
   to the next element is computed again from the two neighbours it reads (two
   operations), not carried in a register, so that the iterations are
   independent; the loops take two elements at a time in 16-byte vectors (GCC's
   and Clang's vector extensions: SSE2 on x86-64, NEON on arm64), as the
   compiler's own vectorizer does for difgen's loops, whose trip counts are
   constants, but not for a trip count known only at run time under -O2's
   cost model. No fused multiply-adds (-ffp-contract=off, difgen's flags).

   f(x) = sum_i 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2,  i = 0 .. n - 2

   The NumPy references are benchmarks/problems.py:rosenbrock_gradient and
   rosenbrock_hvp. */

#include <stddef.h>
#include <string.h>

typedef double v2d __attribute__((vector_size(16)));

static inline v2d
load2(const double *p)
{
    v2d v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void
store2(double *p, v2d v)
{
    memcpy(p, &v, sizeof v);
}

/* g = grad f(x); x and g hold n doubles and do not overlap:
   g[i] = -2 x[i] t[i] - 2 (1 - x[i]) + t[i-1],  t[i] = 200 (x[i+1] - x[i]^2),
   the first term absent at i = n - 1, the last at i = 0. */
void
rosenbrock_gradient(const double *restrict x, double *restrict g, ptrdiff_t n)
{
    if (n < 2) {
        if (n == 1) g[0] = 0.0;
        return;
    }
    {
        const double t = 200.0 * (x[1] - x[0] * x[0]);
        g[0] = -2.0 * x[0] * t - 2.0 * (1.0 - x[0]);
    }
    ptrdiff_t i = 1;
    for (; i + 2 < n; i += 2) {
        const v2d xi = load2(x + i), xl = load2(x + i - 1), xr = load2(x + i + 1);
        const v2d t = 200.0 * (xr - xi * xi);
        store2(g + i, -2.0 * xi * t - 2.0 * (1.0 - xi) + 200.0 * (xi - xl * xl));
    }
    for (; i < n - 1; i++) {
        const double xi = x[i], xl = x[i - 1];
        const double t = 200.0 * (x[i + 1] - xi * xi);
        g[i] = -2.0 * xi * t - 2.0 * (1.0 - xi) + 200.0 * (xi - xl * xl);
    }
    g[n - 1] = 200.0 * (x[n - 1] - x[n - 2] * x[n - 2]);
}

/* out = H(x) v; the hessian is tridiagonal: diagonal 1200 x[i]^2 - 400 x[i+1] + 2
   (i < n - 1) plus 200 (i > 0), off-diagonals -400 x[i] at (i, i+1), (i+1, i). */
void
rosenbrock_hvp(const double *restrict x, const double *restrict v, double *restrict out,
               ptrdiff_t n)
{
    if (n < 2) {
        if (n == 1) out[0] = 0.0 * v[0];
        return;
    }
    out[0] = (1200.0 * x[0] * x[0] - 400.0 * x[1] + 2.0) * v[0] - 400.0 * x[0] * v[1];
    ptrdiff_t i = 1;
    for (; i + 2 < n; i += 2) {
        const v2d xi = load2(x + i), xr = load2(x + i + 1), xl = load2(x + i - 1);
        const v2d diag = 1200.0 * xi * xi - 400.0 * xr + 202.0;
        store2(out + i, diag * load2(v + i) - 400.0 * xi * load2(v + i + 1) -
                            400.0 * xl * load2(v + i - 1));
    }
    for (; i < n - 1; i++) {
        const double xi = x[i];
        const double diag = 1200.0 * xi * xi - 400.0 * x[i + 1] + 202.0;
        out[i] = diag * v[i] - 400.0 * xi * v[i + 1] - 400.0 * x[i - 1] * v[i - 1];
    }
    out[n - 1] = 200.0 * v[n - 1] - 400.0 * x[n - 2] * v[n - 2];
}

#ifdef KERNEL_EXTENSION
/* The kernels as a CPython extension (compiled with -DKERNEL_EXTENSION and the
   Python and NumPy headers): gradient(x) and hvp(x, v), each returning a new
   float64 array, called the way a difgen extension's operators are
   (METH_FASTCALL, C-contiguous float64 arguments taken as they are), so that
   the ratio against difgen compares the loops and not two calling conventions.
   Anything else is converted by NumPy once (not timed: the suite passes float64
   arrays). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>

static PyArrayObject *
as_vector(PyObject *obj)
{
    PyArrayObject *a = (PyArrayObject *)PyArray_FROMANY(obj, NPY_DOUBLE, 1, 1,
                                                        NPY_ARRAY_IN_ARRAY);
    return a;
}

static PyObject *
py_gradient(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "gradient(x) takes one argument");
        return NULL;
    }
    PyArrayObject *x = as_vector(args[0]);
    if (x == NULL) return NULL;
    npy_intp n = PyArray_DIM(x, 0);
    PyObject *g = PyArray_SimpleNew(1, &n, NPY_DOUBLE);
    if (g != NULL) {
        rosenbrock_gradient((const double *)PyArray_DATA(x),
                            (double *)PyArray_DATA((PyArrayObject *)g), n);
    }
    Py_DECREF(x);
    return g;
}

static PyObject *
py_hvp(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "hvp(x, v) takes two arguments");
        return NULL;
    }
    PyArrayObject *x = as_vector(args[0]);
    if (x == NULL) return NULL;
    PyArrayObject *v = as_vector(args[1]);
    if (v == NULL) {
        Py_DECREF(x);
        return NULL;
    }
    npy_intp n = PyArray_DIM(x, 0);
    PyObject *out = NULL;
    if (PyArray_DIM(v, 0) != n) {
        PyErr_Format(PyExc_ValueError, "v has shape (%zd,), x (%zd,)",
                     (Py_ssize_t)PyArray_DIM(v, 0), (Py_ssize_t)n);
    } else {
        out = PyArray_SimpleNew(1, &n, NPY_DOUBLE);
        if (out != NULL) {
            rosenbrock_hvp((const double *)PyArray_DATA(x),
                           (const double *)PyArray_DATA(v),
                           (double *)PyArray_DATA((PyArrayObject *)out), n);
        }
    }
    Py_DECREF(x);
    Py_DECREF(v);
    return out;
}

static PyMethodDef methods[] = {
    {"gradient", (PyCFunction)(void (*)(void))py_gradient, METH_FASTCALL,
     "gradient(x): the Rosenbrock gradient, one pass"},
    {"hvp", (PyCFunction)(void (*)(void))py_hvp, METH_FASTCALL,
     "hvp(x, v): the Rosenbrock hessian times v, one pass"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "rosenbrock_kernel", NULL, -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit_rosenbrock_kernel(void)
{
    import_array();
    return PyModule_Create(&module);
}
#endif
