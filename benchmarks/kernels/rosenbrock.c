/* The extended Rosenbrock function's gradient and hessian-vector product, written
   by hand the way the limit is written: one pass over x (and v), each element of
   the result stored once, nothing else stored. The term a shifted slice carries
   to the next element (t of element i is added to the gradient at i + 1) is kept
   in a register for the next iteration.

   f(x) = sum_i 100 (x[i+1] - x[i]^2)^2 + (1 - x[i])^2,  i = 0 .. n - 2

   The NumPy references are benchmarks/problems.py:rosenbrock_gradient and
   rosenbrock_hvp. */

#include <stddef.h>

/* g = grad f(x); x and g hold n doubles and do not overlap. */
void
rosenbrock_gradient(const double *x, double *g, ptrdiff_t n)
{
    double carry = 0.0; /* 200 (x[i] - x[i-1]^2), the term of element i - 1 */
    for (ptrdiff_t i = 0; i + 1 < n; i++) {
        const double xi = x[i];
        const double t = 200.0 * (x[i + 1] - xi * xi);
        g[i] = -2.0 * xi * t - 2.0 * (1.0 - xi) + carry;
        carry = t;
    }
    if (n > 0) g[n - 1] = carry;
}

/* out = H(x) v; the hessian is tridiagonal: diagonal 1200 x[i]^2 - 400 x[i+1] + 2
   (i < n - 1) plus 200 (i > 0), off-diagonal -400 x[i]. */
void
rosenbrock_hvp(const double *x, const double *v, double *out, ptrdiff_t n)
{
    if (n <= 0) return;
    if (n == 1) {
        out[0] = 0.0 * v[0];
        return;
    }
    double off_prev = 0.0, v_prev = 0.0, extra = 0.0;
    for (ptrdiff_t i = 0; i + 1 < n; i++) {
        const double xi = x[i], vi = v[i];
        const double off = -400.0 * xi;
        const double diag = 1200.0 * xi * xi - 400.0 * x[i + 1] + 2.0 + extra;
        out[i] = diag * vi + off * v[i + 1] + off_prev * v_prev;
        off_prev = off;
        v_prev = vi;
        extra = 200.0;
    }
    out[n - 1] = 200.0 * v[n - 1] + off_prev * v_prev;
}
