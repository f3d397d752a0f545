"""The bf16 GEMM rate (8192^3 torch.matmul) as gpu_bench.py's ceiling measures it (each of 10 products timed alone,
the median) and sustained (COUNT products back to back under one pair of events, about as long as a 512K index
branch), three times each, alternating: whether the long index launches run at the burst's clock."""
import sys
import torch

n, count = 8192, int(sys.argv[1]) if len(sys.argv) > 1 else 180
a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
flops = 2 * n ** 3


def timed(products):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(products):
        a @ b
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


for _ in range(3):
    timed(3)
    burst = sorted(timed(1) for _ in range(10))[5]
    sustained = timed(count)
    print(f"burst {flops / burst / 1e9:.1f} TFLOP/s ({burst:.3f} ms), sustained {flops * count / sustained / 1e9:.1f} "
          f"TFLOP/s ({sustained:.1f} ms for {count})", flush=True)
