"""Exact next-token probabilities for checking the server's sampling and logprobs from the outside.

The raw logits come from `tachyon logits` (the same forward pass, no sampler); everything after that is
numpy written from the sampler's documented contract (src/sampling/sampling.h): penalties (none here) →
top-k → softmax at temperature → top-p (the shortest prefix, by probability, whose mass reaches top_p) →
min-p (keep weights >= min_p x the largest weight) → renormalise. logprobs are log-softmax of the raw logits.
"""
import math
import os
import subprocess
import tempfile

import numpy as np

from conftest import BIN


def logits(model, ids, n_vocab=None):
    """Raw logits (len(ids), vocab) as float64, from `tachyon logits`."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "l.f32")
        p = subprocess.run([BIN, "logits", "-m", model, "--ids", ",".join(map(str, ids)), "-o", out],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        a = np.fromfile(out, dtype=np.float32).astype(np.float64)
    return a.reshape(len(ids), -1)


def log_softmax(x):
    m = x.max()
    return x - (m + np.log(np.exp(x - m).sum()))


def filtered_probs(row, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0):
    """The distribution the sampler draws from for one logits row (vocab,), float64."""
    n = len(row)
    order = sorted(range(n), key=lambda i: (-row[i], i))  # value desc, id asc (the sampler's tie order)
    if 0 < top_k < n:
        order = order[:top_k]
    v = np.array([row[i] for i in order])
    w = np.exp((v - v[0]) / temperature)  # the max has weight 1
    keep = len(order)
    if top_p < 1.0:
        cum = np.cumsum(w)
        keep = int(np.searchsorted(cum, top_p * w.sum(), side="left")) + 1
        keep = min(keep, len(order))
    if min_p > 0.0:
        keep = min(keep, int((w >= min_p).sum()))
    p = np.zeros(n)
    p[order[:keep]] = w[:keep] / w[:keep].sum()
    return p


def _gammq(a, x):
    """Regularised upper incomplete gamma Q(a, x) (Numerical Recipes: series below a+1, continued fraction above)."""
    if x <= 0:
        return 1.0
    gln = math.lgamma(a)
    if x < a + 1:
        ap, s, d = a, 1.0 / a, 1.0 / a
        for _ in range(1000):
            ap += 1
            d *= x / ap
            s += d
            if abs(d) < abs(s) * 1e-15:
                break
        return 1.0 - s * math.exp(-x + a * math.log(x) - gln)
    b, c, d = x + 1 - a, 1e300, 1.0 / (x + 1 - a)
    h = d
    for i in range(1, 1000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - gln) * h


def chi_square(counts, probs, min_expected=5.0):
    """Pearson chi-square of observed counts (dict id -> n) against probs (vocab,); categories whose expected
    count is below min_expected are pooled into one. Returns (statistic, degrees of freedom, p-value)."""
    total = sum(counts.values())
    obs, exp, pool_o, pool_e = [], [], 0.0, 0.0
    for i in np.nonzero(probs)[0]:
        e = probs[i] * total
        if e >= min_expected:
            obs.append(counts.get(int(i), 0))
            exp.append(e)
        else:
            pool_o += counts.get(int(i), 0)
            pool_e += e
    if pool_e > 0:
        obs.append(pool_o)
        exp.append(pool_e)
    obs, exp = np.array(obs, float), np.array(exp, float)
    stat = float(((obs - exp) ** 2 / exp).sum())
    dof = len(obs) - 1
    return stat, dof, (_gammq(dof / 2.0, stat / 2.0) if dof > 0 else 1.0)
