"""Independent PyTorch reference for corescape's transformer.

Reads a case directory written by the C++ test (case.json, weights.bin),
builds the same Llama-style model with torch.nn and autograd — written from
the model's definition, not ported from the C++ — and writes:
  logits.bin   fp32 [rows, vocab] of the first forward
  grads.bin    fp32 gradients of the mean loss, in the flat layout of case.json
  result.json  {"loss": first loss, "step_losses": losses of N AdamW steps}

Runs in float64 so it is the more exact side of the comparison.
Usage: /usr/bin/python3 model_oracle.py CASE_DIR
"""

import functools
import json
import math
import os
import sys

import numpy
import torch
import torch.nn.functional as F
from torch import nn

DTYPE = torch.float64


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=DTYPE))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def apply_rotary(x, positions, theta):
    """x: [tokens, heads, head_dim]; rotates adjacent pairs (Meta Llama style)."""
    tokens, heads, head_dim = x.shape
    inverse_frequency = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = positions.to(torch.float64)[:, None] * inverse_frequency[None, :]
    rotation = torch.polar(torch.ones_like(angles), angles)[:, None, :]
    pairs = torch.view_as_complex(x.reshape(tokens, heads, head_dim // 2, 2).contiguous())
    return torch.view_as_real(pairs * rotation.to(pairs.dtype)).reshape(tokens, heads, head_dim)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n_heads, self.n_kv_heads = c["n_heads"], c["n_kv_heads"]
        self.head_dim = c["d_model"] // c["n_heads"]
        self.theta = c["rope_theta"]
        d = c["d_model"]
        self.wq = nn.Linear(d, self.n_heads * self.head_dim, bias=False, dtype=DTYPE)
        self.wk = nn.Linear(d, self.n_kv_heads * self.head_dim, bias=False, dtype=DTYPE)
        self.wv = nn.Linear(d, self.n_kv_heads * self.head_dim, bias=False, dtype=DTYPE)
        self.wo = nn.Linear(self.n_heads * self.head_dim, d, bias=False, dtype=DTYPE)

    def forward(self, x, positions, segments):
        tokens = x.shape[0]
        q = apply_rotary(self.wq(x).view(tokens, self.n_heads, self.head_dim), positions, self.theta)
        k = apply_rotary(self.wk(x).view(tokens, self.n_kv_heads, self.head_dim), positions, self.theta)
        v = self.wv(x).view(tokens, self.n_kv_heads, self.head_dim)
        group = self.n_heads // self.n_kv_heads
        out = torch.zeros_like(q)
        pieces = []
        # Causal attention inside each segment only (packed documents).
        for first, length in segments:
            qs = q[first:first + length].transpose(0, 1)                      # [H, L, hd]
            ks = k[first:first + length].repeat_interleave(group, dim=1).transpose(0, 1)
            vs = v[first:first + length].repeat_interleave(group, dim=1).transpose(0, 1)
            scores = qs @ ks.transpose(1, 2) / math.sqrt(self.head_dim)
            future = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
            scores = scores.masked_fill(future, float("-inf"))
            pieces.append((first, length, (F.softmax(scores, dim=-1) @ vs).transpose(0, 1)))
        for first, length, values in pieces:
            out = out.index_put((torch.arange(first, first + length),), values)
        return self.wo(out.reshape(tokens, -1))


class FeedForward(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, f = c["d_model"], c["d_ff"]
        self.w1 = nn.Linear(d, f, bias=False, dtype=DTYPE)
        self.w2 = nn.Linear(f, d, bias=False, dtype=DTYPE)
        self.w3 = nn.Linear(d, f, bias=False, dtype=DTYPE)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention_norm = RMSNorm(c["d_model"], c["norm_eps"])
        self.attention = Attention(c)
        self.ffn_norm = RMSNorm(c["d_model"], c["norm_eps"])
        self.feed_forward = FeedForward(c)

    def forward(self, x, positions, segments):
        h = x + self.attention(self.attention_norm(x), positions, segments)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.tok_embeddings = nn.Embedding(c["vocab_size"], c["d_model"], dtype=DTYPE)
        self.layers = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm = RMSNorm(c["d_model"], c["norm_eps"])
        self.output = nn.Linear(c["d_model"], c["vocab_size"], bias=False, dtype=DTYPE)
        if c["tie_embeddings"]:
            self.output.weight = self.tok_embeddings.weight

    def forward(self, tokens, positions, segments):
        x = self.tok_embeddings(tokens)
        for layer in self.layers:
            x = layer(x, positions, segments)
        return self.output(self.norm(x))


def parameter(model, name):
    """Looks a parameter up by its dotted name (tied weights answer to both)."""
    return functools.reduce(getattr, name.split("."), model)


def load_weights(model, tensors, flat):
    with torch.no_grad():
        for t in tensors:
            values = flat[t["offset"]:t["offset"] + math.prod(t["shape"])]
            parameter(model, t["name"]).copy_(values.view(t["shape"]).to(DTYPE))


def flat_gradients(model, tensors, total):
    flat = torch.zeros(total, dtype=torch.float32)
    for t in tensors:
        grad = parameter(model, t["name"]).grad
        flat[t["offset"]:t["offset"] + grad.numel()] = grad.reshape(-1).to(torch.float32)
    return flat


def main(case_dir):
    with open(os.path.join(case_dir, "case.json")) as f:
        case = json.load(f)
    c, batch, opt = case["config"], case["batch"], case["optimizer"]
    tensors = case["tensors"]
    total = max(t["offset"] + math.prod(t["shape"]) for t in tensors)
    flat = torch.from_numpy(numpy.fromfile(os.path.join(case_dir, "weights.bin"), dtype="<f4"))
    assert flat.numel() == total, (flat.numel(), total)

    torch.manual_seed(0)
    model = Transformer(c)
    load_weights(model, tensors, flat)
    tokens = torch.tensor(batch["tokens"], dtype=torch.long)
    targets = torch.tensor(batch["targets"], dtype=torch.long)
    positions = torch.tensor(batch["positions"], dtype=torch.long)
    seq_len = batch["seq_len"]
    segments = [(row * seq_len + start, length) for row, start, length in batch["segments"]]

    logits = model(tokens, positions, segments)
    loss = F.cross_entropy(logits, targets, ignore_index=-1)
    loss.backward()
    logits.detach().to(torch.float32).numpy().tofile(os.path.join(case_dir, "logits.bin"))
    flat_gradients(model, tensors, total).numpy().tofile(os.path.join(case_dir, "grads.bin"))

    # N AdamW steps on the same batch: decay on matrices only, warm-up then
    # cosine to min_lr, global-norm clipping.
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": opt["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=opt["lr"], betas=(opt["beta1"], opt["beta2"]), eps=opt["epsilon"])

    def lr_at(step):
        if step < opt["warmup_steps"]:
            return opt["lr"] * (step + 1) / opt["warmup_steps"]
        progress = min(1.0, (step - opt["warmup_steps"]) / max(1, opt["steps"] - opt["warmup_steps"]))
        return opt["min_lr"] + 0.5 * (opt["lr"] - opt["min_lr"]) * (1 + math.cos(math.pi * progress))

    step_losses = []
    for step in range(opt["steps"]):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        optimizer.zero_grad()
        step_loss = F.cross_entropy(model(tokens, positions, segments), targets, ignore_index=-1)
        step_loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), opt["grad_clip"])
        optimizer.step()
        step_losses.append(step_loss.item())

    with open(os.path.join(case_dir, "result.json"), "w") as f:
        json.dump({"loss": loss.item(), "step_losses": step_losses}, f)


if __name__ == "__main__":
    main(sys.argv[1])
