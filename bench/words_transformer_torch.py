#!/usr/bin/env python3
"""PyTorch twin of resources/examples/words-transformer.mls (and .lua), for
bench/epoch_vs_torch.py --model transformer: the same data, model, initialisation schemes,
optimizer and batch, on CPU.

  /usr/bin/python3 bench/words_transformer_torch.py [--epochs 3] [--max-steps N] [--seed 42]

Data, as mlstudio's "words" dataset kind (datasets/words_dataset.h): the lines of
/usr/share/dict/words (Debian's wamerican) that match ^[a-z]+$; '.' = 0, 'a'..'z' = 1..26.
A word w gives len(w) + 1 samples: the context is the last T ids of (T '.' + w[0..i)), the
label w[i], or '.' after the last letter. The words are put in the order words_dataset.cpp
draws from the split seed, then split, not the samples: the same splitmix64
hold-outs as datasets/splits.cpp (a test fraction of all words, then a validation fraction of
the rest, each drawn from its own stream of the seed), re-implemented below, so both sides
train, validate and test on the very same words.

Training: AdamW (lr 0.003, weight decay 0.01) on mlstudio's cosine schedule with 30 warm-up
steps, batch 256, seed 7, context 8, 8000 words of the training pool and 1000 test words, as the
.mls says (its dataset limit and test_limit count words). Sampling: the rule of runner/word_samples.cpp (first
character a letter, then until '.' or 32 letters), PyTorch's generator.

Model: token embedding + learned positions, pre-norm blocks (x + MHA(LN(x)) causal,
x + Linear(4E)-GELU-Linear(E) of LN(x)), a final LayerNorm, the last step, Linear(E, 27).
Weights start from the schemes mlstudio uses (engine/train/init.cpp): Linear U(+-sqrt(6/fan_in))
with bias U(+-1/sqrt(fan_in)), embeddings N(0, 0.01^2), attention as PyTorch's own (which the
MultiHeadAttention node copies), LayerNorm ones and zeros. The values differ (another generator).

Prints one JSON line: epoch_seconds (median training pass), final_loss (mean batch loss of the
last epoch), val_loss, test_loss, test_accuracy (per sample), steps, samples (ten words), ...
"""
import argparse, json, math, re, resource, sys, time

import numpy as np
import torch
import torch.nn as nn

MASK64 = (1 << 64) - 1


# [SECTION] the splits of datasets/splits.cpp (splitmix64, datasets/shuffle.h)

def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class Rng:  # engine/train/rng.h
    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        return mix64(self.state)

    def below(self, n):
        limit = MASK64 - (MASK64 % n)
        while True:
            x = self.next()
            if x < limit:
                return x % n


def shuffled_order(n, seed, epoch):
    order = list(range(n))
    rng = Rng(mix64((mix64(seed) + epoch) & MASK64))
    for i in range(n, 1, -1):
        j = rng.below(i)
        order[i - 1], order[j] = order[j], order[i - 1]
    return order


def holdout_count(n, fraction):
    if fraction <= 0 or n < 2:
        return 0
    return min(max(int(math.floor(n * fraction + 0.5)), 1), n - 1)


def hold_out(pool, count, seed, stream):
    if count <= 0:
        return pool, []
    order = shuffled_order(len(pool), seed, stream)
    taken = set(order[:count])
    return [p for i, p in enumerate(pool) if i not in taken], [p for i, p in enumerate(pool) if i in taken]


def split_indices(n, test_fraction, validation, seed, limit=0, test_limit=0):
    train, test = hold_out(list(range(n)), holdout_count(n, test_fraction), seed, 0x7E57)
    test = test[:test_limit] if test_limit > 0 else test
    train = train[:limit] if limit > 0 else train
    train, val = hold_out(train, holdout_count(len(train), validation), seed, 0x7A11D)
    return train, val, test


# [SECTION] the words dataset

def read_words(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = [l.rstrip("\n") for l in f]
    kept = [w for w in lines if re.fullmatch(r"[a-z]+", w)]
    return list(dict.fromkeys(kept))  # file order, each word once


def samples_of(words, block):
    # Each word laid out as T '.' + its letters + '.'; sample i of a word starting at o reads
    # the window [o + i, o + i + T) and the label at o + T + i.
    seq, starts = [], []
    for w in words:
        o = len(seq)
        seq.extend([0] * block)
        seq.extend(ord(c) - 96 for c in w)
        seq.append(0)
        starts.extend(range(o, o + len(w) + 1))
    seq, starts = np.array(seq, dtype=np.int64), np.array(starts, dtype=np.int64)
    x = np.lib.stride_tricks.sliding_window_view(seq, block)[starts]
    return torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(seq[starts + block])


# [SECTION] the model

class Block(nn.Module):
    def __init__(self, e, heads, mask):
        super().__init__()
        self.ln1 = nn.LayerNorm(e)
        self.attn = nn.MultiheadAttention(e, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(e)
        self.mlp = nn.Sequential(nn.Linear(e, 4 * e), nn.GELU(), nn.Linear(4 * e, e))
        self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=self.mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class WordsTransformer(nn.Module):
    def __init__(self, block, e, heads, layers, vocab=27):
        super().__init__()
        mask = torch.triu(torch.ones(block, block, dtype=torch.bool), diagonal=1)  # True: hidden
        self.tok = nn.Embedding(vocab, e)
        self.pos = nn.Parameter(torch.zeros(block, e))
        self.blocks = nn.Sequential(*[Block(e, heads, mask) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(e)
        self.head = nn.Linear(e, vocab)
        # mlstudio's schemes (engine/train/init.cpp); attention keeps PyTorch's, as the node does.
        with torch.no_grad():
            nn.init.normal_(self.tok.weight, std=0.01)
            nn.init.normal_(self.pos, std=0.01)
            for m in self.modules():
                if isinstance(m, nn.Linear) and not isinstance(m, nn.modules.linear.NonDynamicallyQuantizableLinear):
                    bound = math.sqrt(6.0 / m.in_features)
                    nn.init.uniform_(m.weight, -bound, bound)
                    nn.init.uniform_(m.bias, -1 / math.sqrt(m.in_features), 1 / math.sqrt(m.in_features))

    def forward(self, idx):
        x = self.tok(idx) + self.pos
        x = self.ln_f(self.blocks(x))
        return self.head(x[:, -1, :])


def sample_words(model, block, count, seed, max_len):
    g = torch.Generator().manual_seed(seed)
    words = []
    with torch.no_grad():
        for _ in range(count):
            ctx, out = [0] * block, []
            while len(out) < max_len:
                p = torch.softmax(model(torch.tensor([ctx[-block:]])), -1)[0]
                if not out:  # the first character is a letter, as runner/word_samples.cpp draws it
                    p[0] = 0
                k = int(torch.multinomial(p, 1, generator=g))
                if k == 0:
                    break
                out.append(chr(96 + k))
                ctx.append(k)
            words.append("".join(out))
    return words


def lr_at(step, epoch, args):
    """mlstudio's {type = "cosine", warmup_steps} (engine/train/schedule.cpp): cosine from lr to 0
    by epoch (constant within an epoch), times (step + 1) / warmup for the first steps."""
    lr = 0.5 * args.lr * (1 + math.cos(math.pi * min(epoch, args.epochs) / args.epochs))
    return lr * (step + 1) / args.warmup if step < args.warmup else lr


def evaluate(model, x, y, batch=4096):
    loss_sum, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(y), batch):
            logits = model(x[i : i + batch])
            loss_sum += float(nn.functional.cross_entropy(logits, y[i : i + batch], reduction="sum"))
            correct += int((logits.argmax(1) == y[i : i + batch]).sum())
    return loss_sum / len(y), correct / len(y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--words", default="/usr/share/dict/words")
    ap.add_argument("--block", type=int, default=8)
    ap.add_argument("--embed", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=30, help="linear warm-up steps of the cosine schedule")
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: all epochs)")
    ap.add_argument("--seed", type=int, default=7, help="the training seed (weights, order, samples)")
    ap.add_argument("--split-seed", type=int, default=0, help="the dataset's split_seed")
    ap.add_argument("--test", type=float, default=0.1, help="fraction of the words held out for testing")
    ap.add_argument("--validation", type=float, default=0.1, help="fraction of the rest held out for validation")
    ap.add_argument("--limit", type=int, default=8000, help="the first N words of the training pool (0: all)")
    ap.add_argument("--test-limit", type=int, default=1000, help="the first N test words (0: all)")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--max-len", type=int, default=32)
    args = ap.parse_args()

    words = read_words(args.words)
    # The list is sorted: datasets/words_dataset.cpp first puts it in an order drawn from the
    # split seed (stream 0x30d5), so that a limit's first N words are not all 'a...'.
    words = [words[k] for k in shuffled_order(len(words), args.split_seed, 0x30D5)]
    tr, va, te = split_indices(len(words), args.test, args.validation, args.split_seed,
                                args.limit, args.test_limit)
    x, y = samples_of([words[i] for i in tr], args.block)
    xv, yv = samples_of([words[i] for i in va], args.block)
    xt, yt = samples_of([words[i] for i in te], args.block)

    torch.manual_seed(args.seed)
    model = WordsTransformer(args.block, args.embed, args.heads, args.layers)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.999), eps=1e-8,
                            weight_decay=args.weight_decay)
    n, steps, times, losses = len(y), 0, [], []
    for epoch in range(args.epochs):
        perm = torch.randperm(n)
        t0, loss_sum, batches = time.perf_counter(), 0.0, 0
        for i in range(0, n, args.batch):
            idx = perm[i : i + args.batch]
            for group in opt.param_groups:
                group["lr"] = lr_at(steps, epoch, args)
            opt.zero_grad(set_to_none=True)
            loss = nn.functional.cross_entropy(model(x[idx]), y[idx])
            loss.backward()
            opt.step()
            loss_sum += loss.item()
            batches += 1
            steps += 1
            if args.max_steps and steps >= args.max_steps:
                break
        times.append(time.perf_counter() - t0)
        losses.append(loss_sum / batches)
        if args.max_steps and steps >= args.max_steps:
            break
    model.eval()
    val_loss, val_acc = evaluate(model, xv, yv)
    test_loss, test_acc = evaluate(model, xt, yt)
    med = sorted(times)[len(times) // 2]
    print(json.dumps({
        "epoch_seconds": med, "epoch_seconds_all": times, "samples_per_s": n / med, "steps": steps,
        "final_loss": losses[-1], "epoch_losses": losses, "val_loss": val_loss, "val_accuracy": val_acc,
        "test_loss": test_loss, "test_accuracy": test_acc,
        "train_samples": n, "validation_samples": len(yv), "test_samples": len(yt), "words": len(words),
        "parameters": sum(p.numel() for p in model.parameters()),
        "samples": sample_words(model, args.block, args.samples, args.seed, args.max_len),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "device": "cpu",
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }))


if __name__ == "__main__":
    sys.exit(main())
