"""One rank of the Gloo side of bench/comm/run.sh: torch.distributed with the
gloo backend (PyTorch's CPU collectives), timed exactly as comm_bench times
ours — two warm-up calls, rank 0's estimate of the iteration count broadcast
to every rank, a barrier, then the timed loop — and printed as the same JSON
lines (nccl-tests' algbw/busbw definitions, `bytes` the whole buffer).

    /usr/bin/python3 bench/comm/gloo_bench.py --rank R --world_size P \
        --rendezvous_dir DIR --op all_reduce|all_gather --sizes 1024,1048576
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world_size", type=int, required=True)
    p.add_argument("--rendezvous_dir", required=True)
    p.add_argument("--op", choices=("all_reduce", "all_gather"), default="all_reduce")
    p.add_argument("--sizes", default="1024,1048576", help="buffer sizes in bytes")
    p.add_argument("--seconds_per_size", type=float, default=0.5)
    p.add_argument("--max_iters", type=int, default=200)
    args = p.parse_args(argv)
    try:
        args.sizes = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        p.error("--sizes: comma-separated byte counts expected, got %r" % args.sizes)
    if not args.sizes or min(args.sizes) < 4:
        p.error("--sizes: every size must be at least 4 bytes")
    if not 0 <= args.rank < args.world_size:
        p.error("--rank must be in [0, world_size)")
    return args


def main(argv):
    args = parse_args(argv)
    # Loopback only, as our side; Gloo otherwise resolves the hostname.
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    store = os.path.join(args.rendezvous_dir, "gloo_store")
    dist.init_process_group("gloo", init_method="file://" + store, rank=args.rank,
                            world_size=args.world_size)
    world = args.world_size
    max_bytes = max(args.sizes)
    data = torch.ones(max_bytes // 4 + 1, dtype=torch.float32)
    block = torch.full((max_bytes // world + 1,), args.rank % 128, dtype=torch.int8)
    gathered = [torch.empty_like(block) for _ in range(world)]

    def run_once(nbytes):
        if args.op == "all_reduce":
            dist.all_reduce(data[: nbytes // 4], op=dist.ReduceOp.SUM)
        else:
            per_rank = nbytes // world
            dist.all_gather([g[:per_rank] for g in gathered], block[:per_rank])

    for nbytes in args.sizes:
        for _ in range(2):
            run_once(nbytes)
        t0 = time.perf_counter()
        run_once(nbytes)
        one = time.perf_counter() - t0
        iters = int(args.seconds_per_size / max(one, 1e-6))
        agreed = torch.tensor([min(max(iters, 3), args.max_iters)], dtype=torch.int32)
        dist.broadcast(agreed, 0)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(int(agreed.item())):
            run_once(nbytes)
        seconds = (time.perf_counter() - t0) / int(agreed.item())
        effective = nbytes // 4 * 4 if args.op == "all_reduce" else nbytes // world * world
        algbw = effective / seconds
        factor = 2.0 * (world - 1) / world if args.op == "all_reduce" else (world - 1) / world
        if args.rank == 0:
            print(json.dumps({"op": args.op, "world": world, "bytes": nbytes,
                              "iters": int(agreed.item()), "time_us": round(seconds * 1e6, 1),
                              "algbw_gbs": round(algbw / 1e9, 4),
                              "busbw_gbs": round(algbw * factor / 1e9, 4)}), flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
