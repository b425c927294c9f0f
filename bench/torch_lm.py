#!/usr/bin/python3
"""PyTorch peer of loom's character-level language model sample (samples/lm): the same flags, the
same data handling, the same `trained:` / `eval` / `generated:` lines, so that bench/compare_lm runs
and parses both engines the same way.

    env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/torch_lm.py --train ../shared/data/tinyshakespeare/train.txt
        [--architecture transformer|lstm] [--layers 4 --heads 4 --width 128 --block 64 --batch 12 --dropout 0]
        [--iterations 2000 | --minutes M] [--learning-rate 1e-3 --min-learning-rate 1e-4 --warmup 100
        --beta2 0.99 --weight-decay 0.1 --clip 1.0] [--holdout 0.05 --holdout-spans 1] [--eval FILE] [--eval-every N] [--log-every 100]
        [--generate N --streams K --prompt TEXT --temperature T --top-k K --top-p P] [--seed S]
        [--threads N] [--passive] [--matmul-precision highest|medium] [--untimed-iterations W] [--save-safetensors F] [--load-safetensors F]
        [--logits-of TEXT] [--self-check] [--json]

Data. The alphabet is the sorted distinct characters of the whole --train file (ids 0..V-1 in that
order). As lm's: the text is cut into --holdout-spans equal parts (ids[n k // spans : n (k + 1) //
spans]) and the last floor(holdout x its length) characters of each are held out; training reads
the rest, joined (spans 1: the file's end is held out).

Models (sizes are the options; the defaults are nanoGPT's CPU configuration):
  * transformer: nanoGPT's GPT with biases (GPTConfig(bias=True), GPT-2 style). Token embedding
    [V, D] and learned positions [block, D] (normal 0.02), summed, dropout; --layers pre-norm blocks
    x + attn(ln1(x)), x + mlp(ln2(x)); attention: fused Linear(D, 3D) for q, k, v, --heads heads,
    causal, softmax(q k^T / sqrt(D / heads)) with dropout on the attention weights, Linear(D, D),
    dropout; mlp: Linear(D, 4D), exact GELU (erf), Linear(4D, D), dropout; final LayerNorm; logits
    x E^T with the token embedding E (tied, no bias). Init: every Linear weight normal 0.02, the two
    output projections of each block (attention and mlp) normal 0.02 / sqrt(2 layers), biases 0,
    LayerNorms 1 and 0 (eps 1e-5).
  * lstm: char-rnn's model with an embedding: embedding [V, D], nn.LSTM(D, D, --layers) with
    dropout between layers and on the last layer's output (char-rnn's and loom's placement: after
    every layer), Linear(D, V). Init as char-rnn: every parameter uniform(-0.08, 0.08),
    then the forget gates' bias 1.

Training. The loss is the mean cross-entropy (nats) of an iteration's batch x block predictions.
  * transformer: each iteration draws --batch windows of block + 1 characters at random starts in
    [0, len(train) - block - 1] (nanoGPT's get_batch); inputs the first block, targets the last.
  * lstm, truncated back-propagation through time: the training text is cut into --batch
    contiguous slices of S = len(train) // batch characters; stream b reads slice b in consecutive
    windows of block inputs (targets shifted by one), window w = iteration % ((S - 1) // block).
    The state (h, c) carries from one window to the next, detached (no gradient through the carry);
    it is zero at window 0 of every pass.
  * AdamW(betas (0.9, --beta2), eps 1e-8), weight decay --weight-decay on the parameters of two or
    more dimensions (matrices and embeddings), none on biases and norms (nanoGPT's
    configure_optimizers); gradients clipped to global norm --clip (0: no clipping).
  * Learning rate at iteration i (from 0): lr (i + 1) / (warmup + 1) while i < --warmup; then
    min_lr + (lr - min_lr) (1 + cos(pi r)) / 2 with r = (i - warmup) / (iterations - warmup).
    With --minutes M the budget is wall-clock training time instead of iterations: training stops
    at the first iteration that starts after M minutes, and after the warm-up
    r = (t - t_w) / (60 M - t_w), clamped to [0, 1], t the training time at the start of iteration
    i and t_w the time at which the warm-up ended.
  * --matmul-precision medium: each iteration's forward and loss run under
    torch.autocast("cpu", dtype=torch.bfloat16) (PyTorch's mixed precision on a CPU: the products
    and what autocast lists take bfloat16 operands; weights, gradients and AdamW stay float), as
    lm's flag of that name rounds its products' operands to bfloat16. Evaluation and sampling stay
    float.
  * `trained: I iterations, T tokens in S s, X tokens/s`: training time only (no data loading, no
    evaluation); T = I x batch x block. --untimed-iterations W leaves the first W iterations out
    of this line (they still train), so that the first iterations' allocations are not timed.
  * --eval-every N (as lm's): every N iterations and at the end the held-out part is scored
    (`iteration I: held-out N.NNNN nats per character`) and the weights that scored best are kept;
    the evaluations' time counts against --minutes and not in the trained: line.

Evaluation (after training): `eval FILE: N.NNNN nats per character (B.BBBB bits)` for --eval FILE,
else `eval held-out: ...` for the held-out part, its spans each a text. A text (n characters) is cut into windows
k = 0, 1, ...: inputs text[k block : (k+1) block], targets text[k block + 1 : (k+1) block + 1] (the
last window may be shorter); the figure is the mean over all predicted characters (n - 1 a text). The
transformer starts every window from nothing; the LSTM carries its state through the whole text
(from zero), as it is trained to.

Sampling: --generate N characters per stream for --streams K streams, all continuing --prompt
(default a newline), under torch.no_grad with a cache: the transformer keeps each layer's keys
and values (filled by the prompt, then one token per step); the LSTM carries its state. The
transformer refuses prompt + N > block (no cropping); the LSTM has no limit. Each step: logits /
temperature (0: the most probable character), top-k (k > 0: characters below the k-th largest
logit are dropped), top-p (p < 1: the smallest set of most probable characters whose
probabilities sum to at least p), one draw per stream from a generator seeded with --seed. Prints
the prompt and stream 0's characters, then `generated: C characters in S s, X characters/s (K
streams)`, C = N x K, S from the prompt's first token to the last draw.

Checks (after training, so on the trained weights): --self-check compares the cached sampling's
log-probabilities at every step of a 20-step generation with a full forward over the whole prefix
(max |difference| < 1e-5), saves, loads and saves the weights again (the same file), and recomputes
the logits from the saved tensors alone by loom's formulas (max |difference| < 1e-4); it exits
non-zero on a failure. --logits-of TEXT prints the model's logits at every position of TEXT as
JSON. --save-safetensors / --load-safetensors write and read the weights under loom's parameter
names and layouts (the one table: loom_names() below); the header's __metadata__ holds the sizes
and the alphabet. Start from a loom file with --load-safetensors F --iterations 0.
"""
import argparse
import copy
import json
import math
import os
import resource
import struct
import sys
import tempfile
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", required=True, help="the training text (UTF-8)")
    p.add_argument("--holdout", type=float, default=0.05, help="fraction of --train held out")
    p.add_argument("--holdout-spans", type=int, default=1, help="spans the held-out part is spread over (1: the end)")
    p.add_argument("--eval", default=None, help="evaluate this file instead of the held-out part")
    p.add_argument("--architecture", choices=["transformer", "lstm"], default="transformer")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4, help="transformer: attention heads")
    p.add_argument("--width", type=int, default=128, help="embedding and hidden width D")
    p.add_argument("--block", type=int, default=64, help="context / window length in characters")
    p.add_argument("--batch", type=int, default=12, help="windows (transformer) or streams (lstm) per iteration")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--iterations", type=int, default=None, help="training iterations (default 2000)")
    p.add_argument("--minutes", type=float, default=None, help="train for this much wall-clock time instead")
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--min-learning-rate", type=float, default=1e-4)
    p.add_argument("--warmup", type=int, default=100, help="iterations of linear learning-rate warm-up")
    p.add_argument("--beta2", type=float, default=0.99)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0, help="global gradient norm clip (0: none)")
    p.add_argument("--eval-every", type=int, default=0,
                   help="score the held-out part every N iterations and keep the best weights (0: at the end only)")
    p.add_argument("--log-every", type=int, default=100, help="print the mean training loss every N iterations (0: never)")
    p.add_argument("--untimed-iterations", type=int, default=0, help="leave the first W iterations out of the trained: line")
    p.add_argument("--generate", type=int, default=0, help="characters to sample per stream")
    p.add_argument("--streams", type=int, default=1)
    p.add_argument("--prompt", default="\n")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--passive", action="store_true", help="OMP_WAIT_POLICY=passive (idle OpenMP workers sleep)")
    p.add_argument("--matmul-precision", choices=["highest", "medium"], default="highest",
                   help="medium: training's forward under torch.autocast('cpu', torch.bfloat16)")
    p.add_argument("--save-safetensors", default=None)
    p.add_argument("--load-safetensors", default=None, help="start from these weights (loom's names)")
    p.add_argument("--logits-of", default=None, help="print the logits at every position of TEXT as JSON")
    p.add_argument("--self-check", action="store_true", help="cached sampling == full forward; safetensors round trip")
    p.add_argument("--json", action="store_true", help="also print one JSON object with everything")
    p.add_argument("--trace", action="store_true",
                   help="transformer: windows by bench/lm_steps' rule, one line per step (loss, gradient norm, rate)")
    a = p.parse_args(argv)
    if a.iterations is not None and a.minutes is not None:
        p.error("give --iterations or --minutes, not both")
    if a.iterations is None and a.minutes is None:
        a.iterations = 2000
    checks = [(a.layers >= 1, "--layers must be at least 1"), (a.width >= 1, "--width must be at least 1"),
              (a.block >= 1, "--block must be at least 1"), (a.batch >= 1, "--batch must be at least 1"),
              (a.streams >= 1, "--streams must be at least 1"), (a.generate >= 0, "--generate must be >= 0"),
              (0.0 <= a.holdout < 1.0, "--holdout must be in [0, 1)"), (0.0 <= a.dropout < 1.0, "--dropout must be in [0, 1)"),
              (a.temperature >= 0.0, "--temperature must be >= 0"), (a.top_k >= 0, "--top-k must be >= 0"),
              (0.0 < a.top_p <= 1.0, "--top-p must be in (0, 1]"), (a.threads >= 1, "--threads must be at least 1"),
              (a.iterations is None or a.iterations >= 0, "--iterations must be >= 0"),
              (a.minutes is None or a.minutes > 0, "--minutes must be > 0"), (a.untimed_iterations >= 0, "--untimed-iterations must be >= 0"),
              (a.prompt != "", "--prompt must hold at least one character")]
    if a.architecture == "transformer":
        checks += [(a.heads >= 1, "--heads must be at least 1"),
                   (a.heads < 1 or a.width % a.heads == 0, "--width %d is not a multiple of --heads %d" % (a.width, a.heads))]
    for ok, message in checks:
        if not ok:
            p.error(message)
    return a


if __name__ == "__main__":
    ARGS = parse_args()
    # Size the thread pools before torch loads OpenMP and OpenBLAS (as bench/torch_g2p.py).
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)
    if ARGS.passive:
        os.environ["OMP_WAIT_POLICY"] = "passive"

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


# ------------------------------------------------------------------ loom's parameter names (one place)

def loom_names(model):
    """[(loom name, parts, how)]: loom's tensor is the parts (views of torch parameters) concatenated
    along dim 0 ("cat0") or 1 ("cat1"); with "sum", parts is a list of such lists for dim 0, and
    loom's tensor is the sum of their concatenations (loading puts it all in the first). Views share
    storage with the parameters, so loading copies into them. loom's Linear is x W + b with W
    [in, out], the transpose of torch's."""
    table = []
    if isinstance(model, GPT):
        D, p = model.width, "gpt"
        table += [(p + ".embedding", [model.token.weight], "cat0"),
                  (p + ".positions.table", [model.positions.weight], "cat0")]
        for i, blk in enumerate(model.blocks):
            n = "%s.layers.%d" % (p, i)
            for k, part in enumerate("qkv"):  # nanoGPT's fused c_attn, split
                table += [("%s.self_attn.%s.W" % (n, part), [blk.attn.qkv.weight[k * D:(k + 1) * D].t()], "cat0"),
                          ("%s.self_attn.%s.b" % (n, part), [blk.attn.qkv.bias[k * D:(k + 1) * D]], "cat0")]
            for loom, lin in (("self_attn.out", blk.attn.proj), ("linear1", blk.fc), ("linear2", blk.fc_proj)):
                table += [("%s.%s.W" % (n, loom), [lin.weight.t()], "cat0"), ("%s.%s.b" % (n, loom), [lin.bias], "cat0")]
            for loom, norm in (("norm1", blk.ln1), ("norm3", blk.ln2)):
                table += [("%s.%s.scale" % (n, loom), [norm.weight], "cat0"), ("%s.%s.bias" % (n, loom), [norm.bias], "cat0")]
        table += [(p + ".norm.scale", [model.ln_f.weight], "cat0"), (p + ".norm.bias", [model.ln_f.bias], "cat0")]
    else:
        # loom's LSTM: z = x W + b + h U, W [in, 4D], U [D, 4D], gates [input, forget, output, candidate];
        # torch's rows are [input, forget, candidate, output] and it has two biases (summed).
        D, p, order = model.width, "lstm", (0, 1, 3, 2)
        table.append((p + ".embedding", [model.embedding.weight], "cat0"))
        for i in range(model.layers):
            w_ih, w_hh = getattr(model.lstm, "weight_ih_l%d" % i), getattr(model.lstm, "weight_hh_l%d" % i)
            b_ih, b_hh = getattr(model.lstm, "bias_ih_l%d" % i), getattr(model.lstm, "bias_hh_l%d" % i)
            n = "%s.layers.%d" % (p, i)
            table += [(n + ".W", [w_ih[g * D:(g + 1) * D].t() for g in order], "cat1"),
                      (n + ".U", [w_hh[g * D:(g + 1) * D].t() for g in order], "cat1"),
                      (n + ".b", [[b[g * D:(g + 1) * D] for g in order] for b in (b_ih, b_hh)], "sum")]
        table += [(p + ".project.W", [model.head.weight.t()], "cat0"), (p + ".project.b", [model.head.bias], "cat0")]
    return table


# ------------------------------------------------------------------------------------------- data

class Corpus:
    """The alphabet of a text file, its training part and its held-out part (as id tensors)."""

    def __init__(self, path, holdout, spans=1):
        with open(path, encoding="utf-8") as f:
            self.text = f.read()
        if len(self.text) < 2:
            raise SystemExit("torch_lm: %s holds %d characters; a language model needs at least 2" % (path, len(self.text)))
        self.path = path
        self.alphabet = sorted(set(self.text))
        self.index = {ch: i for i, ch in enumerate(self.alphabet)}
        ids = self.encode(self.text, path)
        train, held = [], []  # lm's split: `spans` equal parts, the last `holdout` of each held out
        for k in range(spans):
            begin, end = len(ids) * k // spans, len(ids) * (k + 1) // spans
            cut = end - math.floor(holdout * (end - begin))
            train.append(ids[begin:cut])
            if cut < end:
                held.append(ids[cut:end])
        self.train = torch.cat(train)
        self.heldout = held or None

    def encode(self, text, where):
        ids = []
        for pos, ch in enumerate(text):
            if ch not in self.index:
                raise SystemExit("torch_lm: %s: character %r (at %d) is not in the alphabet of %s"
                                 % (where, ch, pos, self.path))
            ids.append(self.index[ch])
        return torch.tensor(ids, dtype=torch.long)

    def decode(self, ids):
        return "".join(self.alphabet[i] for i in ids)


# ----------------------------------------------------------------------------------------- models

class SelfAttention(nn.Module):
    def __init__(self, width, heads, block, dropout):
        super().__init__()
        self.heads, self.width = heads, width
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.attn_drop, self.resid_drop = nn.Dropout(dropout), nn.Dropout(dropout)
        self.register_buffer("allowed", torch.tril(torch.ones(block, block, dtype=torch.bool)), persistent=False)

    def split_heads(self, x):  # [B, T, D] -> [B, heads, T, D / heads]
        B, T, _ = x.shape
        return x.view(B, T, self.heads, self.width // self.heads).transpose(1, 2)

    def forward(self, x):
        """The training path, nanoGPT's manual attention: the whole window under the causal mask."""
        B, T, D = x.shape
        q, k, v = (self.split_heads(t) for t in self.qkv(x).split(D, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = self.attn_drop(F.softmax(att.masked_fill(~self.allowed[:T, :T], float("-inf")), dim=-1))
        return self.resid_drop(self.proj((att @ v).transpose(1, 2).reshape(B, T, D)))

    def cached(self, x, keys, values, start):
        """The sampling path: x [K, T, D] at positions start..start+T-1; their keys and values are
        written into the caches [K, heads, block, D / heads], and they attend to positions 0..start+T-1."""
        B, T, D = x.shape
        q, k, v = (self.split_heads(t) for t in self.qkv(x).split(D, dim=2))
        end = start + T
        keys[:, :, start:end] = k
        values[:, :, start:end] = v
        att = (q @ keys[:, :, :end].transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        if T > 1:  # the prompt: position start + t sees keys up to start + t
            att = att.masked_fill(~self.allowed[start:end, :end], float("-inf"))
        return self.proj((F.softmax(att, dim=-1) @ values[:, :, :end]).transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    def __init__(self, width, heads, block, dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attn = SelfAttention(width, heads, block, dropout)
        self.fc, self.fc_proj = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.mlp_drop = nn.Dropout(dropout)

    def mlp(self, x):
        return self.mlp_drop(self.fc_proj(F.gelu(self.fc(x))))  # exact (erf) GELU, as nn.GELU()

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))

    def cached(self, x, keys, values, start):
        x = x + self.attn.cached(self.ln1(x), keys, values, start)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block, layers, heads, width, dropout):
        super().__init__()
        self.vocab, self.block, self.layers, self.heads, self.width = vocab, block, layers, heads, width
        self.token, self.positions = nn.Embedding(vocab, width), nn.Embedding(block, width)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(width, heads, block, dropout) for _ in range(layers)])
        self.ln_f = nn.LayerNorm(width)
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(module.weight, 0.0, 0.02)
                if isinstance(module, nn.Linear):
                    nn.init.zeros_(module.bias)
            for blk in self.blocks:  # GPT-2's scaled init of the residual projections
                for lin in (blk.attn.proj, blk.fc_proj):
                    nn.init.normal_(lin.weight, 0.0, 0.02 / math.sqrt(2 * layers))

    def head(self, x):
        return F.linear(self.ln_f(x), self.token.weight)  # tied to the token embedding, no bias

    def forward(self, idx):
        """Logits [B, T, V] of ids [B, T], T <= block."""
        T = idx.size(1)
        x = self.drop(self.token(idx) + self.positions(torch.arange(T)))
        for blk in self.blocks:
            x = blk(x)
        return self.head(x)


class GPTCache:
    """Keys and values of every layer for K streams, [K, heads, block, D / heads] each."""

    def __init__(self, model, streams):
        shape = (streams, model.heads, model.block, model.width // model.heads)
        self.model, self.length = model, 0
        self.keys = [torch.zeros(shape) for _ in model.blocks]
        self.values = [torch.zeros(shape) for _ in model.blocks]

    def feed(self, idx):
        """Logits [K, T, V] of the next ids [K, T] (the prompt, or one id per stream)."""
        m, start, T = self.model, self.length, idx.size(1)
        if start + T > m.block:
            raise SystemExit("torch_lm: the transformer's context is %d characters; generation needs %d"
                             % (m.block, start + T))
        x = m.token(idx) + m.positions(torch.arange(start, start + T))
        for i, blk in enumerate(m.blocks):
            x = blk.cached(x, self.keys[i], self.values[i], start)
        self.length += T
        return m.head(x)


class CharLSTM(nn.Module):
    def __init__(self, vocab, layers, width, dropout):
        super().__init__()
        self.vocab, self.layers, self.width = vocab, layers, width
        self.embedding = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, width, num_layers=layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.top_dropout = nn.Dropout(dropout)  # nn.LSTM drops between its layers only
        self.head = nn.Linear(width, vocab)
        with torch.no_grad():
            for p in self.parameters():
                nn.init.uniform_(p, -0.08, 0.08)
            for i in range(layers):  # char-rnn: forget gates start remembering (bias 1 in all)
                getattr(self.lstm, "bias_ih_l%d" % i)[width:2 * width].fill_(1.0)
                getattr(self.lstm, "bias_hh_l%d" % i)[width:2 * width].fill_(0.0)

    def zero_state(self, streams):
        z = torch.zeros(self.layers, streams, self.width)
        return z, z.clone()

    def forward(self, idx, state):
        """Logits [B, T, V] of ids [B, T] from state (h, c); and the state after them."""
        out, state = self.lstm(self.embedding(idx), state)
        return self.head(self.top_dropout(out)), state


class LSTMCache:
    """The LSTM's sampling 'cache' is its state."""

    def __init__(self, model, streams):
        self.model, self.state, self.length = model, model.zero_state(streams), 0

    def feed(self, idx):
        logits, self.state = self.model(idx, self.state)
        self.length += idx.size(1)
        return logits


def make_model(a, vocab):
    if a.architecture == "transformer":
        return GPT(vocab, a.block, a.layers, a.heads, a.width, a.dropout)
    return CharLSTM(vocab, a.layers, a.width, a.dropout)


def make_cache(model, streams):
    return GPTCache(model, streams) if isinstance(model, GPT) else LSTMCache(model, streams)


# --------------------------------------------------------------------------------------- training

def make_optimizer(a, model):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    plain = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": a.weight_decay}, {"params": plain, "weight_decay": 0.0}],
                             lr=a.learning_rate, betas=(0.9, a.beta2), eps=1e-8)


def learning_rate(a, i, ratio):
    """The rate of iteration i; ratio is the cosine's progress in [0, 1] (ignored during warm-up)."""
    if i < a.warmup:
        return a.learning_rate * (i + 1) / (a.warmup + 1)
    return a.min_learning_rate + 0.5 * (1.0 + math.cos(math.pi * min(max(ratio, 0.0), 1.0))) * (a.learning_rate - a.min_learning_rate)


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


class RandomWindows:
    """The transformer's batches: random windows of block + 1 characters of the training text
    (--trace: window b of iteration i starts at splitmix64(i batch + b) mod (n - block), as
    bench/lm_steps.cpp's)."""

    def __init__(self, a, data, generator):
        if len(data) < a.block + 1:
            raise SystemExit("torch_lm: the training part holds %d characters, less than --block + 1 = %d"
                             % (len(data), a.block + 1))
        self.data, self.a, self.generator = data, a, generator
        self.offsets = torch.arange(a.block + 1)
        self.count = 0

    def next(self):
        if self.a.trace:
            n, b = len(self.data) - self.a.block, self.a.batch
            starts = torch.tensor([splitmix64(self.count * b + k) % n for k in range(b)])
            self.count += 1
            w = self.data[starts[:, None] + self.offsets]
            return w[:, :-1], w[:, 1:]
        starts = torch.randint(len(self.data) - self.a.block, (self.a.batch,), generator=self.generator)
        w = self.data[starts[:, None] + self.offsets]
        return w[:, :-1], w[:, 1:]


class Streams:
    """The LSTM's batches: stream b reads its own slice of the text in consecutive windows."""

    def __init__(self, a, data):
        S = len(data) // a.batch
        self.windows = (S - 1) // a.block if S > 0 else 0
        if self.windows < 1:
            raise SystemExit("torch_lm: %d streams of %d characters of training text leave no window of --block %d "
                             "(+ 1) per stream" % (a.batch, S, a.block))
        self.slices, self.block, self.count = data[:S * a.batch].view(a.batch, S), a.block, 0

    def next(self):
        """(inputs, targets, whether the state restarts from zero)."""
        w = self.count % self.windows
        self.count += 1
        x = self.slices[:, w * self.block:(w + 1) * self.block + 1]
        return x[:, :-1], x[:, 1:], w == 0


def train(a, model, corpus):
    """Trains in place; returns the figures of the trained: line and the logged losses."""
    optimizer = make_optimizer(a, model)
    generator = torch.Generator().manual_seed(a.seed)
    lstm = isinstance(model, CharLSTM)
    batches = Streams(a, corpus.train) if lstm else RandomWindows(a, corpus.train, generator)
    state = model.zero_state(a.batch) if lstm else None
    budget = None if a.minutes is None else 60.0 * a.minutes
    model.train()
    log, recent, i, warm_end, timed_from = [], [], 0, None, None
    best, best_state, eval_seconds = math.inf, None, 0.0
    held = corpus.heldout if a.eval_every > 0 else None

    def score_held_out():  # as lm --eval-every: the best weights are kept
        nonlocal best, best_state, eval_seconds
        t = time.perf_counter()
        nats = evaluate(model, held, a.block)
        model.train()
        print("iteration %d: held-out %.4f nats per character" % (i, nats), flush=True)
        if nats < best:
            best, best_state = nats, copy.deepcopy(model.state_dict())
        eval_seconds += time.perf_counter() - t

    start = time.perf_counter()
    while True:
        now = time.perf_counter() - start
        if (budget is None and i >= a.iterations) or (budget is not None and now >= budget):
            break
        if held is not None and i > 0 and i % a.eval_every == 0:
            score_held_out()
        if i == a.untimed_iterations:
            timed_from = (i, now)
        if budget is None:
            ratio = (i - a.warmup) / max(1, a.iterations - a.warmup)
        else:
            if i >= a.warmup and warm_end is None:
                warm_end = now
            ratio = 0.0 if warm_end is None else (now - warm_end) / max(1e-9, budget - warm_end)
        for group in optimizer.param_groups:
            group["lr"] = learning_rate(a, i, ratio)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.matmul_precision == "medium"):
            if lstm:
                x, y, restart = batches.next()
                if restart:
                    state = model.zero_state(a.batch)
                logits, state = model(x, state)
                state = tuple(s.detach().float() for s in state)
            else:
                x, y = batches.next()
                logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if a.clip > 0:
            norm = float(nn.utils.clip_grad_norm_(model.parameters(), a.clip))
        elif a.trace:
            norm = float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters())))
        if a.trace:
            print("step %d: loss %.6f, gradient norm %.6f, learning rate %.6e"
                  % (i, float(loss), norm, optimizer.param_groups[0]["lr"]), flush=True)
        optimizer.step()
        recent.append(float(loss))
        i += 1
        if a.log_every and i % a.log_every == 0:
            log.append((i, sum(recent) / len(recent)))
            print("iteration %d: loss %.4f (lr %.3g)" % (i, log[-1][1], learning_rate(a, i - 1, ratio)), flush=True)
            recent = []
    if held is not None:
        score_held_out()
        model.load_state_dict(best_state)
    elapsed = time.perf_counter() - start - eval_seconds
    first, t0 = timed_from if timed_from is not None else (i, elapsed)
    iterations, seconds = i - first, elapsed - t0
    tokens = iterations * a.batch * a.block
    rate = tokens / seconds if seconds > 0 else 0.0
    print("trained: %d iterations, %d tokens in %.3f s, %.1f tokens/s" % (iterations, tokens, seconds, rate), flush=True)
    return {"iterations": i, "timed_iterations": iterations, "train_tokens": tokens, "train_s": round(seconds, 4),
            "train_tokens_per_s": round(rate, 1), "loss_log": log}


# ------------------------------------------------------------------------------------- evaluation

def evaluate(model, texts, block):
    """Mean nats per predicted character over the texts (a list of id tensors), each cut into
    consecutive windows (see the docstring at the top)."""
    sums = [evaluate_sum(model, ids, block) for ids in texts]
    return sum(s[0] for s in sums) / sum(s[1] for s in sums)


@torch.no_grad()
def evaluate_sum(model, ids, block):
    """(summed nats, predicted characters) of one text."""
    model.eval()
    n = len(ids)
    if n < 2:
        raise SystemExit("torch_lm: the evaluation text needs at least 2 characters, it has %d" % n)
    total, count = 0.0, 0
    full = (n - 1) // block  # windows of block predictions
    if isinstance(model, CharLSTM):
        state = model.zero_state(1)
        chunk = max(block, 4096)  # the state carries, so the chunk length is only bookkeeping
        for s in range(0, n - 1, chunk):
            e = min(s + chunk, n - 1)
            logits, state = model(ids[None, s:e], state)
            total += float(F.cross_entropy(logits[0], ids[s + 1:e + 1], reduction="sum"))
            count += e - s
        return total, count
    per_batch = max(1, 8192 // block)
    for k0 in range(0, full, per_batch):
        k1 = min(full, k0 + per_batch)
        w = torch.stack([ids[k * block:(k + 1) * block + 1] for k in range(k0, k1)])
        logits = model(w[:, :-1])
        total += float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), w[:, 1:].reshape(-1), reduction="sum"))
        count += w[:, 1:].numel()
    if full * block < n - 1:  # the shorter last window
        w = ids[full * block:]
        total += float(F.cross_entropy(model(w[None, :-1])[0], w[1:], reduction="sum"))
        count += len(w) - 1
    assert count == n - 1
    return total, count


# --------------------------------------------------------------------------------------- sampling

def next_distribution(logits, a):
    """Probabilities [K, V] (unnormalized) of the next character after temperature, top-k, top-p."""
    if a.temperature == 0.0:
        return F.one_hot(logits.argmax(-1), logits.size(-1)).float()
    logits = logits / a.temperature
    if 0 < a.top_k < logits.size(-1):
        kth = torch.topk(logits, a.top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = F.softmax(logits, dim=-1)
    if a.top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True, stable=True)
        drop = (torch.cumsum(sorted_probs, -1) - sorted_probs) >= a.top_p  # mass before it already reaches p
        probs = probs.scatter(-1, order, sorted_probs.masked_fill(drop, 0.0))
    return probs


@torch.no_grad()
def generate(a, model, corpus, steps, streams, on_step=None):
    """ids [K, steps] drawn through the cache; on_step(prefix [K, t], log-probs [K, V]) sees every step."""
    model.eval()
    prompt = corpus.encode(a.prompt, "--prompt")
    if isinstance(model, GPT) and len(prompt) + steps > model.block:
        raise SystemExit("torch_lm: prompt (%d characters) + --generate %d exceeds the transformer's --block %d "
                         "(no cropping)" % (len(prompt), steps, model.block))
    generator = torch.Generator().manual_seed(a.seed)
    cache = make_cache(model, streams)
    prefix = prompt[None, :].repeat(streams, 1)
    out = torch.zeros(streams, steps, dtype=torch.long)
    logits = cache.feed(prefix)[:, -1]
    for t in range(steps):
        if on_step is not None:
            on_step(torch.cat([prefix, out[:, :t]], 1), F.log_softmax(logits, -1))
        out[:, t] = torch.multinomial(next_distribution(logits, a), 1, generator=generator)[:, 0]
        if t + 1 < steps:
            logits = cache.feed(out[:, t:t + 1])[:, -1]
    return out


def sample(a, model, corpus):
    start = time.perf_counter()
    out = generate(a, model, corpus, a.generate, a.streams)
    seconds = time.perf_counter() - start
    chars = a.generate * a.streams
    text = corpus.decode(out[0].tolist())
    print(a.prompt + text, flush=True)
    rate = chars / seconds if seconds > 0 else 0.0
    print("generated: %d characters in %.3f s, %.1f characters/s (%d streams)" % (chars, seconds, rate, a.streams), flush=True)
    return {"generated_characters": chars, "generate_s": round(seconds, 4), "generated_characters_per_s": round(rate, 1),
            "generated_text": text}


# -------------------------------------------------------------------------------------- safetensors

def save_safetensors(model, path, metadata):
    header, blobs, offset = {"__metadata__": {k: str(v) for k, v in metadata.items()}}, [], 0
    for name, parts, how in loom_names(model):
        with torch.no_grad():
            t = sum(torch.cat(p) for p in parts) if how == "sum" else torch.cat(parts, 0 if how == "cat0" else 1)
        data = t.detach().contiguous().to(torch.float32).numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """{name: float32 tensor} of a safetensors file (F32 tensors only)."""
    import numpy
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise SystemExit("torch_lm: %s is not a safetensors file (%d bytes)" % (path, len(raw)))
    n, = struct.unpack_from("<Q", raw, 0)
    if 8 + n > len(raw):
        raise SystemExit("torch_lm: %s: header of %d bytes past the end of the file" % (path, n))
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        count = math.prod(info["shape"])
        if info["dtype"] != "F32" or end - begin != 4 * count or 8 + n + end > len(raw):
            raise SystemExit("torch_lm: %s: tensor %s is not %s F32 data inside the file" % (path, name, info["shape"]))
        array = numpy.frombuffer(raw, dtype="<f4", count=count, offset=8 + n + begin)
        out[name] = torch.from_numpy(array.astype("float32")).view(info["shape"])
    return out


def load_safetensors(model, path):
    tensors, used = read_safetensors(path), set()
    with torch.no_grad():
        for name, parts, how in loom_names(model):
            if name not in tensors:
                raise SystemExit("torch_lm: %s has no tensor %s (the model's sizes must be the file's)" % (path, name))
            used.add(name)
            value, dim = tensors[name], 1 if how == "cat1" else 0
            if how == "sum":  # all of it into the first concatenation, the others zero
                for rest in parts[1:]:
                    for view in rest:
                        view.zero_()
                parts = parts[0]
            expected = list(parts[0].shape)
            expected[dim] = sum(v.shape[dim] for v in parts)
            if list(value.shape) != expected:
                raise SystemExit("torch_lm: %s: %s is %s, the model wants %s" % (path, name, list(value.shape), expected))
            for view, piece in zip(parts, value.split([v.shape[dim] for v in parts], dim)):
                view.copy_(piece)
    extra = sorted(set(tensors) - used)
    if extra:
        raise SystemExit("torch_lm: %s holds tensors the model has no place for: %s" % (path, ", ".join(extra)))


# ------------------------------------------------------------------------------------------ checks

@torch.no_grad()
def full_logits(model, ids):
    """Logits [K, T, V] of a whole prefix [K, T] by the ordinary forward (no cache)."""
    model.eval()
    if isinstance(model, GPT):
        return model(ids)
    return model(ids, model.zero_state(ids.size(0)))[0]


def loom_formula_logits(t, ids, a):
    """Logits [T, V] of ids [T] computed from a safetensors file's tensors t alone, by loom's formulas
    (x W + b, separate q, k, v, LSTM gates [input, forget, output, candidate]): it checks that the
    names and layouts of loom_names() say what loom will compute."""
    def norm(x, name):
        return F.layer_norm(x, x.shape[-1:], t[name + ".scale"], t[name + ".bias"], 1e-5)

    def linear(x, name):
        return x @ t[name + ".W"] + t[name + ".b"]

    T, D = len(ids), a.width
    if a.architecture == "transformer":
        hd = D // a.heads
        x = t["gpt.embedding"][ids] + t["gpt.positions.table"][:T]
        future = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
        for i in range(a.layers):
            n = "gpt.layers.%d" % i
            h = norm(x, n + ".norm1")
            heads = []
            for j in range(a.heads):
                q, k, v = (linear(h, "%s.self_attn.%s" % (n, p))[:, j * hd:(j + 1) * hd] for p in "qkv")
                heads.append(torch.softmax((q @ k.t() / math.sqrt(hd)).masked_fill(future, float("-inf")), -1) @ v)
            x = x + linear(torch.cat(heads, 1), n + ".self_attn.out")
            h = linear(norm(x, n + ".norm3"), n + ".linear1")
            x = x + linear(0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0))), n + ".linear2")
        return norm(x, "gpt.norm") @ t["gpt.embedding"].t()
    x = t["lstm.embedding"][ids]
    for i in range(a.layers):
        n, h, c, out = "lstm.layers.%d" % i, torch.zeros(D), torch.zeros(D), []
        for s in range(T):
            z = x[s] @ t[n + ".W"] + t[n + ".b"] + h @ t[n + ".U"]
            c = torch.sigmoid(z[D:2 * D]) * c + torch.sigmoid(z[:D]) * torch.tanh(z[3 * D:])
            h = torch.sigmoid(z[2 * D:3 * D]) * torch.tanh(c)
            out.append(h)
        x = torch.stack(out)
    return linear(x, "lstm.project")


def self_check(a, model, corpus):
    """Cached sampling against the full forward at each of 20 steps; the safetensors round trip."""
    worst = [0.0, 0]

    def compare(prefix, cached_logp):
        full = F.log_softmax(full_logits(model, prefix)[:, -1], -1)
        worst[0] = max(worst[0], float((full - cached_logp).abs().max()))
        worst[1] += 1

    streams = max(2, a.streams)
    generate(a, model, corpus, 20, streams, compare)
    print("self-check: cached sampling vs full forward, max |log p difference| %.3g over %d steps of %d streams"
          % (worst[0], worst[1], streams), flush=True)
    length = min(200, model.block) if isinstance(model, GPT) else 200
    probe = torch.cat([corpus.encode(a.prompt, "--prompt"), corpus.train[:length]])[:length]
    # Save, load into a fresh model, save again: the files must be equal byte for byte, the logits
    # equal up to rounding (the LSTM's two torch biases come back as one sum and a zero).
    paths = []
    try:
        for _ in range(2):
            fd, path = tempfile.mkstemp(suffix=".safetensors")
            os.close(fd)
            paths.append(path)
        save_safetensors(model, paths[0], {})
        copy = make_model(a, len(corpus.alphabet))
        load_safetensors(copy, paths[0])
        save_safetensors(copy, paths[1], {})
        same_file = open(paths[0], "rb").read() == open(paths[1], "rb").read()
        expected = full_logits(model, probe[None])[0]
        round_trip = float((expected - full_logits(copy, probe[None])[0]).abs().max())
        formula = float((expected - loom_formula_logits(read_safetensors(paths[0]), probe, a)).abs().max())
    finally:
        for path in paths:
            os.remove(path)
    print("self-check: safetensors round trip, %s file, max |logit difference| %.3g over %d positions"
          % ("the same" if same_file else "a DIFFERENT", round_trip, len(probe)), flush=True)
    print("self-check: loom's formulas on the file's tensors vs the model, max |logit difference| %.3g" % formula, flush=True)
    return {"self_check_max_logp_difference": worst[0], "self_check_steps": worst[1],
            "self_check_round_trip_same_file": same_file, "self_check_round_trip_difference": round_trip,
            "self_check_formula_difference": formula,
            "self_check_passed": worst[0] < 1e-5 and same_file and round_trip < 1e-5 and formula < 1e-4}


# -------------------------------------------------------------------------------------------- main

def main(a):
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(a.threads)
    torch.manual_seed(a.seed)
    corpus = Corpus(a.train, a.holdout, a.holdout_spans)
    eval_ids = [corpus.encode(open(a.eval, encoding="utf-8").read(), a.eval)] if a.eval else corpus.heldout
    logits_ids = corpus.encode(a.logits_of, "--logits-of") if a.logits_of is not None else None
    if a.architecture == "transformer":
        if a.generate and len(a.prompt) + a.generate > a.block:
            raise SystemExit("torch_lm: prompt (%d characters) + --generate %d exceeds the transformer's --block %d "
                             "(no cropping)" % (len(a.prompt), a.generate, a.block))
        if logits_ids is not None and len(logits_ids) > a.block:
            raise SystemExit("torch_lm: --logits-of has %d characters, more than --block %d" % (len(logits_ids), a.block))
        if a.self_check and len(a.prompt) + 20 > a.block:
            raise SystemExit("torch_lm: --self-check generates 20 characters after the prompt: --block %d is too short" % a.block)
    model = make_model(a, len(corpus.alphabet))
    if a.load_safetensors:
        load_safetensors(model, a.load_safetensors)
    result = {"engine": "pytorch", "torch": torch.__version__, "threads": a.threads, "architecture": a.architecture,
              "layers": a.layers, "heads": a.heads if a.architecture == "transformer" else None, "width": a.width,
              "block": a.block, "batch": a.batch, "dropout": a.dropout, "seed": a.seed, "alphabet": len(corpus.alphabet),
              "train_characters": len(corpus.train), "parameters": sum(p.numel() for p in model.parameters())}
    result.update(train(a, model, corpus))
    if eval_ids is not None:
        nats = evaluate(model, eval_ids, a.block)
        name = a.eval if a.eval else "held-out"
        print("eval %s: %.4f nats per character (%.4f bits)" % (name, nats, nats / math.log(2)), flush=True)
        result.update(eval_file=name, eval_characters=len(eval_ids), eval_nats=nats, eval_bits=nats / math.log(2))
    if a.save_safetensors:
        save_safetensors(model, a.save_safetensors, {"architecture": a.architecture, "layers": a.layers,
                                                     "heads": a.heads, "width": a.width, "block": a.block,
                                                     "alphabet": json.dumps("".join(corpus.alphabet))})
    if a.logits_of is not None:
        logits = full_logits(model, logits_ids[None])[0]
        print(json.dumps({"logits_of": a.logits_of, "logits": logits.tolist()}), flush=True)
    if a.generate > 0:
        result.update(sample(a, model, corpus))
    if a.self_check:
        result.update(self_check(a, model, corpus))
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1)
    result["omp_wait_policy_env"] = os.environ.get("OMP_WAIT_POLICY", "")
    result["openblas_coretype_env"] = os.environ.get("OPENBLAS_CORETYPE", "")
    if a.json:
        print(json.dumps(result))
    if a.self_check and not result["self_check_passed"]:
        raise SystemExit("torch_lm: self-check failed")
    return 0


if __name__ == "__main__":
    sys.exit(main(ARGS))
