#!/usr/bin/env python3
"""gp_bench_torch_adamw.py [ELEMENTS] — GPU benchmark beside build/bench/gp_bench_cuda_adamw
(scripts/gpu-check.sh runs both): torch.optim.AdamW(fused=True) on fp32 params, grads and
state against a device-to-device copy (Tensor.copy_) moving the same bytes on the same
device, measured in one run with CUDA events, counted as gp_bench_cuda_adamw counts them
(28 bytes per element per step). Prints one Markdown table; each timing is the best of
5 rounds of 20 steps. Exit 77 (nothing measured) without torch or without a CUDA device."""
import sys

ROUNDS, STEPS = 5, 20


def best_ms(torch, run):
    run()  # warm-up (and the optimizer's state allocation)
    torch.cuda.synchronize()
    best = None
    for _ in range(ROUNDS):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        run()
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b)
        best = ms if best is None or ms < best else best
    return best


def main():
    n = 1 << 26
    if len(sys.argv) > 2 or (len(sys.argv) == 2 and (not sys.argv[1].isdigit() or int(sys.argv[1]) == 0)):
        sys.stderr.write("usage: gp_bench_torch_adamw.py [ELEMENTS > 0]\n")
        return 2
    if len(sys.argv) == 2:
        n = int(sys.argv[1])
    try:
        import torch
    except ImportError:
        print("gp_bench_torch_adamw: torch is not installed: nothing measured")
        return 77
    if not torch.cuda.is_available():
        print("gp_bench_torch_adamw: torch has no CUDA device: nothing measured")
        return 77
    dev = torch.device("cuda")
    p = torch.nn.Parameter(torch.ones(n, dtype=torch.float32, device=dev))
    p.grad = torch.full((n,), 1e-3, dtype=torch.float32, device=dev)
    opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, fused=True)
    src = torch.zeros(7 * n // 2, dtype=torch.float32, device=dev)  # 14n bytes: a copy moves 28n
    dst = torch.empty_like(src)

    def steps():
        for _ in range(STEPS):
            opt.step()

    def copies():
        for _ in range(STEPS):
            dst.copy_(src)

    adamw_ms, copy_ms = best_ms(torch, steps), best_ms(torch, copies)
    moved = 28.0 * n * STEPS
    adamw_gbs, copy_gbs = moved / (adamw_ms * 1e-3) / 1e9, moved / (copy_ms * 1e-3) / 1e9
    name = torch.cuda.get_device_name(dev)
    print(f"| measurement ({name}, torch {torch.__version__}, {n} fp32 elements, best of {ROUNDS} x {STEPS}) | GB/s |")
    print("|---|---|")
    print(f"| torch.optim.AdamW(fused=True) (28 bytes/element) | {adamw_gbs:.1f} |")
    print(f"| device-to-device copy_ (same bytes) | {copy_gbs:.1f} |")
    print(f"| **AdamW / copy** | **{adamw_gbs / copy_gbs:.3f}** |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
