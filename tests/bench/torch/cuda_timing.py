"""CUDA-event timing shared by the PyTorch side-by-side benchmarks (sdpa_bench.py,
msa_dense_bench.py, layer_bench.py): the median of a callable's GPU time after
warm-up, and the per-call time of a callable captured many times into one CUDA graph (GPU time
without launch cost, as the m3 benchmarks time decode steps)."""
import statistics

import torch


def median_ms(fn, warmup, reps):
    for _ in range(warmup):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def graph_median_ms(fn, runs=9, calls=20):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    return median_ms(g.replay, 2, runs) / calls
