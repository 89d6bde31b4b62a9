"""Functions with data-dependent control flow: branches and loops on traced values.

Plain NumPy, as users write them: piecewise models, Newton, bisection and
fixed-point solvers, adaptive Euler, clamped contact forces. ``CASES`` gives each its
input shape and test points chosen away from branch boundaries (where the derivative
of the path taken is the derivative of the function, so central differences are an
oracle), and whether autograd can run it (it cannot assign into arrays).
"""

import numpy as np

# ---------------------------------------------------------------- piecewise


def piecewise_quadratic(x):
    if x[0] > 0:
        return x[0] ** 2 + x[1]
    else:
        return -x[0] + x[1] ** 2


def elif_chain(x):
    s = np.sum(x)
    if s < 0.5:
        y = np.sin(x) * s
    elif s < 1.5:
        y = x**2 - s
    else:
        y = np.exp(-x) * s
    return np.sum(y * y)


def early_return(x):
    a = x[0] * x[1]
    if a > 0.3:
        return np.sin(a) + x[2]
    b = a + x[2] ** 2
    if b > 0.2:
        return b * x[0]
    return np.cos(b)


def conditional_expression(x):
    y = x * 2.0 if np.sum(x) > 1.0 else x[::-1] ** 3
    return y


def and_condition(x):
    if x[0] > 0 and x[1] > 0:
        return x[0] * x[1] * x[2]
    return x[0] + x[1] + x[2]


def or_condition(x):
    if x[0] > 1.0 or x[1] < 0.0:
        return np.sum(np.sin(x))
    return np.sum(x**3)


def not_condition(x):
    if not x[0] > x[1]:
        return x[1] ** 2 * x[2]
    return x[0] ** 2 * x[2]


def chained_comparison(x):
    if 0.2 < x[0] < 0.6:
        return np.exp(x[1]) * x[0]
    return np.log1p(x[1] ** 2) + x[0]


def nested_branches(x):
    if x[0] > 0:
        if x[1] > 0:
            y = x[0] * x[1]
        else:
            y = x[0] - x[1] ** 2
    else:
        y = np.sin(x[0] + x[1])
    return y * x[2]


def sign_power(x):
    return x**2 if x > 0 else -(x**3)


def soft_plus_guard(x):
    z = 10.0 * x
    if z > 20.0:
        return z
    return np.log1p(np.exp(z))


def safe_sqrt(x):
    # np.where would give a NaN gradient on the branch not taken; a real if does not
    s = x[0] - x[1]
    r = np.sqrt(s) if s > 0 else 0.0
    return r + x[2] ** 2


def sinc(x):
    if abs(x) < 1e-8:
        return 1.0 + 0.0 * x
    return np.sin(x) / x


def huber(x):
    total = 0.0
    for r in x:
        if abs(r) <= 0.5:
            total = total + 0.5 * r**2
        else:
            total = total + 0.5 * (abs(r) - 0.25)
    return total


def leaky_relu_sum(x):
    return sum(v if v > 0 else 0.1 * v for v in x)


def clamp(x):
    clamped = [0.0 if v < 0.0 else (1.0 if v > 1.0 else v) for v in x]  # noqa: FURB136
    return np.array(clamped) * x


def running_max(x):
    m = x[0]
    for v in x[1:]:
        if v > m:
            m = v
    return m * np.sum(x)


def piecewise_linear_table(x):
    knots = np.array([0.0, 0.5, 1.0, 1.5])
    slopes = np.array([1.0, -2.0, 0.5, 3.0])
    t = x[0] + x[1]
    value = 0.0
    for k, b in zip(knots, slopes):
        if t > k:
            value = value + b * (t - k)
    return value * x[2]


def heaviside_weights(x):
    if x[0] > x[1]:
        return x[0] * x[2]
    return x[1] * x[2]


def branch_on_reduction(x):
    if np.linalg.norm(x) > 1.0:
        return x / np.linalg.norm(x)
    return x


# ---------------------------------------------------------- writes in branches


def writes_in_branch(x):
    out = np.zeros(3)
    out[0] = x[0]
    if x[0] > 0 and x[1] < 1:
        out[1] = np.exp(x[1])
        out[2] = x[2] ** 2
    elif x[2] > 0.3:
        out[1] = 1.0
    return out


def bubble_sort(x):
    a = x.copy()
    n = a.shape[0]
    for i in range(n):
        for j in range(n - 1 - i):
            if a[j] > a[j + 1]:
                a[j], a[j + 1] = a[j + 1], a[j]
    return a


def penalty_contact(x):
    force = np.zeros(x.shape[0])
    for i in range(x.shape[0]):
        if x[i] < 0.0:
            force[i] = -100.0 * x[i]
        else:
            force[i] = 0.0
    return force + 0.1 * x


# ------------------------------------------------------------------- solvers


def newton_sqrt(x):
    y = x * 1.0
    err = 1.0
    while err > 1e-12:
        y_new = 0.5 * (y + x / y)
        err = np.max(np.abs(y_new - y))
        y = y_new
    return y


def kepler(x):
    # eccentric anomaly E of mean anomaly M and eccentricity e: E - e sin E = M
    M, e = x[0], x[1]
    E = M
    step = 1.0
    while abs(step) > 1e-13:
        step = (E - e * np.sin(E) - M) / (1.0 - e * np.cos(E))
        E = E - step
    return E


def newton_cubic(x):
    # y with y**3 + y = a, a = x0 + x1 x2
    a = x[0] + x[1] * x[2]
    y = a
    k = 0
    while abs(y**3 + y - a) > 1e-12 and k < 50:
        y = y - (y**3 + y - a) / (3 * y**2 + 1)
        k = k + 1
    return y


def newton_2d(x):
    a, b = x[0], x[1]
    y = np.array([1.0, 1.0])
    r = np.array([1.0, 1.0])
    while np.max(np.abs(r)) > 1e-12:
        r = np.array([y[0] ** 2 + y[1] - a, y[0] - y[1] ** 3 - b])
        J = np.array([[2 * y[0], 1.0], [1.0, -3 * y[1] ** 2]])
        y = y - np.linalg.solve(J, r)
    return y


def bisection_polished(x):
    # a root of y**3 = a on [0, 2] by bisection, then one Newton step
    a = x[0] ** 2 + 0.5
    lo, hi = 0.0, 2.0
    while hi - lo > 1e-6:
        mid = 0.5 * (lo + hi)
        if mid**3 - a > 0:
            hi = mid
        else:
            lo = mid
    y = 0.5 * (lo + hi)
    return y - (y**3 - a) / (3 * y**2)


def fixed_point(x):
    # y = x0 cos(y) + x1, iterated to a tolerance
    y = 0.0
    diff = 1.0
    while diff > 1e-13:
        y_new = x[0] * np.cos(y) + x[1]
        diff = abs(y_new - y)
        y = y_new
    return y * x[2]


def exp_series(x):
    term = 1.0 + 0.0 * x
    total = term
    k = 1.0
    while abs(term) > 1e-17:
        term = term * x / k
        total = total + term
        k = k + 1.0
    return total


def halving_counter(x):
    s = np.sum(x * x)
    k = 0
    while s > 0.1:
        s = s * 0.5
        k = k + 1
    return s * x[0] + k


def backtracking_step(x):
    # one gradient step on f(z) = sum(z**4) with an Armijo backtracking search
    g = 4 * x**3
    f0 = np.sum(x**4)
    t = 1.0
    while np.sum((x - t * g) ** 4) > f0 - 0.5 * t * np.sum(g * g):
        t = 0.5 * t
    return x - t * g


def loop_in_branch(x):
    if x[0] > 0.5:
        y = x[1]
        while y < 10.0:
            y = y * 1.7 + x[2]
        return y
    return x[1] * x[2]


def branch_in_loop(x):
    y = x[0]
    n = 0.0
    while n < 6.0:
        if y > 1.0:
            y = y * 0.5 + x[1]
        else:
            y = y * 1.5 + x[2]
        n = n + 1.0
    return y


def loops_in_fixed_outer_loop(x):
    total = 0.0
    for c in (0.5, 1.0, 2.0):
        y = x[0] * c
        while y < 3.0:
            y = y * 1.3 + x[1]
        total = total + y * x[2]
    return total


# ------------------------------------------------------------ break, continue


def first_over(x):
    # sum squares until the running total passes 1
    total = 0.0
    for v in x:
        total = total + v * v
        if total > 1.0:
            break
    return total * x[0]


def skip_negative(x):
    total = 0.0
    for v in x:
        if v < 0.0:
            continue
        total = total + np.sin(v)
    return total


def newton_with_break(x):
    y = x[0]
    for _ in range(8):
        step = (y**3 - x[1]) / (3 * y**2)
        y = y - step
        if abs(step) < 1e-13:
            break
    return y


def while_with_break(x):
    y = x[0]
    while y < 100.0:
        y = y * 1.5 + x[1]
        if y > 20.0 * x[2]:
            break
    return y


def for_else(x):
    for v in x:
        if v > 0.8:
            r = v * x[0]
            break
    else:
        r = x[0] * 0.0 - 1.0
    return r


# ------------------------------------------------------------ ODEs, physics


def adaptive_euler(x):
    # y' = -k y, y(0) = y0, with a step bounded by a tolerance on |f|
    y0, k = x[0], x[1]
    t, y = 0.0, y0
    while t < 1.0:
        f = -k * y
        h = 0.2 if abs(f) < 0.5 else 0.1 / abs(f)
        if t + h > 1.0:
            h = 1.0 - t
        y = y + h * f
        t = t + h
    return y


def time_to_ground(x):
    # a falling body, fixed steps until it crosses zero, then linear interpolation
    height, speed = x[0] * 2.0 + 1.0, x[1]
    t, dt = 0.0, 0.01
    h_prev = height
    while height > 0.0:
        h_prev = height
        speed = speed - 9.81 * dt
        height = height + speed * dt
        t = t + dt
    return t - dt * height / (height - h_prev)


def bouncing_ball(x):
    y, v = x[0], x[1]
    for _ in range(15):
        v = v - 9.81 * 0.05
        y = y + v * 0.05
        if y < 0.0:
            y = -y * x[2]
            v = -v * x[2]
    return y + 0.1 * v


def friction(x):
    v = x[:2]
    speed = np.sqrt(np.sum(v * v))
    if speed > 1e-3:
        return -x[2] * v / speed
    return -x[2] * v / 1e-3


def spring_contact(x):
    # a ball of radius 1 against a plane: Hertz force when penetrating
    d = 1.0 - x[0]
    if d > 0:
        return x[1] * d**1.5 + x[2] * d
    return 0.0 * x[1]


def integrate_and_fire(x):
    v, spikes = 0.0, 0.0
    for _ in range(30):
        v = v + 0.1 * (-v + x[0] * 3.0)
        if v > 1.0:
            v = v - 1.0
            spikes = spikes + 1.0
    return v * x[1] + spikes


# Each case: (function, input shape, points, runs under autograd).
P3 = (np.array([0.3, 0.6, 0.4]), np.array([-0.4, 0.9, 0.6]))
Q4 = (
    np.array([0.3, 0.7, 0.9, 0.5]),
    np.array([0.9, -0.2, 0.4, 0.95]),
    np.array([1.5, 2.0, 0.5, 0.3]),
)
CASES = {
    "piecewise_quadratic": (piecewise_quadratic, (3,), P3, True),
    "elif_chain": (
        elif_chain,
        (3,),
        (np.array([0.1, 0.1, 0.1]), np.array([0.3, 0.4, 0.2]), P3[0] * 3),
        True,
    ),
    "early_return": (
        early_return,
        (3,),
        (P3[0] * 2, np.array([0.3, 0.2, 0.6]), np.array([0.1, 0.2, 0.1])),
        True,
    ),
    "conditional_expression": (conditional_expression, (3,), P3 + (P3[0] / 2,), True),
    "and_condition": (and_condition, (3,), P3, True),
    "or_condition": (or_condition, (3,), P3 + (-P3[1],), True),
    "not_condition": (not_condition, (3,), P3 + (P3[0][::-1],), True),
    "chained_comparison": (chained_comparison, (3,), P3, True),
    "nested_branches": (
        nested_branches,
        (3,),
        P3 + (np.array([0.3, -0.5, 0.2]),),
        True,
    ),
    "sign_power": (sign_power, (), (np.array(0.7), np.array(-0.6)), True),
    "soft_plus_guard": (soft_plus_guard, (), (np.array(0.3), np.array(2.5)), True),
    "safe_sqrt": (safe_sqrt, (3,), P3, True),
    "sinc": (sinc, (), (np.array(-1.9), np.array(0.8)), True),
    "huber": (huber, (3,), P3 + (P3[1] * 2,), True),
    "leaky_relu_sum": (leaky_relu_sum, (3,), P3, True),
    "clamp": (clamp, (3,), (np.array([-0.3, 0.5, 1.4]), P3[1]), True),
    "running_max": (running_max, (3,), P3, True),
    "piecewise_linear_table": (
        piecewise_linear_table,
        (3,),
        (P3[0], np.array([0.9, 0.8, -0.3]), np.array([0.1, 0.2, 0.5])),
        True,
    ),
    "heaviside_weights": (heaviside_weights, (3,), P3, True),
    "branch_on_reduction": (branch_on_reduction, (3,), (P3[0], P3[1] * 2), True),
    "writes_in_branch": (
        writes_in_branch,
        (3,),
        P3 + (np.array([0.5, 1.5, 0.4]), np.array([0.5, 1.5, 0.1])),
        False,
    ),
    "bubble_sort": (bubble_sort, (4,), (np.array([0.4, -0.2, 0.9, 0.1]),), False),
    "penalty_contact": (penalty_contact, (3,), P3, False),
    "newton_sqrt": (newton_sqrt, (3,), (P3[0], np.array([2.3, 1.7, 0.2])), True),
    "kepler": (kepler, (2,), (np.array([0.8, 0.3]), np.array([2.5, 0.7])), True),
    "newton_cubic": (newton_cubic, (3,), P3, True),
    "newton_2d": (newton_2d, (2,), (np.array([2.0, 0.5]), np.array([1.5, -0.3])), True),
    "bisection_polished": (bisection_polished, (1,), (np.array([0.6]),), True),
    "fixed_point": (fixed_point, (3,), P3, True),
    "exp_series": (exp_series, (), (np.array(0.7), np.array(-1.3)), True),
    "halving_counter": (halving_counter, (3,), (P3[0], P3[1] * 2), True),
    "backtracking_step": (backtracking_step, (3,), (P3[0], P3[1]), True),
    "loop_in_branch": (loop_in_branch, (3,), (P3[0], np.array([0.7, 0.9, 0.3])), True),
    "branch_in_loop": (branch_in_loop, (3,), P3, True),
    "loops_in_fixed_outer_loop": (loops_in_fixed_outer_loop, (3,), P3, True),
    "adaptive_euler": (
        adaptive_euler,
        (2,),
        (np.array([0.9, 0.7]), np.array([2.2, 3.1])),
        True,
    ),
    "time_to_ground": (time_to_ground, (2,), (np.array([0.33, 0.41]),), True),
    "bouncing_ball": (bouncing_ball, (3,), (np.array([1.03, 0.21, 0.8]),), True),
    "friction": (friction, (3,), P3 + (np.array([1e-4, -2e-4, 0.5]),), True),
    "spring_contact": (spring_contact, (3,), (P3[0], np.array([1.2, 0.5, 0.3])), True),
    "integrate_and_fire": (integrate_and_fire, (2,), (np.array([0.77, 0.4]),), True),
    "first_over": (first_over, (4,), Q4, True),
    "skip_negative": (skip_negative, (4,), Q4, True),
    "newton_with_break": (
        newton_with_break,
        (2,),
        (np.array([0.9, 0.7]), np.array([-0.55, -0.2])),
        True,
    ),
    "while_with_break": (while_with_break, (3,), (Q4[0][:3], Q4[2][:3]), True),
    "for_else": (for_else, (4,), Q4, True),
}
