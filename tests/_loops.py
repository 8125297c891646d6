"""Naive per-client reference implementations, written independently of fedcomp's algorithms.

One client at a time, plain NumPy, straight from the update rules of ALGORITHMS.md. The
simulator's vectorised runs must match these to float precision (same seed → same
minibatches, because both draw through fedcomp._random).
"""

from __future__ import annotations

import numpy as np

from fedcomp._random import minibatch_indices, sample_clients


def client_grad(problem, i, x, r, draw, seed, batch_size):
    """Gradient of client i at x (full or the draw-th minibatch of round r)."""
    data = problem.data
    if batch_size is None:
        batch = data.full_batch(np.array([i]))
    else:
        idx = minibatch_indices(seed, r, np.array([i]), data.counts[[i]], draw, batch_size)
        batch = data.minibatch(np.array([i]), idx)
    return problem.loss.grad(x[None], batch)[0]


def prox(problem, v, step):
    return problem.regularizer.prox(v[None], step)[0]


def loop_fedavg(problem, rounds, lr, K, server_lr=1.0, server_prox=False, seed=0,
                batch_size=None, clients_per_round=None):
    x = np.zeros(problem.param_shape)
    for r in range(rounds):
        S = sample_clients(seed, r, problem.n_clients, clients_per_round)
        w = problem.weights[S] / problem.weights[S].sum()
        delta = np.zeros_like(x)
        for wi, i in zip(w, S, strict=True):
            y = x.copy()
            for k in range(K):
                y = y - lr * client_grad(problem, i, y, r, k, seed, batch_size)
            delta += wi * (y - x)
        x = x + server_lr * delta
        if server_prox:
            x = prox(problem, x, server_lr * K * lr)
    return x


def _start(problem, x0):
    """The initial model: zeros, or a copy of ``x0`` (networks start from their init)."""
    return np.zeros(problem.param_shape) if x0 is None else np.array(x0, dtype=float)


def loop_fedmid(problem, rounds, lr, K, server_lr=1.0, seed=0, batch_size=None,
                clients_per_round=None, server_step=None, x0=None):
    x = _start(problem, x0)
    for r in range(rounds):
        S = sample_clients(seed, r, problem.n_clients, clients_per_round)
        w = problem.weights[S] / problem.weights[S].sum()
        avg = np.zeros_like(x)
        for wi, i in zip(w, S, strict=True):
            y = x.copy()
            for k in range(K):
                y = prox(problem, y - lr * client_grad(problem, i, y, r, k, seed, batch_size), lr)
            avg += wi * (y - x)
        x = x + server_lr * avg
        step = server_lr * K * lr if server_step is None else server_step
        if step:
            x = prox(problem, x, step)
    return x


def loop_fedda(problem, rounds, lr, K, server_lr=1.0, seed=0, batch_size=None,
               clients_per_round=None, x0=None):
    z = _start(problem, x0)
    x = z.copy()
    for r in range(rounds):
        S = sample_clients(seed, r, problem.n_clients, clients_per_round)
        w = problem.weights[S] / problem.weights[S].sum()
        avg = np.zeros_like(z)
        for wi, i in zip(w, S, strict=True):
            zi = z.copy()
            for k in range(K):
                xi = prox(problem, zi, server_lr * lr * r * K + lr * k)
                zi = zi - lr * client_grad(problem, i, xi, r, k, seed, batch_size)
            avg += wi * (zi - z)
        z = z + server_lr * avg
        x = prox(problem, z, server_lr * lr * (r + 1) * K)
    return x


def _ball(w, radius):
    """Radial projection onto the ℓ2 ball ‖w‖ ≤ radius of the whole model (none if None)."""
    return w if radius is None else w * (radius / max(np.linalg.norm(w), radius))


def loop_fast_fedda(problem, rounds, L, mu, E, weights="increasing", radius=None, seed=0,
                    batch_size=None, clients_per_round=None, x0=None):
    """Fast-FedDA (Bao et al. 2022, Algorithm 1), one client at a time.

    Every client starts round r from the server's (g, w, w̃); the global step t runs over
    rE .. (r+1)E − 1. Returns the last server model w_{t_R} and the α-weighted average
    Σ_r α_{t_r} w_{t_r} / Σ_r α_{t_r} of the round-end server models, t_r = (r+1)E.
    """
    def alpha(t):
        return t + 1.0 if weights == "increasing" else 1.0

    def prox_t(t, z):
        # argmin_{w∈W} ⟨w, z − γ_t w0⟩ + (μA_t/2 + γ_t)‖w‖²/2 + A_t h(w), completing the square
        a_t = sum(alpha(j) for j in range(t + 1))
        gamma = L * alpha(t)
        c = mu * a_t / 2 + gamma
        return _ball(prox(problem, (gamma * w0 - z) / c, a_t / c), radius)

    w0 = _start(problem, x0)
    g_srv, w_srv, wt_srv = np.zeros_like(w0), w0.copy(), alpha(0) * w0  # g_{−1}, w_0, w̃_0
    w_sum, alpha_sum = np.zeros_like(w0), 0.0
    for r in range(rounds):
        S = sample_clients(seed, r, problem.n_clients, clients_per_round)
        pi = problem.weights[S] / problem.weights[S].sum()
        g_bar, wt_bar = np.zeros_like(w0), np.zeros_like(w0)
        for pi_i, i in zip(pi, S, strict=True):
            g, w, w_tilde = g_srv.copy(), w_srv.copy(), wt_srv.copy()
            for k in range(E):
                t = r * E + k
                g = g + alpha(t) * client_grad(problem, i, w, r, k, seed, batch_size)
                if k < E - 1:
                    w = prox_t(t, g - mu * w_tilde / 2)
                    w_tilde = w_tilde + alpha(t + 1) * w
            g_bar += pi_i * g
            wt_bar += pi_i * w_tilde
        t_next = (r + 1) * E
        w_srv = prox_t(t_next - 1, g_bar - mu * wt_bar / 2)
        g_srv, wt_srv = g_bar, wt_bar + alpha(t_next) * w_srv
        w_sum += alpha(t_next) * w_srv
        alpha_sum += alpha(t_next)
    return w_srv, w_sum / alpha_sum


def loop_c_fedda(problem, rounds, radius, L, mu, E, domain_radius=None, seed=0,
                 batch_size=None, clients_per_round=None, x0=None):
    """C-FedDA (Bao et al. 2022, Algorithm 2) for h = λ‖·‖₁, one client at a time.

    Per-round weights α_r = r + 1; the exact ℓ1 CProx is the black box ``cprox_l1``.
    Returns the output Σ_r α_r w̄_{r+1} / A_R and the last server model w̄_R.
    """
    from fedcomp.algorithms._cprox import cprox_l1

    lam = problem.regularizer.alpha

    def cprox(r, z):
        # argmin_{w∈W, ‖w−w0‖₁≤ε} ⟨w, z − γ_r E w0⟩ + (μA_r/2 + γ_r)E‖w‖²/2 + A_r E λ‖w‖₁,
        # divided by E: ⟨w, b⟩ + c‖w‖²/2 + κ‖w‖₁ with b = z/E − γ_r w0
        a_r = (r + 1) * (r + 2) / 2
        gamma = (L + mu) * (r + 1)
        return cprox_l1((z / E - gamma * w0)[None], mu * a_r / 2 + gamma, a_r * lam, w0,
                        radius, domain_radius)[0]

    w0 = _start(problem, x0)
    g_srv, w_bar, w_tilde = np.zeros_like(w0), w0.copy(), w0.copy()  # w̃_0 = w̄_0 = w0
    w_sum, a_sum = np.zeros_like(w0), 0.0
    for r in range(rounds):
        S = sample_clients(seed, r, problem.n_clients, clients_per_round)
        pi = problem.weights[S] / problem.weights[S].sum()
        g_bar = np.zeros_like(w0)
        for pi_i, i in zip(pi, S, strict=True):
            g, w = g_srv.copy(), w_bar.copy()
            for k in range(E):
                g = g + (r + 1) * client_grad(problem, i, w, r, k, seed, batch_size)
                if k < E - 1:
                    w = cprox(r, g - mu * E * w_tilde / 2)
            g_bar += pi_i * g
        w_bar = cprox(r, g_bar - mu * E * w_tilde / 2)
        g_srv, w_tilde = g_bar, w_tilde + (r + 2) * w_bar
        w_sum += (r + 1) * w_bar
        a_sum += r + 1
    return w_sum / a_sum, w_bar


def loop_za1(problem, rounds, lr, K, server_lr=1.0, seed=0, batch_size=None, x0=None,
             return_corrections=False):
    n = problem.n_clients
    eta_t = lr * server_lr * K
    xbar = _start(problem, x0)
    c = np.zeros((n, *problem.param_shape))
    corrections = []
    prev_post, prev_gmean = None, None
    for r in range(rounds):
        post = prox(problem, xbar, eta_t)
        if r > 0:
            global_grad = (prev_post - xbar) / (server_lr * lr * K)
            c = global_grad[None] - prev_gmean
            corrections.append(c.copy())
        zhat_avg = np.zeros_like(xbar)
        gmean = np.zeros_like(c)
        for i in range(n):
            zh = post.copy()
            z = post.copy()
            for t in range(K):
                g = client_grad(problem, i, z, r, t, seed, batch_size)
                gmean[i] += g / K
                zh = zh - lr * (g + c[i])
                z = prox(problem, zh, (t + 1) * lr)
            zhat_avg += problem.weights[i] * zh
        xbar = post + server_lr * (zhat_avg - post)
        prev_post, prev_gmean = post, gmean
    out = prox(problem, xbar, eta_t)
    return (out, corrections) if return_corrections else out


def _sgd_prox(problem, i, v, start, eta, lr, K, r, seed, batch_size):
    """K steps of (minibatch) gradient descent on f_i(x) + ‖x − v‖²/(2η) from ``start``."""
    x = start.copy()
    for k in range(K):
        x = x - lr * (client_grad(problem, i, x, r, k, seed, batch_size) + (x - v) / eta)
    return x


def loop_feddr(problem, rounds, eta, alpha, lr, K, seed=0, batch_size=None,
               clients_per_round=None, init="paper"):
    """FedDR (Tran-Dinh et al. 2021, Algorithm 1) with K local SGD steps, one client at a time."""
    n, pi = problem.n_clients, problem.weights
    x0 = np.zeros(problem.param_shape)
    xbar = x0.copy()
    if init == "paper":  # y = x⁰, x = prox(x⁰), x̂ = 2x − y: every client, "round −1"
        y = np.array([x0 for _ in range(n)])
        x = np.array([_sgd_prox(problem, i, x0, x0, eta, lr, K, -1, seed, batch_size)
                      for i in range(n)])
        xhat = 2 * x - y
    else:  # the authors' code: y = x̂ = 0, x = x⁰
        y = np.zeros((n, *x0.shape))
        x = np.array([x0 for _ in range(n)])
        xhat = np.zeros_like(y)
    xtilde = sum(pi[i] * xhat[i] for i in range(n))
    for r in range(rounds):
        for i in sample_clients(seed, r, n, clients_per_round):
            y[i] = y[i] + alpha * (xbar - x[i])
            x[i] = _sgd_prox(problem, i, y[i], x[i], eta, lr, K, r, seed, batch_size)
            new = 2 * x[i] - y[i]
            xtilde = xtilde + pi[i] * (new - xhat[i])
            xhat[i] = new
        xbar = prox(problem, xtilde, eta)
    return xbar


def loop_fedprox(problem, rounds, mu, lr, K, seed=0, batch_size=None, clients_per_round=None,
                 server_step=None):
    """FedProx (Li et al. 2020): K SGD steps on f_i(x) + (μ/2)‖x − x̄‖² from x̄, then average."""
    x = np.zeros(problem.param_shape)
    for r in range(rounds):
        S = sample_clients(seed, r, problem.n_clients, clients_per_round)
        w = problem.weights[S] / problem.weights[S].sum()
        new = np.zeros_like(x)
        for wi, i in zip(w, S, strict=True):
            new += wi * _sgd_prox(problem, i, x, x, 1.0 / mu, lr, K, r, seed, batch_size)
        x = new if server_step is None else prox(problem, new, server_step)
    return x


def loop_fedcanon(problem, rounds, beta, K, alpha, seed=0, batch_size=None, return_c=False,
                  x0=None):
    """FedCanon Algorithm 1 / eq. (7), one client at a time (π-weighted averages)."""
    n = problem.n_clients
    z = _start(problem, x0)
    c = np.zeros((n, *problem.param_shape))
    cs = []
    for r in range(rounds):
        deltas = np.zeros_like(c)
        for i in range(n):
            x = z.copy()
            for k in range(K):
                x = x - beta * (client_grad(problem, i, x, r, k, seed, batch_size) + c[i])
            deltas[i] = (z - x) / (beta * K)
        dbar = np.tensordot(problem.weights, deltas, axes=1)
        z = prox(problem, z - alpha * dbar, alpha)
        c = c + dbar[None] - deltas
        cs.append(c.copy())
    return (z, cs) if return_c else z


def loop_scaffold(problem, rounds, lr, K, server_lr=1.0, server_prox=False, seed=0,
                  batch_size=None, clients_per_round=None):
    """SCAFFOLD option II (Karimireddy et al. 2020, Algorithm 1) with global weights π."""
    n = problem.n_clients
    x = np.zeros(problem.param_shape)
    c = np.zeros_like(x)
    ci = np.zeros((n, *problem.param_shape))
    for r in range(rounds):
        S = sample_clients(seed, r, n, clients_per_round)
        w = problem.weights[S] / problem.weights[S].sum()
        dx, dc = np.zeros_like(x), np.zeros_like(x)
        for wi, i in zip(w, S, strict=True):
            y = x.copy()
            for k in range(K):
                y = y - lr * (client_grad(problem, i, y, r, k, seed, batch_size) - ci[i] + c)
            new = ci[i] - c + (x - y) / (K * lr)
            dx += wi * (y - x)
            dc += problem.weights[i] * (new - ci[i])
            ci[i] = new
        x = x + server_lr * dx
        if server_prox:
            x = prox(problem, x, server_lr * K * lr)
        c = c + dc
    return x, c, ci


def loop_scaffnew(problem, rounds, gamma, p, seed=0, batch_size=None, server_prox=False):
    """ProxSkip (Mishchenko et al. 2022, Algorithm 1) step by step on the product space.

    The coin of step t is decided by the round's geometric length (the common coin drawn
    by fedcomp for round r), so the two runs see the same communication times.
    """
    from fedcomp.algorithms.scaffnew import steps_until_communication

    n = problem.n_clients
    x = np.zeros((n, *problem.param_shape))
    h = np.zeros_like(x)
    for r in range(rounds):
        K = steps_until_communication(seed, r, p)
        for k in range(K):
            x_hat = np.stack([x[i] - gamma * (client_grad(problem, i, x[i], r, k, seed,
                                                          batch_size) - h[i])
                              for i in range(n)])
            if k + 1 < K:  # θ_t = 0: no communication, x_{t+1} = x̂_{t+1}, h unchanged
                x = x_hat
                continue
            v = x_hat - (gamma / p) * h  # θ_t = 1: prox of (γ/p)ψ at x̂ − (γ/p)h
            avg = np.tensordot(problem.weights, v, axes=1)
            if server_prox:
                avg = prox(problem, avg, gamma / p)
            x = np.broadcast_to(avg, x.shape).copy()
            h = h + (p / gamma) * (x - x_hat)
    return x[0], h


def _dual_to_primal(z, p):
    """∇h*(z) = ‖z‖_p^{2−p} sign(z)|z|^{p−1}/(p−1), straight from the formula (moderate p)."""
    norm = np.sum(np.abs(z) ** p) ** (1.0 / p)
    if norm == 0:
        return np.zeros_like(z)
    return norm ** (2.0 - p) * np.sign(z) * np.abs(z) ** (p - 1.0) / (p - 1.0)


def _primal_to_dual(w, p):
    q = p / (p - 1.0)
    return _dual_to_primal(w, q)  # ∇h is the same map with q in place of p


def loop_dfedda(problem, mixing, rounds, lr, K, p, server_lr=1.0, tracking=True, seed=0,
                batch_size=None, radius_sq=None, restricted=False):
    """DFedDA(-GT) / DReFedDA-GT (last iterate), one node at a time (Liang et al., Alg. 1).

    The tracker starts at Σ_j u_jm ∇F_j(w_0) − ∇F_m(w_0) (gradients of the initialisation
    query, keyed by round -1 (INIT_ROUND), as the runner does); node m scales its gradient by
    n·π_m.
    """
    n, d = problem.n_clients, problem.param_shape[0]
    scale = n * problem.weights

    def grad(m, w, r, draw):
        return scale[m] * client_grad(problem, m, w, r, draw, seed, batch_size)

    def primal(z):
        w = _dual_to_primal(z, p)
        if restricted and radius_sq is not None:
            norm = np.sum(np.abs(z) ** p) ** (1.0 / p)
            w = w / max(norm / ((p - 1.0) * np.sqrt(radius_sq)), 1.0)
        return w

    w0 = np.zeros(d)
    z0 = [np.zeros(d) if restricted else _primal_to_dual(w0, p) for _ in range(n)]
    g0 = [grad(m, w0, -1, 0) for m in range(n)]  # the initialisation's round key
    c = [sum(mixing[j, m] * g0[j] for j in range(n)) - g0[m] if tracking else np.zeros(d)
         for m in range(n)]
    for r in range(rounds):
        delta = []
        for m in range(n):
            z = z0[m].copy()
            for k in range(K):
                z = z - lr * (grad(m, primal(z), r, k) + c[m])
            delta.append((z - z0[m]) / (K * lr))
        if tracking:
            c = [c[m] + delta[m] - sum(mixing[j, m] * delta[j] for j in range(n))
                 for m in range(n)]
        z0 = [sum(mixing[j, m] * (z0[j] + K * server_lr * lr * delta[j]) for j in range(n))
              for m in range(n)]
    return np.array([primal(z) for z in z0])


def loop_refedda_gt(problem, rounds, lr, K, p, radius_sq, sparsity, stage_rounds=None,
                    server_lr=1.0, seed=0, batch_size=None, clients_per_round=None):
    """(Multistep) ReFedDA-GT, one client at a time (Liang et al., Algorithms 2–3, eq. 4).

    Returns the server's output: Sparse(stage average of w_{r,0}; s) after the last round.
    """
    n, d = problem.n_clients, problem.param_shape[0]

    def primal(anchor, z, q_sq):
        w = _dual_to_primal(z, p)
        norm = np.sum(np.abs(z) ** p) ** (1.0 / p)
        if q_sq is not None:
            w = w / max(norm / ((p - 1.0) * np.sqrt(q_sq)), 1.0)
        return anchor + w

    def sparse(x):
        out = np.zeros_like(x)
        keep = np.argsort(-np.abs(x), kind="stable")[:sparsity]
        out[keep] = x[keep]
        return out

    anchor, z, c = np.zeros(d), np.zeros(d), np.zeros(d)
    c_m = np.zeros((n, d))
    stage, start, w_sum, count = 0, 0, np.zeros(d), 0
    x = sparse(anchor)
    for r in range(rounds):
        q_sq = None if radius_sq is None else radius_sq * 0.5 ** stage
        S = sample_clients(seed, r, n, clients_per_round)
        wts = problem.weights[S] / problem.weights[S].sum()
        dz_avg, dc_avg = np.zeros(d), np.zeros(d)
        for wi, i in zip(wts, S, strict=True):
            zi = z.copy()
            for k in range(K):
                g = client_grad(problem, i, primal(anchor, zi, q_sq), r, k, seed, batch_size)
                zi = zi - lr * (g - c_m[i] + c)
            dz = (zi - z) / (K * lr)
            new = c_m[i] - c - dz
            dz_avg += wi * dz
            dc_avg += wi * (new - c_m[i])
            c_m[i] = new
        w_sum += primal(anchor, z, q_sq)
        count += 1
        c = c + dc_avg
        z = z + K * server_lr * lr * dz_avg
        x = sparse(w_sum / count)
        if stage_rounds is not None and r + 1 - start == stage_rounds:  # restart
            anchor, z, c, c_m = x, np.zeros(d), np.zeros(d), np.zeros((n, d))
            stage, start, w_sum, count = stage + 1, r + 1, np.zeros(d), 0
    return x
