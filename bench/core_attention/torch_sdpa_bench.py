"""PyTorch's fused attention on the GPU at core_attention_gpu_bench's shapes.

The baseline the tensor-core kernel is compared with, measured on the same
machine in the same device check: torch.nn.functional.scaled_dot_product_attention
with each fused backend PyTorch offers there (FlashAttention-2, cuDNN),
bf16, one causal document per length, 16 heads / 8 kv heads, head_dim 128.
FLOPs as core_attention_gpu_bench counts them: forward = 4 * pairs *
head_dim * heads with pairs = L(L+1)/2, forward + backward = 3.5x forward.

Prints a table, then one JSON line. Exits 0 saying why when this Python has
no PyTorch with CUDA and scaled_dot_product_attention (the development
machine's Debian torch has neither).
"""

import argparse
import json
import sys


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="4096,8192,16384,32768",
                        help="document lengths, one causal document each")
    parser.add_argument("--heads", type=int, default=16)
    parser.add_argument("--kv_heads", type=int, default=8)
    parser.add_argument("--head_dim", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=2,
                        help="timed runs per length after one warm-up (best is reported)")
    args = parser.parse_args(argv)
    try:
        args.lengths = [int(text) for text in args.lengths.split(",") if text]
    except ValueError:
        parser.error(f"--lengths: '{args.lengths}' is not a comma-separated list of lengths")
    if not args.lengths or any(length <= 0 or length > 1 << 20 for length in args.lengths):
        parser.error("--lengths: each length must be in 1..2^20")
    if args.heads <= 0 or args.kv_heads <= 0 or args.heads % args.kv_heads:
        parser.error("--heads must be a positive multiple of --kv_heads")
    if args.head_dim <= 0 or args.repeats <= 0:
        parser.error("--head_dim and --repeats must be positive")
    return args


def forward_flops(length, heads, head_dim):
    """Causal attention's forward FLOPs over one document (QK^T and PV)."""
    pairs = length * (length + 1) / 2
    return 4.0 * pairs * head_dim * heads


def backends(torch):
    """(name, context manager factory) for each fused backend this torch has."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return []
    found = [("flash", lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION))]
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        found.append(("cudnn", lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)))
    return found


def best_ms(torch, repeats, fn):
    fn()  # warm-up
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(repeats):
        start.record()
        fn()
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return best


def main(argv):
    args = parse_args(argv)
    try:
        import torch
    except ImportError:
        print(f"skipped: {sys.executable} has no torch")
        return 0
    if not torch.cuda.is_available():
        print(f"skipped: torch {torch.__version__} at {sys.executable} sees no CUDA device")
        return 0
    sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
    found = backends(torch)
    if sdpa is None or not found:
        print(f"skipped: torch {torch.__version__} has no selectable fused attention backend")
        return 0
    device = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(device)}: scaled_dot_product_attention, "
          f"bf16, {args.heads} heads / {args.kv_heads} kv heads, head_dim {args.head_dim}, one causal document")
    print(f"{'length':>8} {'backend':>8} {'fwd ms':>10} {'bwd ms':>10} {'TFLOP/s':>10} {'fwd TFLOP/s':>12}")
    sys.stdout.flush()
    figures = {"torch": torch.__version__}
    group = args.heads // args.kv_heads
    for length in args.lengths:
        generator = torch.Generator(device=device).manual_seed(1)
        shape = (1, args.heads, length, args.head_dim)
        q = torch.randn(shape, device=device, dtype=torch.bfloat16, generator=generator)
        kv_shape = (1, args.kv_heads, length, args.head_dim)
        k = torch.randn(kv_shape, device=device, dtype=torch.bfloat16, generator=generator)
        v = torch.randn(kv_shape, device=device, dtype=torch.bfloat16, generator=generator)
        # GQA: each kv head serves `group` query heads (expanded once, outside the timing).
        k = k.repeat_interleave(group, dim=1).requires_grad_()
        v = v.repeat_interleave(group, dim=1).requires_grad_()
        q.requires_grad_()
        d_o = torch.randn(shape, device=device, dtype=torch.bfloat16, generator=generator)
        fwd = forward_flops(length, args.heads, args.head_dim)
        for name, context in found:
            try:
                with context():
                    forward = best_ms(torch, args.repeats, lambda: sdpa(q, k, v, is_causal=True))
                    out = sdpa(q, k, v, is_causal=True)

                    def backward():
                        q.grad = k.grad = v.grad = None
                        out.backward(d_o, retain_graph=True)

                    backward_ms = best_ms(torch, args.repeats, backward)
            except RuntimeError as error:
                print(f"{length:>8} {name:>8}  unavailable: {str(error).splitlines()[0]}")
                sys.stdout.flush()
                continue
            total = 3.5 * fwd / ((forward + backward_ms) * 1e-3) / 1e12
            print(f"{length:>8} {name:>8} {forward:>10.2f} {backward_ms:>10.2f} {total:>10.2f} "
                  f"{fwd / (forward * 1e-3) / 1e12:>12.2f}")
            sys.stdout.flush()
            figures[f"sdpa_{name}_fwd_bwd_tflops_{length}"] = round(total, 2)
        # The figures so far, after every length: a run cut off keeps them.
        print(json.dumps(figures, sort_keys=True))
        sys.stdout.flush()
        del q, k, v, d_o
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
