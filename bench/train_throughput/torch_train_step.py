"""The same training step in PyTorch eager (float32): the oracle's model
definition, the same packed batch shape, AdamW. Prints one JSON line.
Usage: /usr/bin/python3 torch_train_step.py MODEL BATCH SEQ DOCS_PER_ROW STEPS WARMUP THREADS"""

import json
import os
import resource
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "oracle"))
import model_oracle  # noqa: E402

PRESETS = {  # must match runtime/model/model_config.cc
    "tiny": dict(n_layers=3, d_model=96, n_heads=4, n_kv_heads=2, d_ff=256),
    "small": dict(n_layers=7, d_model=512, n_heads=8, n_kv_heads=4, d_ff=1408),
}


def main():
    name, batch, seq, docs, steps, warmup, threads = sys.argv[1:8]
    batch, seq, docs, steps, warmup, threads = map(int, (batch, seq, docs, steps, warmup, threads))
    torch.set_num_threads(threads)
    model_oracle.DTYPE = torch.float32
    config = dict(PRESETS[name], vocab_size=259, rope_theta=10000.0, norm_eps=1e-5,
                  tie_embeddings=False)
    torch.manual_seed(1)
    model = model_oracle.Transformer(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    tokens = torch.randint(0, 259, (batch * seq,))
    targets = torch.randint(0, 259, (batch * seq,))
    length = seq // docs
    segments, positions = [], []
    for row in range(batch):
        for d in range(docs):
            this_length = seq - d * length if d + 1 == docs else length
            segments.append((row * seq + d * length, this_length))
            positions.extend(range(this_length))
    positions = torch.tensor(positions)
    for step in range(warmup + steps):
        if step == warmup:
            start = time.perf_counter()
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens, positions, segments), targets)
        loss.backward()
        optimizer.step()
    seconds = time.perf_counter() - start
    print(json.dumps({
        "impl": "pytorch", "model": name, "threads": threads, "batch": batch, "seq": seq,
        "tokens_per_s": round(steps * batch * seq / seconds, 1),
        "step_ms": round(1e3 * seconds / steps, 2), "loss": round(loss.item(), 4),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "torch": torch.__version__}))


if __name__ == "__main__":
    main()
