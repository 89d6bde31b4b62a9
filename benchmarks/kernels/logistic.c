/* The logistic regression NLL gradient, X.T @ (1 / (1 + exp(-(X @ w))) - y),
 * in one pass over X: for each row, its dot with w, the elementwise part, then
 * the row scaled by that residual added into the gradient. X (n rows of d) is
 * read once, where a gemv then a gemv-transposed read it twice. */
#include <math.h>
#include <stddef.h>

void logistic_gradient(const double *w, const double *X, const double *y,
                       double *g, long n, long d)
{
    for (long j = 0; j < d; ++j)
        g[j] = 0.0;
    for (long i = 0; i < n; ++i) {
        const double *row = X + (size_t)i * (size_t)d;
        double z = 0.0;
        for (long j = 0; j < d; ++j)
            z += row[j] * w[j];
        double r = 1.0 / (1.0 + exp(-z)) - y[i];
        for (long j = 0; j < d; ++j)
            g[j] += r * row[j];
    }
}
