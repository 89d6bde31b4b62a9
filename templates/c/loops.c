/* The C runtime of the trace backend's loops (difgen/targets/c/loops.py), after
   points.c.

   Cut into named sections, each opened by a marker comment

       /*@ NAME [defines NAME...] [requires NAME...] *\/

   A generated C file carries a section only when it names what the section defines
   (NAME itself when NAME is a C identifier, and every name after `defines`), closed
   over `requires`, in the order of these files (difgen/targets/c/runtime.py). A
   hyphenated NAME is a comment shared by the sections that require it. Nothing
   before the first marker (this comment) is copied. */

/*@ dg_numpy_attr */
/* numpy.<name> (a new reference), for NumPy's own ufunc loops. */
static PyObject *
dg_numpy_attr(const char *name)
{
    PyObject *np = PyImport_ImportModule("numpy");
    if (np == NULL) return NULL;
    PyObject *attr = PyObject_GetAttrString(np, name);
    Py_DECREF(np);
    return attr;
}

/*@ dg_overlap */
/* Whether two double ranges share memory (an out= that is also an argument). */
static int
dg_overlap(const double *a, npy_intp na, const double *b, npy_intp nb)
{
    return a < b + nb && b < a + na;
}

/*@ dg_fill */
/* r[0:n] = v: eight doubles, then copies of what is written, doubling (memcpy
   moves them in the widest stores the machine has; a loop here gets SSE2's). */
static void
dg_fill(double *r, npy_intp n, double v)
{
    npy_intp k = n < 8 ? n : 8;
    for (npy_intp i = 0; i < k; i++) r[i] = v;
    while (k < n) {
        npy_intp m = k < n - k ? k : n - k;
        memcpy(r + k, r, sizeof(double) * m);
        k += m;
    }
}
