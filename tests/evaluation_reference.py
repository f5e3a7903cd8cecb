"""The re-id protocol in plain NumPy, the reference the evaluation's engines are checked
against (tests/evaluation/, tests/bad_input/), and a random protocol to check them on."""

import numpy as np


def reference(dist, ql, gl, qc, gc):
    """Plain NumPy protocol: stable argsort per query, junk removed, then CMC/AP/INP."""
    firsts, aps, inps = [], [], []
    for i in range(len(ql)):
        order = np.argsort(dist[i], kind="stable")
        lab, cam = gl[order], gc[order]
        junk = ((lab == ql[i]) & (cam == qc[i])) | (lab == -1)
        pos = np.flatnonzero(lab[~junk] == ql[i]) + 1
        if len(pos) == 0:
            continue
        firsts.append(pos[0])
        aps.append(np.mean(np.arange(1, len(pos) + 1) / pos))
        inps.append(len(pos) / pos[-1])
    firsts = np.array(firsts)
    g = int(np.sum(gl != -1))  # label -1 is removed for every query: not part of G
    cmc = np.array([100.0 * np.mean(firsts <= r) for r in range(1, g + 1)])
    return {
        "cmc": cmc,
        "rank1": cmc[0],
        "rank5": cmc[min(5, g) - 1],
        "mAP": 100.0 * np.mean(aps),
        "mINP": 100.0 * np.mean(inps),
        "AUC": cmc.mean(),
        "AUC_top30": auc_top30_by_hand(cmc),
        "num_valid": len(firsts),
        "num_skipped": len(ql) - len(firsts),
    }


def auc_top30_by_hand(cmc):
    """trapz(CMC(1..30)) / 30 by a loop over the 29 unit intervals, CMC(G) beyond G."""
    at = [cmc[min(r, len(cmc)) - 1] for r in range(1, 31)]
    return sum((at[i] + at[i + 1]) / 2 for i in range(29)) / 30


def assert_matches_reference(res, ref):
    np.testing.assert_allclose(res["cmc"], ref["cmc"], rtol=1e-6, atol=1e-9)
    for key in ("rank1", "rank5", "mAP", "mINP", "AUC", "AUC_top30"):
        np.testing.assert_allclose(res[key], ref[key], rtol=1e-6, err_msg=key)
    assert res["num_valid"] == ref["num_valid"]
    assert res["num_skipped"] == ref["num_skipped"]


def random_protocol(rng, nq=31, ng=57, ids=8, cams=3):
    ql = rng.integers(1, ids + 3, nq)  # ids above `ids` have no gallery image: skipped
    gl = rng.integers(-1, ids + 1, ng)  # includes -1 (junk) and 0 (distractors)
    return ql, gl, rng.integers(1, cams + 1, nq), rng.integers(1, cams + 1, ng)
