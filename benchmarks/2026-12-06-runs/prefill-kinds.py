#!/usr/bin/env python3
"""prefill-kinds.py — where a prefill step's time goes, from a kernel trace of `generate
--max-tokens 1` (the last step is the prompt's): per kernel kind (step-timeline.py's kinds),
launches, total duration and the step time each accounts for (end minus the end before it),
over the kernels from the last embedding launch on.

usage: prefill-kinds.py trace.csv"""
import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location(
    "st", os.path.join(here, "../../plugins/backend-cuda/bench/step-timeline.py"))
st = importlib.util.module_from_spec(spec)
spec.loader.exec_module(st)

ks = st.read_trace(sys.argv[1])
first = max(i for i, k in enumerate(ks) if st.kind(k[2]) == "embedding")
ks = ks[first:]
per = {}
prev = ks[0][0]
for s, e, name in ks:
    d = per.setdefault(st.kind(name), [0, 0.0, 0.0])
    d[0] += 1
    d[1] += (e - s) / 1e3
    d[2] += max(0, e - prev) / 1e3
    prev = max(prev, e)
print("prefill step: %.1f us from the embedding's start to the last kernel's end"
      % ((ks[-1][1] - ks[0][0]) / 1e3))
print("%-44s %8s %12s %12s" % ("kernel", "launches", "busy us", "step us"))
for k, (n, busy, share) in sorted(per.items(), key=lambda kv: -kv[1][2]):
    print("%-44.44s %8d %12.1f %12.1f" % (k, n, busy, share))
