"""A small character-level GPT in the shape of nanoGPT's train.py, which trainscale measures
unchanged but for its meter lines (docs/own-scripts.md): token and position embeddings,
pre-LayerNorm transformer blocks with causal self-attention, AdamW, a cosine learning rate
with linear warm-up, gradient accumulation, and DDP over gloo when launched as several
processes.

    python examples/char_gpt_script.py --max-steps 20                        # plain: no-op meter
    torchrun --nproc-per-node 2 examples/char_gpt_script.py --max-steps 20   # DDP over gloo
    trainscale run examples/char_gpt_script.py --data synthetic --workers 2 -- --max-steps 20

It trains on generated text with structure to learn, so that its next-character accuracy on
held-out text rises well above chance: words drawn from a fixed random lexicon, each word
followed by one of a few likely successors (a seeded random Markov chain over words). The
text is synthetic: tell trainscale with `--data synthetic`.
"""

import argparse
import math
import os
import random
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import trainscale

ALPHABET = "abcdefghijklmnopqrstuvwxyz"
VOCAB = " " + ALPHABET  # the space separates words


@dataclass
class GPTConfig:
    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        assert config.n_embd % config.n_head == 0, "--n-embd must be a multiple of --n-head"
        self.n_head = config.n_head
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd)
        self.proj = nn.Linear(config.n_embd, config.n_embd)
        self.dropout = config.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, time, channels = x.shape
        heads = self.qkv(x).view(batch, time, 3, self.n_head, channels // self.n_head)
        q, k, v = heads.permute(2, 0, 3, 1, 4)  # each (batch, head, time, head size)
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, time, channels))


class Block(nn.Module):
    """Pre-LN: each sub-layer reads a normalised copy and adds to the residual stream."""

    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
            nn.Dropout(config.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.n_embd)
        self.pos_emb = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # weight tying, as GPT-2
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # logits (batch, time, vocab)


def synthetic_text(num_chars: int, seed: int, lexicon_seed: int = 0) -> torch.Tensor:
    """Text of words from a fixed random lexicon, each word followed by one of three
    likely successors (the lexicon and the chain come from `lexicon_seed`, so training and
    held-out text share them; `seed` draws the text itself). Returned encoded, one id a
    character."""
    chain = random.Random(lexicon_seed)
    words = ["".join(chain.choices(ALPHABET, k=chain.randint(2, 6))) for _ in range(40)]
    successors = [chain.sample(range(len(words)), 3) for _ in words]
    draw = random.Random(seed)
    pieces, word, length = [], 0, 0
    while length < num_chars:
        pieces.append(words[word] + " ")
        length += len(pieces[-1])
        word = draw.choices(successors[word], weights=(6, 3, 1))[0]
    text = "".join(pieces)[:num_chars]
    return torch.tensor([VOCAB.index(c) for c in text], dtype=torch.long)


def get_batch(
    data: torch.Tensor, batch_size: int, block_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random windows of the text and the same windows one character on (the targets)."""
    starts = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)
    x = torch.stack([data[i : i + block_size] for i in starts.tolist()])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in starts.tolist()])
    return x, y


def lr_at(step: int, args: argparse.Namespace) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak at the last step."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = (step - args.warmup_steps) / max(1, args.max_steps - args.warmup_steps)
    return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))))


@torch.no_grad()
def evaluate(model: nn.Module, data: torch.Tensor, args: argparse.Namespace) -> tuple[float, float]:
    """(next-character accuracy, loss) over fixed held-out windows."""
    model.eval()
    x, y = get_batch(data, args.eval_batches, args.block_size, torch.Generator().manual_seed(0))
    logits = model(x)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    accuracy = (logits.argmax(dim=-1) == y).float().mean()
    model.train()
    return float(accuracy), float(loss)


def main() -> None:
    parser = argparse.ArgumentParser(description="character-level GPT on synthetic text")
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--block-size", type=int, default=64, help="context length")
    parser.add_argument("--batch-size", type=int, default=16, help="micro-batch, per process")
    parser.add_argument("--grad-accum", type=int, default=2, help="micro-batches a step")
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--warmup-steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--eval-every", type=int, default=10, help="steps between evaluations")
    parser.add_argument("--eval-batches", type=int, default=64, help="held-out windows")
    parser.add_argument("--train-chars", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=1337)
    args = parser.parse_args()

    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:  # under torchrun (or trainscale) with several processes
        dist.init_process_group("gloo")
    rank = dist.get_rank() if distributed else 0
    torch.manual_seed(args.seed)  # the same initial weights on every rank
    train_data = synthetic_text(args.train_chars, seed=args.seed)
    val_data = synthetic_text(args.train_chars // 10, seed=args.seed + 1)
    batches = torch.Generator().manual_seed(args.seed + rank)  # each rank its own windows

    config = GPTConfig(len(VOCAB), args.block_size, args.n_layer, args.n_head, args.n_embd)
    model: nn.Module = GPT(config)
    raw_model = model
    if distributed:
        model = DDP(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]  # matrices and embeddings
    no_decay = [p for p in model.parameters() if p.dim() < 2]  # biases and norms
    optimizer = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay}],
        lr=args.lr,
        betas=(0.9, 0.95),
    )

    meter = trainscale.meter()
    for step in range(args.max_steps):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, args)
        # One optimizer step = one meter step, samples = micro-batch x accum (this process).
        with meter.step(samples=args.batch_size * args.grad_accum):
            for micro in range(args.grad_accum):
                x, y = get_batch(train_data, args.batch_size, args.block_size, batches)
                last = micro == args.grad_accum - 1
                # Gradients are averaged across processes once a step, on its last backward.
                with model.no_sync() if isinstance(model, DDP) and not last else nullcontext():
                    logits = model(x)
                    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten()) / args.grad_accum
                    loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        if (step + 1) % args.eval_every == 0 or step + 1 == args.max_steps:
            accuracy, val_loss = evaluate(raw_model, val_data, args)
            meter.evaluate(accuracy=accuracy, loss=val_loss)
            if rank == 0:
                print(f"step {step + 1}: val loss {val_loss:.3f}, accuracy {accuracy:.3f}")
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
