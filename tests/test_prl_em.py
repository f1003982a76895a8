"""Probabilistic record linkage, the EM fit (sdcdist/linkage/prl/em.py; its identification
check: sdcdist/linkage/prl/identification.py): latent models
recovered, the constrained M-step, SQUAREM vs plain EM vs an independent numpy EM, the
log-likelihood, a capped fit flagged."""

import importlib
import itertools

import numpy as np
import pytest

from sdcdist.linkage import prl
from sdcdist.linkage.prl import PRLSettings, probabilistic_linkage
from sdcdist.linkage.prl.em import _constrained_levels, group_tables
from sdcdist.linkage.prl.estep import _estep
from sdcdist.linkage.prl.identification import FLAT_RATIO
from sdcdist.masking import REGISTRY as MASKING
from sdcdist.metrics import measure
from sdcdist.parallel import Runner


def _settings(**options):
    """PRL settings from registry options named without ``prl_`` (``em`` is ``prl_em``)."""
    return PRLSettings.from_options({"prl_" + k: v for k, v in options.items()})


def _pattern_levels(cmp, codes=None):
    """Level of each column in each pattern code (every code by default), decoded digit by
    digit from the mixed radix."""
    codes = np.arange(cmp.n_patterns) if codes is None else np.asarray(codes, dtype=np.int64)
    out = np.empty((codes.size, len(cmp.levels)), dtype=np.int64)
    rest = codes.copy()
    for k, nl in enumerate(cmp.n_levels.tolist()):
        out[:, k] = rest % nl
        rest //= nl
    return out


@pytest.mark.parametrize("levels", [1, 3])
def test_em_recovers_latent_model(levels):
    """Pattern counts drawn from known m, u, P(M) (binary or 3-level comparisons)."""
    rng = np.random.default_rng(3)
    cmp = prl.comparison(8, t=0.05 if levels == 1 else tuple(0.05 * np.arange(1, levels)))
    if levels == 1:
        m0 = np.array([0.95, 0.9, 0.85, 0.8, 0.9, 0.95, 0.85, 0.9])
        u0 = np.array([0.05, 0.1, 0.02, 0.2, 0.3, 0.1, 0.15, 0.05])
        m, u = np.column_stack([m0, 1 - m0]), np.column_stack([u0, 1 - u0])
    else:
        m = np.array([[.9, .07, .03], [.85, .1, .05], [.8, .12, .08], [.9, .05, .05],
                      [.75, .15, .1], [.9, .05, .05], [.85, .1, .05], [.8, .15, .05]])
        u = np.array([[.05, .15, .8], [.1, .2, .7], [.02, .08, .9], [.2, .3, .5],
                      [.3, .3, .4], [.1, .1, .8], [.15, .25, .6], [.05, .2, .75]])
    n = 10_000                                      # two files of n records: N = n^2 pairs
    pM, N = 0.8 / n, n * n                          # 8000 matches (P(M) <= min(n, n) / N)
    lev = _pattern_levels(cmp)
    pm = np.prod([m[k][lev[:, k]] for k in range(8)], axis=0)
    pu = np.prod([u[k][lev[:, k]] for k in range(8)], axis=0)
    counts = rng.multinomial(N, pM * pm + (1 - pM) * pu)
    fit = prl.em(counts, cmp, p_start=1 / n, p_max=1 / n)
    assert fit.converged and fit.iterations > 2
    np.testing.assert_allclose(np.array(fit.m), m, atol=0.02)
    np.testing.assert_allclose(np.array(fit.u), u, atol=0.001)
    assert fit.p == pytest.approx(pM, rel=0.05)
    hist = np.array(fit.history)                    # NaN where SQUAREM skips the value
    hist = hist[~np.isnan(hist)]
    assert np.all(np.diff(hist) >= -1e-6 * abs(hist[-1]))  # EM never goes down


def test_em_guards_keep_weights_finite():
    cmp = prl.comparison(2, t=0.05)
    counts = np.array([10, 0, 0, 10_000])         # perfect separation: m, u hit 0/1
    fit = prl.em(counts, cmp, p_start=0.001)
    wp = prl.weight_params(fit, cmp)
    assert np.all(np.isfinite(wp.w_agr)) and np.all(np.isfinite(wp.w_dis))
    assert fit.clipped > 0 and 0 < fit.p < 1


def _numpy_constrained_mstep(a, b):
    """max sum a ln m + sum b ln u s.t. cumsum(m) >= cumsum(u) below the last level, by
    brute force over the sets of cuts where the constraint holds with equality: such
    cuts tie m's and u's mass on each piece, which then splits in proportion to a and b."""
    L = a.size
    best, arg = -np.inf, None
    for mask in itertools.product([False, True], repeat=L - 1):
        seg = np.concatenate([[0], np.cumsum(mask)])           # piece of each level
        As, Bs = np.bincount(seg, a), np.bincount(seg, b)
        w = (As + Bs) / (a.sum() + b.sum())
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.where(As[seg] > 0, w[seg] * a / As[seg], w[seg] * b / Bs[seg])
            u = np.where(Bs[seg] > 0, w[seg] * b / Bs[seg], m)
        m, u = np.nan_to_num(m), np.nan_to_num(u)
        if np.any(np.cumsum(m)[:-1] < np.cumsum(u)[:-1] - 1e-13):
            continue
        with np.errstate(divide="ignore"):
            f = np.sum(a[a > 0] * np.log(m[a > 0])) + np.sum(b[b > 0] * np.log(u[b > 0]))
        if f > best:
            best, arg = f, (m, u)
    return arg


def _numpy_em(codes, counts, nl, radix, p_start, p_max, m_start=0.9, eps=1e-9, tol=1e-10,
              max_iter=20000):
    """Winkler's constrained EM written independently, vectorised numpy (CATALOG.md):
    P(M) <= p_max; per column, cumulative agreement m >= u at every tolerance (the
    constrained maximum of the M-step when the plain one violates it); probabilities
    clipped to [eps, 1 - eps] and renormalised; stop when no parameter's logarithm moves
    by tol or more."""
    c = counts.astype(float)
    N = c.sum()
    K = len(nl)
    lev = (codes[:, None] // radix[None, :]) % nl[None, :]
    onehot = [np.eye(nl[k])[lev[:, k]] for k in range(K)]          # (P, L_k)

    def clip(x):
        y = np.clip(x, eps, 1 - eps)
        return y / y.sum()

    freq = [c @ onehot[k] / N for k in range(K)]
    u = [clip(f) for f in freq]
    m = []
    for k in range(K):                   # m_start on the closest level that occurs
        mk = np.full(nl[k], (1 - m_start) / (nl[k] - 1))
        mk[np.argmax(freq[k] > 0)] = m_start
        m.append(mk)
    p = min(p_start, p_max)
    for it in range(1, max_iter + 1):
        a = np.log(p) + sum(onehot[k] @ np.log(m[k]) for k in range(K))
        b = np.log1p(-p) + sum(onehot[k] @ np.log(u[k]) for k in range(K))
        g = 1 / (1 + np.exp(b - a))
        cm, cu = c * g, c * (1 - g)
        new_p = min(max(cm.sum() / N, 1 / N), p_max)
        new_m, new_u = [], []
        for k in range(K):
            bm, bu = cm @ onehot[k], cu @ onehot[k]
            fm, fu = bm / cm.sum(), bu / cu.sum()
            if np.any(np.cumsum(fm)[:-1] < np.cumsum(fu)[:-1]):
                fm, fu = _numpy_constrained_mstep(bm, bu)
            new_m.append(clip(fm))
            new_u.append(clip(fu))
        change = max([abs(np.log(new_p) - np.log(p))]
                     + [np.abs(np.log(x) - np.log(y)).max() for x, y in zip(new_m, m)]
                     + [np.abs(np.log(x) - np.log(y)).max() for x, y in zip(new_u, u)])
        p, m, u = new_p, new_m, new_u
        if change < tol:
            return m, u, p, it, True
    return m, u, p, max_iter, False


@pytest.mark.parametrize("method,levels", [("l", 0.05), ("l", (0.02, 0.1, 0.4)),
                                           ("s", (0.0, 0.1, 0.25, 0.5, 1.0))])
def test_constrained_em_equals_independent_numpy(census, method, levels):
    """Census with additive noise (variance 0.1 var, seed 1): m, u and P(M) to 1e-8."""
    X = census.values[:, :7].astype(float)
    Y = MASKING["noise"](X, np.sqrt(0.1), rng=np.random.default_rng(1))
    cmp = prl.comparison(7, method=method, t=levels)
    a = prl.prepare_side(X, tuple(range(7)), cmp, side="a")
    b = prl.prepare_side(Y, tuple(range(7)), cmp, side="b")
    codes, counts = prl.pattern_counts(a, b, cmp)
    n = X.shape[0]
    cap = n / (n * n)
    fit = prl.em((codes, counts), cmp, p_start=cap, p_max=cap)           # SQUAREM
    plain = prl.em((codes, counts), cmp, p_start=cap, p_max=cap, accelerate=False)
    m, u, p, it, ok = _numpy_em(codes, counts, cmp.n_levels, cmp.radix, cap, cap)
    assert fit.converged and plain.converged and ok and abs(plain.iterations - it) <= 1
    assert plain.iterations > 5 and fit.iterations <= plain.iterations
    for f in (fit, plain):
        assert abs(f.p - p) < 1e-8 and f.p <= cap
        for k in range(7):
            np.testing.assert_allclose(f.m[k], m[k], rtol=0, atol=1e-8)
            np.testing.assert_allclose(f.u[k], u[k], rtol=0, atol=1e-8)
            assert np.all(np.cumsum(f.m[k])[:-1] >= np.cumsum(f.u[k])[:-1] - 1e-12)
    assert np.all(np.diff(plain.history) >= -1e-9 * abs(plain.history[-1]))
    assert fit.loglik >= np.nanmax(fit.history) - 1e-9 * abs(fit.loglik)
    # plain EM records every step's log-likelihood; SQUAREM skips those it has no use
    # for (the start of each cycle), and records at least the second step of each
    assert not np.any(np.isnan(plain.history))
    assert 0 < np.isnan(fit.history).sum() <= (fit.iterations + 2) // 3 * 2


@pytest.mark.parametrize("p_noise", [0.4, 0.5])
def test_em_modes_reach_the_same_fixed_point_of_the_weights(census, p_noise):
    """Census with noise, 4 keys: the weights are logarithms, so the EM stops on the change
    of the parameters' logarithms; an absolute test let SQUAREM stop while a probability
    near the 1e-9 floor still moved (level weights 1.3 and 0.8 away from plain EM's)."""
    X = census.values[:, :4].astype(float)
    Y = MASKING["noise"](X, p_noise, rng=np.random.default_rng(1))
    cmp = prl.comparison(4)
    a = prl.prepare_side(X, tuple(range(4)), cmp, side="a")
    b = prl.prepare_side(Y, tuple(range(4)), cmp, side="b")
    counts = prl.pattern_counts(a, b, cmp)
    cap = 1.0 / X.shape[0]
    fast = prl.em(counts, cmp, p_start=cap, p_max=cap)
    plain = prl.em(counts, cmp, p_start=cap, p_max=cap, accelerate=False)
    assert fast.converged and plain.converged and fast.iterations < plain.iterations
    assert abs(np.log(fast.p) - np.log(plain.p)) < 1e-6
    for f, g in zip(prl.weight_params(fast, cmp).w_level, prl.weight_params(plain, cmp).w_level):
        np.testing.assert_allclose(f, g, rtol=0, atol=1e-6)
    for k in range(4):
        np.testing.assert_allclose(np.log(fast.m[k]), np.log(plain.m[k]), rtol=0, atol=1e-6)
        np.testing.assert_allclose(np.log(fast.u[k]), np.log(plain.u[k]), rtol=0, atol=1e-6)


def _latent_counts(seed, K=7, n=1000):
    """Sparse pattern counts of n x n pairs from a known 5-level model on K columns."""
    rng = np.random.default_rng(seed)
    cmp = prl.comparison(K, t=(0.1, 0.25, 0.5, 1.0), method="s")
    m = rng.dirichlet([8, 3, 2, 1, 1], K)
    u = rng.dirichlet([1, 2, 3, 5, 20], K)
    n_m = n                                         # one match per record
    lev_m = np.stack([rng.choice(5, n_m, p=m[k]) for k in range(K)], axis=1)
    lev_u = np.stack([rng.choice(5, n * n - n_m, p=u[k]) for k in range(K)], axis=1)
    codes = np.concatenate([lev_m, lev_u]) @ cmp.radix
    uniq, counts = np.unique(codes, return_counts=True)
    return cmp, (uniq, counts), 1.0 / n


@pytest.mark.parametrize("fix_u", [False, True])
def test_squarem_reaches_the_plain_em_fixed_point(fix_u):
    """SQUAREM stops on the same rule (a plain EM step moves nothing by 1e-10) at the same
    fixed point as plain EM, with fewer EM-map evaluations, and is deterministic."""
    cmp, counts, cap = _latent_counts(5)
    kw = dict(p_start=cap, p_max=cap, fix_u=fix_u)
    fast = prl.em(counts, cmp, **kw)
    plain = prl.em(counts, cmp, accelerate=False, **kw)
    assert fast.converged and plain.converged
    assert fast.iterations < plain.iterations and len(fast.history) == fast.iterations
    assert abs(fast.p - plain.p) < 1e-8
    for k in range(len(fast.m)):
        np.testing.assert_allclose(fast.m[k], plain.m[k], rtol=0, atol=1e-8)
        np.testing.assert_allclose(fast.u[k], plain.u[k], rtol=0, atol=1e-8)
    assert fast.loglik >= plain.loglik - 1e-10 * abs(plain.loglik)
    # at the same budget of EM-map evaluations the accelerated fit is at least as likely
    budget = prl.em(counts, cmp, accelerate=False, max_iter=fast.iterations, **kw)
    assert not budget.converged and fast.loglik >= budget.loglik
    # bit-identical across calls
    again = prl.em(counts, cmp, **kw)
    assert again.p == fast.p
    np.testing.assert_array_equal(again.history, fast.history)
    for k in range(len(fast.m)):
        np.testing.assert_array_equal(again.m[k], fast.m[k])
        np.testing.assert_array_equal(again.u[k], fast.u[k])


def test_em_log_likelihood_matches_direct_evaluation():
    """The E-step's log-likelihood (products of odds, softplus) equals the mixture
    likelihood summed directly, also where odds leave the double range."""
    cmp, (codes, counts), cap = _latent_counts(7, K=6, n=400)
    fit = prl.em((codes, counts), cmp, p_start=cap, p_max=cap, max_iter=7)
    lev = _pattern_levels(cmp, codes)
    lm = np.log(fit.p) + sum(np.log(fit.m[k])[lev[:, k]] for k in range(6))
    lu = np.log1p(-fit.p) + sum(np.log(fit.u[k])[lev[:, k]] for k in range(6))
    assert fit.loglik == pytest.approx(float(np.dot(counts, np.logaddexp(lm, lu))), rel=1e-12)
    # odds beyond the double range (m/u = 1e200 per column): the E-step goes through logs
    K = 3
    cmp3 = prl.comparison(K, t=(0.1, 0.5))
    codes3 = np.arange(cmp3.n_patterns)
    c3 = np.arange(1, codes3.size + 1, dtype=float)
    lev3 = _pattern_levels(cmp3, codes3)
    m = np.tile([1 - 2e-200, 1e-200, 1e-200], (K, 1))
    u = np.tile([1e-200, 0.5, 0.5 - 1e-200], (K, 1))
    T = np.stack([np.bincount(lev3[:, k], weights=c3, minlength=3) for k in range(K)])
    idx, clev = group_tables(codes3, cmp3.n_levels, cmp3.radix)
    J = clev.shape[0]
    bm = np.zeros((K, 3))
    sm, ll = _estep(idx, c3, clev, cmp3.n_levels, m, u, 0.01, T, c3.sum(), bm,
                        np.zeros((K, 3)), np.zeros(J), np.zeros(J), np.zeros(J))
    lm = np.log(0.01) + sum(np.log(m[k])[lev3[:, k]] for k in range(K))
    lu = np.log(0.99) + sum(np.log(u[k])[lev3[:, k]] for k in range(K))
    g = 1 / (1 + np.exp(lu - lm))
    assert ll == pytest.approx(float(np.dot(c3, np.logaddexp(lm, lu))), rel=1e-12)
    assert sm == pytest.approx(float(np.dot(c3, g)), rel=1e-12)
    for k in range(K):
        np.testing.assert_allclose(bm[k], np.bincount(lev3[:, k], weights=c3 * g, minlength=3),
                                   rtol=1e-12)


def test_a_deferred_log_likelihood_is_the_same_float(census):
    """The log-likelihood at the end point left to EMResult.settle (as the linkage does,
    which runs it beside the assignment, its E-step threads gone) is the float an
    immediate fit gives, and the one the linkage reports."""
    from sdcdist.parallel import thread_pool
    X = census.values[:, :6].astype(float)
    Y = MASKING["noise"](X, 0.4, rng=np.random.default_rng(3))
    n = X.shape[0]
    res = probabilistic_linkage(Runner(), X, Y, n, n, tuple(range(6)))
    cmp = prl.comparison(6, PRLSettings.from_options({}))
    cap = 1.0 / n
    now = prl.em(res.counts, cmp, p_start=cap, p_max=cap)
    with thread_pool(2) as pmap:
        later = prl.em(res.counts, cmp, p_start=cap, p_max=cap, pmap=pmap, defer_loglik=True)
    assert np.isnan(later.loglik) and later.pending is not None
    later.settle()
    assert later.loglik == now.loglik == res.info["em_loglik"] == res.fit.loglik
    assert later.pending is None


def test_capped_em_is_flagged(census, tmp_path):
    X = census.values[:300, :5].astype(float)
    Y = MASKING["noise"](X, np.sqrt(0.1), rng=np.random.default_rng(1))
    ok = probabilistic_linkage(Runner(), X, Y, 300, 300, tuple(range(5)))
    assert ok.fit.converged and ok.flag == 0 and ok.info["em_converged"]
    capped = probabilistic_linkage(Runner(), X, Y, 300, 300, tuple(range(5)),
                                   settings=_settings(em={"max_iter": 3}))
    assert not capped.fit.converged and capped.fit.iterations == 3 and capped.flag == 1
    cols = [f"V{i}" for i in range(5)]
    r = measure(X, Y, ["PLD"], columns=cols, keysets=[cols],
                options={"prl_em": {"max_iter": 3}})
    assert r["PLD"].flag == 1 and r["PLD"].info["per_keyset_info"][0]["em_converged"] is False
    import pandas as pd
    from click.testing import CliRunner

    from sdcdist.cli import main
    pd.DataFrame(X, columns=cols).to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame(Y, columns=cols).to_csv(tmp_path / "b.csv", index=False)
    res = CliRunner().invoke(main, ["link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                    "--keys", ",".join(cols), "--em", "{max_iter: 3}",
                                    "--out", str(tmp_path / "p.parquet"), "--local"])
    assert res.exit_code == 0, res.output
    assert "EM did not converge within 3 iterations" in res.output
    # the former flag names its replacement
    res = CliRunner().invoke(main, ["link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                    "--keys", ",".join(cols), "--em-max-iter", "3",
                                    "--out", str(tmp_path / "q.parquet"), "--local"])
    assert res.exit_code == 2 and "--em '{max_iter: N}'" in res.output
    assert not (tmp_path / "q.parquet").exists()


def test_constrained_mstep_is_the_exact_constrained_maximum(rng):
    """The M-step of a column under cumulative m >= u is the constrained maximum of the
    expected complete-data log-likelihood (checked against SLSQP), the plain one when
    that is feasible, and the pooled frequencies only when every cut is active."""
    from scipy.optimize import minimize
    for trial in range(12):
        L = int(rng.integers(2, 6))
        a = rng.gamma(1.0, 1.0, L) * 50
        b = rng.gamma(1.0, 1.0, L) * 5000
        if trial % 3 == 0:
            a = a[::-1].copy()               # matches at the far levels: violated
        m, u = np.zeros(L), np.zeros(L)
        t = a + b
        active = _constrained_levels(a, b, L, m, u, a.sum(), b.sum(), t, t.sum())
        assert np.isclose(m.sum(), 1) and np.isclose(u.sum(), 1)
        assert np.all(np.cumsum(m)[:-1] >= np.cumsum(u)[:-1] - 1e-12)
        ref = _numpy_constrained_mstep(a, b)
        if not active:
            assert ref is not None
        if np.all(np.cumsum(a / a.sum())[:-1] >= np.cumsum(b / b.sum())[:-1]):
            assert not active
            np.testing.assert_allclose(m, a / a.sum(), rtol=1e-12)
            continue
        assert active
        np.testing.assert_allclose(m, ref[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(u, ref[1], rtol=0, atol=1e-12)

        def f(x):
            return -(a @ np.log(x[:L]) + b @ np.log(x[L:])) / (a.sum() + b.sum())
        cons = [{"type": "eq", "fun": lambda x: x[:L].sum() - 1},
                {"type": "eq", "fun": lambda x: x[L:].sum() - 1},
                {"type": "ineq", "fun": lambda x: np.cumsum(x[:L] - x[L:])[:-1]}]
        x0 = np.r_[t, t] / t.sum()
        opt = minimize(f, x0, constraints=cons, bounds=[(1e-12, 1)] * (2 * L), method="SLSQP",
                       options={"ftol": 1e-14, "maxiter": 500})
        assert f(np.r_[m, u]) <= opt.fun + 1e-9                # at least as good as SLSQP
        np.testing.assert_allclose(np.r_[m, u], opt.x, atol=1e-4)


def test_em_with_a_partly_active_constraint_converges_to_one_fixed_point():
    """A column whose matches sit at its second level violates m >= u at the first cut
    only: the EM keeps that cut active (m and u tie there) and the other levels free;
    plain EM, SQUAREM and the numpy reference reach the same point (all-or-nothing
    pooling of such a column made plain EM cycle on large files)."""
    rng = np.random.default_rng(11)
    K, n = 6, 800
    cmp = prl.comparison(K, t=(0.1, 0.25, 0.5, 1.0), method="s")
    m = rng.dirichlet([8, 3, 2, 1, 1], K)
    u = rng.dirichlet([1, 2, 3, 5, 20], K)
    m[0] = [0.02, 0.7, 0.15, 0.08, 0.05]
    u[0] = [0.1, 0.1, 0.2, 0.3, 0.3]
    lev_m = np.stack([rng.choice(5, n, p=m[k]) for k in range(K)], axis=1)
    lev_u = np.stack([rng.choice(5, n * n - n, p=u[k]) for k in range(K)], axis=1)
    codes, counts = np.unique(np.concatenate([lev_m, lev_u]) @ cmp.radix, return_counts=True)
    cap = 1.0 / n
    fast = prl.em((codes, counts), cmp, p_start=cap, p_max=cap)
    plain = prl.em((codes, counts), cmp, p_start=cap, p_max=cap, accelerate=False)
    rm, ru, rp, it, ok = _numpy_em(codes, counts, cmp.n_levels, cmp.radix, cap, cap)
    assert fast.converged and plain.converged and ok and fast.constrained > 0
    assert fast.iterations < plain.iterations
    for f in (fast, plain):
        assert abs(f.p - rp) < 1e-8
        for k in range(K):
            np.testing.assert_allclose(f.m[k], rm[k], rtol=0, atol=1e-8)
            np.testing.assert_allclose(f.u[k], ru[k], rtol=0, atol=1e-8)
    cm, cu = np.cumsum(fast.m[0])[:-1], np.cumsum(fast.u[0])[:-1]
    assert abs(cm[0] - cu[0]) < 1e-8 and np.all(cm[1:] > cu[1:] + 1e-3)


def _estep_case(rng, cmp, codes, extreme):
    """Counts, group tables, level totals and a model (m, u of 6 levels a column) for the
    E-step tests; with ``extreme`` two columns whose odds leave the double range."""
    K = len(cmp.n_levels)
    c = rng.integers(1, 1000, codes.size).astype(float)
    idx, clev = group_tables(codes, cmp.n_levels, cmp.radix)
    lev = _pattern_levels(cmp, codes)
    T = np.stack([np.bincount(lev[:, k], weights=c, minlength=6) for k in range(K)])
    m = rng.dirichlet(np.r_[40.0, 20, 8, 4, 2, 1], size=K)
    u = rng.dirichlet(np.r_[1.0, 2, 4, 8, 16, 60], size=K)
    if extreme:                                    # odds beyond the double range
        m[:2] = [1 - 5e-200, 1e-200, 1e-200, 1e-200, 1e-200, 1e-200]
        u[:2] = [1e-200, 0.2, 0.2, 0.2, 0.2, 0.2 - 1e-200]
    return c, idx, clev, T, m, u


@pytest.mark.parametrize("extreme", [False, True])
def test_estep_two_groups_equals_the_general_loop(extreme):
    """The E-step's loop for two column groups (the default comparison: 8 columns of 6
    levels) keeps a group's sum in a register; it gives the same floats as the general
    loop, run here on the same tables with a third group of one neutral row (ratio 1,
    log-ratio 0: exact), for every branch of the softplus (series, log1p, logs)."""
    rng = np.random.default_rng(11)
    K = 8
    cmp = prl.comparison(K)                        # default: 6 levels per column
    codes = np.unique(rng.integers(0, cmp.n_patterns, 40_000))
    c, idx, clev, T, m, u = _estep_case(rng, cmp, codes, extreme)
    assert idx.shape[1] == 2
    J = clev.shape[0]
    idx3 = np.column_stack([idx, np.full(codes.size, J, dtype=idx.dtype)])
    clev3 = np.vstack([clev, np.full((1, K), -1, dtype=clev.dtype)])
    outs = []
    for ix, cl in ((idx, clev), (idx3, clev3)):
        j = cl.shape[0]
        bm, S = np.zeros((K, 6)), np.zeros(j)
        sm, ll = _estep(ix, c, cl, cmp.n_levels, m, u, 0.01, T, c.sum(), bm,
                        np.zeros((K, 6)), np.zeros(j), np.zeros(j), S)
        outs.append((sm, ll, bm, S[:J]))
    (sm2, ll2, bm2, S2), (sm3, ll3, bm3, S3) = outs
    assert sm2 == sm3 and ll2 == ll3
    assert bm2.tobytes() == bm3.tobytes() and S2.tobytes() == S3.tobytes()


@pytest.mark.parametrize("extreme", [False, True])
def test_estep_by_runs_equals_the_loop(extreme):
    """The E-step by runs of one group-1 row, whose softplus terms are computed a chunk at
    a time in a vectorised pass (_estep_runs, the EM's E-step for two column groups), gives
    the same floats bit for bit as _estep's loop: runs longer than a chunk, short runs,
    every branch of the softplus (series, log1p, logs)."""
    from sdcdist.linkage.prl.estep import ESTEP_CHUNK, estep_runs
    from sdcdist.linkage.prl.estep import estep as _estep_any
    rng = np.random.default_rng(12)
    K = 8
    cmp = prl.comparison(K)
    # the first group-1 rows complete (runs of 6^5 patterns: several chunks), then sparse
    codes = np.unique(np.r_[np.arange(3 * 6**5), rng.integers(0, cmp.n_patterns, 30_000)])
    c, idx, clev, T, m, u = _estep_case(rng, cmp, codes, extreme)
    runs = estep_runs(idx, clev.shape[0])
    assert idx.shape[1] == 2 and np.diff(runs[1]).max() > 2 * ESTEP_CHUNK
    J = clev.shape[0]
    outs = []
    for tables in (estep_runs(idx[:, :1], J), runs):   # empty tables: _estep's loop
        bm, S = np.zeros((K, 6)), np.zeros(J)
        sm, ll = _estep_any(idx, c, clev, cmp.n_levels, m, u, 0.003, T, c.sum(), bm,
                            np.zeros((K, 6)), np.zeros(J), np.zeros(J), S, tables)
        outs.append((sm, ll, bm, S))
    (sm0, ll0, bm0, S0), (sm1, ll1, bm1, S1) = outs
    assert sm0 == sm1 and ll0 == ll1
    assert bm0.tobytes() == bm1.tobytes() and S0.tobytes() == S1.tobytes()


def _numpy_m_only_em(levels, n_levels, p, m_start=0.9, eps=1e-9, tol=1e-10, max_iter=20000):
    """The ``m_only`` fit written out on every pair (no pattern counts): u the level
    frequencies over all pairs (clipped to [eps, 1 - eps], renormalised) and P(M) = p, both
    fixed; EM of m only (plain M-step, no m >= u constraint); m clipped and renormalised;
    stop when no log m moves by tol."""
    P, K = levels.shape
    onehot = [np.eye(n_levels[k])[levels[:, k]] for k in range(K)]        # (pairs, L_k)

    def clip(x):
        y = np.clip(x, eps, 1 - eps)
        return y / y.sum()

    freq = [oh.mean(axis=0) for oh in onehot]
    u = [clip(f) for f in freq]
    m = []
    for k in range(K):
        mk = np.full(n_levels[k], (1 - m_start) / (n_levels[k] - 1))
        mk[np.argmax(freq[k] > 0)] = m_start
        m.append(mk)
    for it in range(1, max_iter + 1):
        lm = np.log(p) + sum(onehot[k] @ np.log(m[k]) for k in range(K))
        lu = np.log1p(-p) + sum(onehot[k] @ np.log(u[k]) for k in range(K))
        g = 1 / (1 + np.exp(lu - lm))                       # P(match | pair)
        new_m = []
        for k in range(K):
            new_m.append(clip(g @ onehot[k] / g.sum()))
        change = max(np.abs(np.log(x) - np.log(y)).max() for x, y in zip(new_m, m))
        m = new_m
        if change < tol:
            return m, u, it
    raise AssertionError("the numpy m-only EM did not converge")


@pytest.mark.parametrize("weights", ["linear", "step"])
def test_m_only_fit_equals_em_written_out_on_every_pair(weights):
    """prl_em: {fit: m_only} against the EM written out over all pairs of a small file
    (levels of every pair from the CATALOG formula): u and P(M) = 1/n fixed, m to 1e-8;
    the joint fit (the default) is a different fixed point."""
    rng = np.random.default_rng(7)
    n, K = 60, 3
    X = np.round(rng.normal(size=(n, K)) * 10, 1)
    Y = X + rng.normal(size=(n, K)) * np.array([1.5, 3.0, 6.0])
    t = (0.0, 0.1, 0.25, 0.5, 1.0)
    sd = X.std(axis=0, ddof=1)
    d = np.abs(X[None, :, :] - Y[:, None, :])                       # (n_b, n_a, K)
    lev = np.zeros(d.shape, dtype=np.int64)
    for x in t:
        lev += ~(d <= x * sd)
    levels = lev.reshape(-1, K)
    runner = Runner(None)
    res = probabilistic_linkage(runner, X, Y, n, n, tuple(range(K)),
                                settings=_settings(weights=weights, em={"fit": "m_only"}))
    joint = probabilistic_linkage(runner, X, Y, n, n, tuple(range(K)),
                                  settings=_settings(weights=weights))
    m, u, it = _numpy_m_only_em(levels, [len(t) + 1] * K, 1.0 / n)
    f = res.fit
    assert f.converged and res.info["em_fit"] == "m_only" and joint.info["em_fit"] == "joint"
    assert f.p == 1.0 / n
    for k in range(K):
        np.testing.assert_allclose(f.u[k], u[k], rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(f.m[k], m[k], rtol=0, atol=1e-8)
    assert max(np.abs(f.m[k] - joint.fit.m[k]).max() for k in range(K)) > 1e-3
    plain = probabilistic_linkage(runner, X, Y, n, n, tuple(range(K)), settings=_settings(
        weights=weights, em={"fit": "m_only", "accelerate": False}))
    assert abs(plain.fit.iterations - it) <= 1
    for k in range(K):
        np.testing.assert_allclose(plain.fit.m[k], m[k], rtol=0, atol=1e-8)


def test_m_only_fit_is_refused_misspelt_and_recorded_in_conventions():
    from sdcdist.cube import conventions
    from sdcdist.errors import SdcInputError
    from sdcdist.linkage.prl import PRLSettings
    with pytest.raises(SdcInputError, match="m_only"):
        PRLSettings.from_options({"prl_em": {"fit": "m-only"}})
    assert PRLSettings.from_options({"prl_em": {"fit": "m_only"}}).em.fit == "m_only"
    assert conventions({"prl_em": {"fit": "m_only"}})["PRL_fit"].startswith("m_only: u = ")
    assert conventions({})["PRL_fit"].startswith("joint: ")


# ---- a flat likelihood is said, not hidden ---------------------------------------------

def _tie_heavy_638():
    rng = np.random.default_rng(638)
    A = rng.integers(0, 3, size=(17, 2)).astype(float)
    A[:, 0] += 10.0 * np.arange(17) % 3
    truth = rng.permutation(17)[:17]
    B = A[truth].copy()
    B[rng.random(B.shape) < 0.15] += 1.0
    return A, B, truth


def test_a_fit_the_counts_do_not_identify_is_flagged(caplog):
    """The 638 file (2 key columns: a two-class model of two indicators has more
    parameters than the counts pin down): SQUAREM and plain EM stop at different P(M) with
    the same log-likelihood; the observed information there is singular, and PLD says so
    (flag, info, warning)."""
    A, B, truth = _tie_heavy_638()
    fits = [probabilistic_linkage(Runner(), A, B, 17, 17, (0, 1), truth=truth,
                                  settings=_settings(em={"accelerate": acc}))
            for acc in (True, False)]
    (a, b) = fits
    assert abs(a.fit.p - b.fit.p) > 5e-4                       # 0.02534 against 0.02461
    assert a.fit.loglik == pytest.approx(b.fit.loglik, rel=1e-12, abs=0)
    for r in fits:
        assert r.fit.converged and not r.fit.identified
        assert r.fit.info_ratio < FLAT_RATIO
        assert r.flag == 1 and r.info["em_identified"] is False
    cols = ["x", "y"]
    with caplog.at_level("WARNING"):
        res = measure(A, B, ["PLD"], columns=cols, keysets=[cols], truth=truth)
    info = res["PLD"].info
    info = (info.get("per_keyset_info") or [info])[0]
    assert res["PLD"].flag == 1 and info["em_identified"] is False
    assert "do not identify the EM fit" in caplog.text
    from sdcdist.metrics.risk.prl import em_note
    assert "do not identify" in em_note("PLD", res["PLD"])


def test_link_says_a_fit_the_counts_do_not_identify(tmp_path):
    import pandas as pd
    from click.testing import CliRunner

    from sdcdist.cli import main
    A, B, _ = _tie_heavy_638()
    pd.DataFrame(A, columns=["x", "y"]).to_csv(tmp_path / "a.csv", index=False)
    pd.DataFrame(B, columns=["x", "y"]).to_csv(tmp_path / "b.csv", index=False)
    res = CliRunner().invoke(main, ["link", str(tmp_path / "a.csv"), str(tmp_path / "b.csv"),
                                    "--keys", "x,y", "--out", str(tmp_path / "p.parquet"),
                                    "--local"])
    assert res.exit_code == 0, res.output
    assert "do not identify the EM fit" in res.output


def test_a_well_identified_fit_is_not_flagged(census):
    """Census, 4 key columns, masked by noise: the information is far from singular
    (smallest/largest eigenvalue 7e-5)."""
    X = census.values.astype(float)
    rng = np.random.default_rng(0)
    B = X + rng.normal(size=X.shape) * X.std(0) * np.sqrt(0.1)
    r = probabilistic_linkage(Runner(), X, B, X.shape[0], X.shape[0], (0, 1, 2, 3))
    assert r.fit.identified and r.fit.info_ratio > 1e3 * FLAT_RATIO
    assert r.flag == 0 and r.info["em_identified"] is True


def test_observed_information_equals_finite_differences():
    """The exact observed information equals central differences of the log-likelihood
    in the same free coordinates, on a 3-column fit with free P(M)."""
    from sdcdist.linkage.prl.em import EMResult
    from sdcdist.linkage.prl.identification import identification
    rng = np.random.default_rng(3)
    nl = [2, 3, 2]
    # a model with every probability inside the bounds; counts from it
    m = [np.array([0.8, 0.2]), np.array([0.6, 0.3, 0.1]), np.array([0.7, 0.3])]
    u = [np.array([0.2, 0.8]), np.array([0.1, 0.3, 0.6]), np.array([0.25, 0.75])]
    p = 0.2
    codes = np.arange(12)
    lev = np.stack([codes % 2, (codes // 2) % 3, (codes // 6) % 2], axis=1)

    def ll(p, m, u, c):
        f = p * np.prod([m[k][lev[:, k]] for k in range(3)], axis=0) + \
            (1 - p) * np.prod([u[k][lev[:, k]] for k in range(3)], axis=0)
        return float(np.dot(c, np.log(f)))
    c = rng.integers(50, 500, size=12).astype(float)

    class Cmp:
        n_levels = np.array(nl)
        radix = np.array([1, 2, 6])
    fit = EMResult(m, u, p, ll(p, m, u, c), 1, True)
    out = identification((codes, c.astype(np.int64)), Cmp(), fit, eps=1e-9, p_max=0.5)
    # coordinates: logit p; per column and class, log ratios to the largest level
    def unpack(x):
        i = 1
        pp = 1 / (1 + np.exp(-x[0]))
        res = []
        for probs in (m, u):
            new = []
            for pr in probs:
                ref = int(np.argmax(pr))
                a = np.log(pr / pr[ref])
                free = [j for j in range(pr.size) if j != ref]
                a[free] = x[i:i + len(free)]
                i += len(free)
                e = np.exp(a)
                new.append(e / e.sum())
            res.append(new)
        return pp, res[0], res[1]
    x0 = [np.log(p / (1 - p))]
    for probs in (m, u):
        for pr in probs:
            ref = int(np.argmax(pr))
            x0 += [np.log(pr[j] / pr[ref]) for j in range(pr.size) if j != ref]
    x0 = np.array(x0)
    P = x0.size
    assert out["info_params"] == P
    h = 1e-4
    Hn = np.zeros((P, P))
    for i in range(P):
        for j in range(P):
            def g(di, dj):
                x = x0.copy()
                x[i] += di
                x[j] += dj
                return ll(*unpack(x), c)
            Hn[i, j] = (g(h, h) - g(h, -h) - g(-h, h) + g(-h, -h)) / (4 * h * h)
    ev = np.linalg.eigvalsh(-Hn)
    assert out["info_ratio"] == pytest.approx(ev[0] / np.max(np.abs(ev)), rel=1e-4)


@pytest.mark.parametrize("nl", [[6] * 10, [3, 6, 2, 6, 6, 4, 6, 5, 6, 6, 2, 6, 3], [4, 2]])
def test_crosstabs_by_column_groups_equal_the_one_hot_products(nl):
    """The identification check's cross tabulations, summed through the EM's column-group
    tables (one, two or three groups), equal the one-hot cross products over the
    patterns."""
    from sdcdist.linkage.prl.em import group_tables
    from sdcdist.linkage.prl.identification import _crosstabs
    rng = np.random.default_rng(5)
    nl = np.array(nl, dtype=np.int64)
    radix = np.r_[1, np.cumprod(nl)[:-1]].astype(np.int64)
    lev = np.stack([rng.integers(0, n, 4000) for n in nl], axis=1)
    lev[rng.random(lev.shape) < 0.5] = 0                  # concentrated, as real patterns
    codes = np.unique(lev @ radix)
    lev = (codes[:, None] // radix) % nl
    c = rng.integers(1, 1000, codes.size).astype(np.float64)
    w = rng.random(codes.size)
    idx, clev = group_tables(codes, nl, radix)
    L = int(nl.max())
    T = _crosstabs(idx, clev, L, c, w)
    O = np.zeros((codes.size, nl.size * L))
    for k in range(nl.size):
        O[np.arange(codes.size), k * L + lev[:, k]] = 1.0
    for i, a in enumerate((c, c * w, c * w * w)):
        ref = O.T @ (a[:, None] * O)
        np.testing.assert_allclose(T[i], ref, rtol=1e-12, atol=1e-9)


def test_em_is_the_same_bits_with_its_estep_parts_in_threads(monkeypatch):
    """The E-step's fixed parts (estep.ESTEP_PARTS) run one after the other or in a pool of
    threads: the same fit bit for bit (m, u, P(M), every log-likelihood of the history);
    and the parts' sums agree with the whole E-step's to rounding."""
    import sdcdist.linkage.prl.estep as estep_module
    from sdcdist.linkage.prl.estep import ESTEP_PARTS, EStep, estep, estep_runs
    from sdcdist.parallel import thread_pool
    rng = np.random.default_rng(8)
    K = 8
    cmp = prl.comparison(K)
    codes = np.unique(np.r_[np.arange(2 * 6**5), rng.integers(0, cmp.n_patterns, 40_000)])
    c = rng.integers(1, 500, codes.size)
    fits = []
    monkeypatch.setattr(estep_module, "ESTEP_MAP_MIN", 1)  # the map runs at this size too
    for threads in (1, 2, 3):
        with thread_pool(threads) as pmap:
            fits.append(prl.em((codes, c), cmp, p_start=1e-3, p_max=1e-3, pmap=pmap))
    for f in fits[1:]:
        assert f.p == fits[0].p and f.iterations == fits[0].iterations
        np.testing.assert_array_equal(f.history, fits[0].history)
        for k in range(K):
            assert f.m[k].tobytes() == fits[0].m[k].tobytes()
            assert f.u[k].tobytes() == fits[0].u[k].tobytes()
    idx, clev = group_tables(codes, cmp.n_levels, cmp.radix)
    J, L = clev.shape[0], 6
    E = EStep(idx, clev, c.astype(float), cmp.n_levels.astype(np.int64), np.ones((K, L)))
    assert len(E.parts) == ESTEP_PARTS
    m = np.tile(np.r_[0.5, 0.2, 0.1, 0.1, 0.05, 0.05], (K, 1))
    u = np.tile(np.r_[0.01, 0.02, 0.05, 0.1, 0.2, 0.62], (K, 1))
    bm_p, bm_w = np.zeros((K, L)), np.zeros((K, L))
    sm_p, ll_p = E(m, u, 1e-3, bm_p)
    sm_w, ll_w = estep(idx, c.astype(float), clev, cmp.n_levels.astype(np.int64), m, u, 1e-3,
                       np.ones((K, L)), float(c.sum()), bm_w, np.zeros((K, L)), np.zeros(J),
                       np.zeros(J), np.zeros(J), estep_runs(idx, J))
    assert sm_p == pytest.approx(sm_w, rel=1e-12) and ll_p == pytest.approx(ll_w, rel=1e-12)
    np.testing.assert_allclose(bm_p, bm_w, rtol=1e-12)
    # whole counts are streamed as uint32: the same bits as float64 counts, and
    # fractional counts (or 2^32 and more) stay float64
    assert E.c.dtype == np.uint32
    F = EStep(idx, clev, c.astype(float), cmp.n_levels.astype(np.int64), np.ones((K, L)))
    F.c = c.astype(float)
    bm_f = np.zeros((K, L))
    assert F(m, u, 1e-3, bm_f) == (sm_p, ll_p) and bm_f.tobytes() == bm_p.tobytes()
    for odd in (c + 0.5, c + 2.0 ** 32, c.astype(np.int64) + 2 ** 32):
        assert EStep(idx, clev, odd, cmp.n_levels.astype(np.int64),
                     np.ones((K, L))).c.dtype == np.float64
    # integer counts (as the EM passes them): the same N, stream and bits
    G = EStep(idx, clev, c.astype(np.int64), cmp.n_levels.astype(np.int64), np.ones((K, L)))
    assert G.c.dtype == np.uint32 and G.N == E.N
    bm_g = np.zeros((K, L))
    assert G(m, u, 1e-3, bm_g) == (sm_p, ll_p) and bm_g.tobytes() == bm_p.tobytes()
    # without the log-likelihood (SQUAREM's cycle starts): NaN for it and the same
    # expected counts bit for bit, also where match odds leave the double range (0, inf)
    mx, ux = m.copy(), u.copy()
    mx[:, 5], ux[:, 0] = 1e-300, 1e-300
    for mm, uu in ((m, u), (mx, ux)):
        b1, b2 = np.zeros((K, L)), np.zeros((K, L))
        s1, l1 = E(mm, uu, 1e-3, b1)
        s2, l2 = E(mm, uu, 1e-3, b2, loglik=False)
        assert s2 == s1 and np.isnan(l2) and not np.isnan(l1)
        assert b2.tobytes() == b1.tobytes()
    # the run tables (one pass) are the runs of equal group-1 rows
    i0, rstart, rrow = estep_runs(idx, J)[:3]
    i1 = idx[:, 1]
    np.testing.assert_array_equal(
        rstart, np.r_[0, np.flatnonzero(i1[1:] != i1[:-1]) + 1, i1.size])
    np.testing.assert_array_equal(rrow, i1[rstart[:-1]])
    np.testing.assert_array_equal(i0, idx[:, 0])
    assert i0.dtype == np.uint16


@pytest.mark.parametrize("nl", [[6] * 10, [2] * 20, [5, 7, 3, 11, 2, 9, 4], [6] * 15, [3]])
def test_group_tables_decode_every_code_in_any_order(nl, monkeypatch):
    """Each pattern's table rows hold its levels (one, two or more column groups, codes
    increasing, split without divisions, or in any order), the rows are the occurring
    combinations in increasing order, and the counts per table row are the patterns'."""
    from sdcdist.linkage.prl.em import group_tables
    rng = np.random.default_rng(len(nl))
    nl = np.array(nl, dtype=np.int64)
    radix = np.r_[1, np.cumprod(nl)[:-1]].astype(np.int64)
    lev = np.stack([rng.integers(0, n, 30000) for n in nl], axis=1)
    lev[rng.random(lev.shape) < 0.4] = 0
    codes = np.unique(lev @ radix)
    lev = (codes[:, None] // radix) % nl
    c = rng.integers(1, 100, codes.size).astype(np.float64)
    idx, clev, cj = group_tables(codes, nl, radix, c)
    got = np.full(lev.shape, -1)
    for g in range(idx.shape[1]):
        rows = clev[idx[:, g]]
        got = np.where(rows >= 0, rows, got)
    np.testing.assert_array_equal(got, lev)
    assert cj.tobytes() == sum(np.bincount(idx[:, g], weights=c, minlength=clev.shape[0])
                               for g in range(idx.shape[1])).tobytes()
    # whole counts as integers (the EM's; summed exactly): the same tables and counts
    i_int, cl_int, cj_int = group_tables(codes, nl, radix, c.astype(np.int64))
    np.testing.assert_array_equal(i_int, idx)
    np.testing.assert_array_equal(cl_int, clev)
    assert cj_int.dtype == np.float64 and cj_int.tobytes() == cj.tobytes()
    for g in range(idx.shape[1]):                          # rows increase within a group
        r = np.unique(idx[:, g])
        k = np.flatnonzero(clev[r[0]] >= 0)
        key = (clev[r][:, k].astype(np.int64) * radix[k]).sum(axis=1)
        assert np.all(np.diff(key) > 0)
    perm = rng.permutation(codes.size)
    i2, cl2 = group_tables(codes[perm], nl, radix)
    np.testing.assert_array_equal(cl2, clev)
    np.testing.assert_array_equal(i2, idx[perm])
    # the codes read in parts side by side (threads): the same tables and sums
    em_module = importlib.import_module("sdcdist.linkage.prl.em")
    from sdcdist.parallel import thread_pool
    monkeypatch.setattr(em_module, "GROUP_MAP_MIN", 1)
    with thread_pool(2) as pmap:
        i3, cl3, cj3 = group_tables(codes, nl, radix, c.astype(np.int64), pmap=pmap)
        i4, cl4 = group_tables(codes[perm], nl, radix, pmap=pmap)
    np.testing.assert_array_equal(i3, idx)
    np.testing.assert_array_equal(cl3, clev)
    assert cj3.tobytes() == cj.tobytes()
    np.testing.assert_array_equal(i4, idx[perm])
    np.testing.assert_array_equal(cl4, clev)


@pytest.mark.parametrize("ll", [True, False])
def test_estep_in_chunks_equals_the_general_loop_bit_for_bit(monkeypatch, ll):
    """Three column groups (13 keys, CASC Census and Tarragona): the E-step's chunks (the
    odds gathered, the softplus terms in a vectorised pass) give the general loop's floats
    bit for bit, with and without the log-likelihood, also where match odds leave the
    double range; and threads change nothing."""
    import sdcdist.linkage.prl.estep as estep_module
    from sdcdist.linkage.prl.estep import EStep
    from sdcdist.parallel import thread_pool
    rng = np.random.default_rng(7)
    K = 13
    cmp = prl.comparison(K)
    codes = np.unique(rng.integers(0, cmp.n_patterns, 60_000))
    c = rng.integers(1, 50, codes.size)
    idx, clev = group_tables(codes, cmp.n_levels, cmp.radix)
    assert idx.shape[1] == 3
    nl, L = cmp.n_levels.astype(np.int64), 6
    m = np.tile(np.r_[0.5, 0.2, 0.1, 0.1, 0.05, 0.05], (K, 1))
    u = np.tile(np.r_[0.01, 0.02, 0.05, 0.1, 0.2, 0.62], (K, 1))
    mx, ux = m.copy(), u.copy()
    mx[:, 5], ux[:, 0] = 1e-300, 1e-300              # odds 0 and inf on some patterns
    monkeypatch.setattr(estep_module, "ESTEP_MAP_MIN", 1)

    def run(pmap=None):
        out = []
        for mm, uu in ((m, u), (mx, ux)):
            E = EStep(idx, clev, c, nl, np.ones((K, L)), pmap)
            bm = np.zeros((K, L))
            sm, lk = E(mm, uu, 1e-3, bm, loglik=ll)
            out.append((sm, lk, bm.tobytes()))
        return out
    got = run()
    with thread_pool(2) as pmap:
        assert run(pmap) == got if ll else [g[::2] for g in run(pmap)] == [g[::2] for g in got]
    monkeypatch.setattr(estep_module, "_chunks_range",
                        lambda idx, c, R, LR, odds, lo, hi, S, cs, cw, ll:
                        estep_module._loop_range(idx, c, R, LR, odds, lo, hi, S))
    ref = run()
    for g, r in zip(got, ref):
        assert g[0] == r[0] and g[2] == r[2]
        assert g[1] == r[1] if ll else np.isnan(g[1])
