"""Filtered exact search: faiss IDSelectorBatch vs numpy over allowed rows, 100k x 384."""
import time, numpy as np, faiss
from citeline.store import build_faiss
n, d = 100_000, 384
rng = np.random.default_rng(0)
X = rng.standard_normal((n, d)).astype(np.float32); X /= np.linalg.norm(X, axis=1, keepdims=True)
ids = np.arange(n, dtype=np.int64) * 3 + 7
index = build_faiss(ids, X, d)
q = X[5].copy()
xb = faiss.rev_swig_ptr(faiss.downcast_index(index.index).get_xb(), n * d).reshape(n, d)
idmap = faiss.vector_to_array(index.id_map)
def sel_search(allowed, k):
    params = faiss.SearchParameters(sel=faiss.IDSelectorBatch(allowed))
    return index.search(q.reshape(1, -1), k, params=params)
def np_search(allowed, k):
    pos = np.searchsorted(idmap, allowed)
    s = xb[pos] @ q
    top = np.argpartition(-s, min(k, len(s)-1))[:k]
    return top[np.argsort(-s[top])]
def t(f, *a, r=5):
    best = 1e9
    for _ in range(r):
        t0 = time.perf_counter(); f(*a); best = min(best, time.perf_counter() - t0)
    return best * 1000
print("unfiltered faiss %.1f ms" % t(lambda: index.search(q.reshape(1, -1), 10)))
for m in (100, 1000, 10_000, 30_000, 100_000):
    allowed = np.sort(rng.choice(ids, m, replace=False))
    print(f"allowed={m:>6}: selector {t(sel_search, allowed, 10):7.1f} ms   numpy {t(np_search, allowed, 10):7.1f} ms")
