import sys
import time

sys.path.insert(0, "/work/wt-quality/bench")
from pathlib import Path

from citeline.search import Fusion
from tune_quality import Data, Scorer, Setting, line

w, c = time.perf_counter(), time.process_time()
data = Data(Path("/work/shared/benchmarks/scifact"), Path("/tmp/quality/base"), Path("/tmp/quality/header-vectors.npy"))
s = Scorer(data)
print("contextual chunk headers (title + chunk), shipped ranking settings:")
for mode in ("dense", "hybrid"):
    line(mode, s.score(mode, Setting()))
for weight in (0.55, 0.6):
    line(f"hybrid w_dense={weight}", s.score("hybrid", Setting(fusion=Fusion(weight=weight))))
data.cosines = data.own_cosines
print("the index's own vectors (chunk text alone), same settings:")
for mode in ("dense", "hybrid"):
    line(mode, s.score(mode, Setting()))
print(f"took {time.perf_counter() - w:.0f} s wall, {time.process_time() - c:.0f} CPU-s")
