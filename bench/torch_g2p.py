#!/usr/bin/python3
"""PyTorch peer of loom's grapheme-to-phoneme (G2P) sample: an attention seq2seq model that reads
a word's spelling and writes its pronunciation (CMUdict, ARPAbet without stress). It measures

  * training: forward + backward + Adam of one batch (words/s, ms/step), and
  * decoding: batched beam search under torch.no_grad() (words/s),

at --threads N (intra-op; inter-op 1), plus the process's peak RSS (getrusage ru_maxrss).

    env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/torch_g2p.py --threads 1 [--json]
        [--mode train|decode|both] [--batch 64] [--steps 30] [--warmup 3]
        [--decode-batch 128] [--decode-words 6336] [--beam 5] [--max-len 30]
    env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/torch_g2p.py --threads 2 --train-minutes 3
    env -u OPENBLAS_CORETYPE /usr/bin/python3 bench/torch_g2p.py --architecture transformer [--decode-cache]
        [--layers 3] [--model-dim 128] [--heads 4] [--feedforward 512] [--dropout 0] [--loom-model M.loom]
    /usr/bin/python3 bench/torch_g2p.py --architecture transformer --check   # cached step == whole prefix

How the loom side matches it:

  * Data: /work/shared/data/cmudict/cmudict-{train,dev}.dict (never copied into the project).
    A trailing `# comment` is dropped, a word's `(n)` variant suffix is dropped, stress digits are
    dropped from phonemes (AH0 -> AH).
  * Vocabularies (fixed ids): letters 0..28 = "'-.abcdefghijklmnopqrstuvwxyz" (any other
    character is an error); phonemes 0 = </s>, 1 = <s>, 2..40 = AA AE AH AO AW AY B CH D DH EH ER
    EY F G HH IH IY JH K L M N NG OW OY P R S SH T TH UH UW V W Y Z ZH.
  * Model (sizes are options): letter embedding E=64 -> bidirectional LSTM, H=128 per direction
    -> encoder states hbar [T, 2H=256] (ragged lengths, packed). Decoder: phoneme embedding E=64,
    LSTMCell D=256 whose input is [emb(y_{t-1}); htilde_{t-1}] (input feeding); h, c, htilde start
    at zero, y_0 = <s>. Luong "general" attention: keys = W_a hbar (W_a 256x256, no bias, once per
    word), score_s = h_t . key_s, softmax over the word's real letters only, c_t = sum_s a_s hbar_s.
    htilde_t = tanh(W_c [c_t; h_t]) (512 -> 256, no bias); logits = W_o htilde_t + b_o (256 -> 41).
    Initialisation is PyTorch's default (it does not matter for speed).
  * Loss: cross-entropy summed over every real target step (the phonemes, then </s>), divided by
    the number of words in the batch. Adam, lr 2e-3, betas (0.9, 0.999), eps 1e-8, no clipping.
    The decoder runs max-target-length steps for the whole padded batch; padded steps are left out
    of the loss. The output projection and the loss are computed once after the step loop, over
    the stacked htilde (the same arithmetic as per step).
  * Training batches: every line of cmudict-train.dict in file order (variants included), cut in
    consecutive chunks of --batch; step k uses chunk k (k = 0 .. warmup+steps-1), the first
    --warmup steps untimed. Input tensors are built before timing.
  * Decoding: the distinct words of cmudict-dev.dict in file order (the first --decode-words), in
    consecutive batches of --decode-batch, beam width K = --beam, at most --max-len tokens
    (</s> included). The first batch is decoded once untimed (warm-up), then all batches are timed.
    The beam rule is in beam_search()'s docstring.

--architecture transformer: the Transformer of samples/g2p (layers/transformer.cpp), see
TransformerG2P's docstring. Same data, batches, timing and JSON fields; the loss adds label
smoothing, the optimizer Adam(lr 1e-3, betas (0.9, 0.98), eps 1e-8) with gradient clipping at
norm 5 (as the sample's). Decoding, same beam rule, two ways:
  * default: nn.TransformerDecoder re-run over the whole prefix at every step (what its users do);
  * --decode-cache: a key/value cache per layer (TransformerCachedBeam), PyTorch's best.
--check compares the two step by step (logits to 1e-4) on a few words; --loom-model loads the
parameters of a loom model file (g2p --architecture transformer --save) into the peer.
"""
import argparse
import json
import math
import os
import random
import resource
import sys
import time

DATA = "/work/shared/data/cmudict"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads (inter-op: 1)")
    p.add_argument("--blas-threads", type=int, default=None, help="OpenBLAS threads (default: --threads)")
    p.add_argument("--passive", action="store_true",
                   help="OMP_WAIT_POLICY=passive: idle OpenMP workers sleep instead of spinning (at 2 "
                        "threads the spinning workers starve OpenBLAS's own threads; see bench/README.md)")
    p.add_argument("--mode", choices=["train", "decode", "both"], default="both")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--embed", type=int, default=64)
    p.add_argument("--hidden", type=int, default=128, help="encoder LSTM hidden per direction")
    p.add_argument("--dec-hidden", type=int, default=256)
    p.add_argument("--lr", type=float, default=None, help="Adam's rate (default: lstm 2e-3, transformer 1e-3)")
    p.add_argument("--architecture", choices=["lstm", "transformer"], default="lstm")
    p.add_argument("--layers", type=int, default=3, help="transformer: encoder layers, and as many decoder layers")
    p.add_argument("--model-dim", type=int, default=128, help="transformer: d_model")
    p.add_argument("--heads", type=int, default=4, help="transformer: attention heads")
    p.add_argument("--feedforward", type=int, default=512, help="transformer: dim_feedforward")
    p.add_argument("--dropout", type=float, default=0.0, help="transformer: dropout")
    p.add_argument("--label-smoothing", type=float, default=0.1, help="transformer: label smoothing of the loss")
    p.add_argument("--lr-warmup", type=int, default=1000,
                   help="transformer, --train-minutes only: steps over which the rate rises linearly (as g2p's)")
    p.add_argument("--decode-cache", action="store_true",
                   help="transformer: decode with a key/value cache per layer (default: re-run the whole prefix)")
    p.add_argument("--check", action="store_true",
                   help="transformer: check that cached decoding gives the prefix re-run's logits, then exit")
    p.add_argument("--loom-model", default=None,
                   help="transformer: decode with the parameters of this loom model file (g2p --save)")
    p.add_argument("--decode-batch", type=int, default=128)
    p.add_argument("--decode-words", type=int, default=None, help="default: all distinct dev words")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--max-len", type=int, default=30)
    p.add_argument("--fixed-steps", action="store_true",
                   help="beam search always runs --max-len steps (equal work whatever the weights)")
    p.add_argument("--train-minutes", type=float, default=None,
                   help="sanity mode: train this long on shuffled chunks, then report dev WER/PER")
    p.add_argument("--save-state", default=None,
                   help="after --train-minutes: write the trained weights here (torch.save of the state dict)")
    p.add_argument("--load-state", default=None,
                   help="decode with these trained weights (from --save-state): hypotheses as long as real ones")
    p.add_argument("--data", default=DATA)
    return p.parse_args()


if __name__ == "__main__":
    ARGS = parse_args()
    # Size the thread pools before torch loads OpenMP and OpenBLAS (the pthread build, whose own
    # pool would otherwise take every core whatever torch.set_num_threads says), as
    # /work/shared/peer/torch_qa.py does.
    ARGS.blas_threads = ARGS.blas_threads or ARGS.threads
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = str(ARGS.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)
    if ARGS.passive:
        os.environ["OMP_WAIT_POLICY"] = "passive"

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


LETTERS = "'-.abcdefghijklmnopqrstuvwxyz"
PHONEMES = ["</s>", "<s>"] + ("AA AE AH AO AW AY B CH D DH EH ER EY F G HH IH IY JH K L M N NG OW OY "
                              "P R S SH T TH UH UW V W Y Z ZH").split()
EOS, BOS = 0, 1
LETTER_ID = {ch: i for i, ch in enumerate(LETTERS)}
PHONEME_ID = {p: i for i, p in enumerate(PHONEMES)}
assert len(LETTERS) == 29 and len(PHONEMES) == 41


# ----------------------------------------------------------------------------------------- data

def read_dict(path):
    """[(word, [phoneme ids])] for every line of a CMUdict file, in file order."""
    entries = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            word, phones = line[0], line[1:]
            if word.endswith(")"):
                word = word[:word.rindex("(")]
            for ch in word:
                if ch not in LETTER_ID:
                    raise ValueError("%s:%d: character %r is not in the letter vocabulary" % (path, lineno, ch))
            ids = []
            for p in phones:
                p = p.rstrip("012")
                if p not in PHONEME_ID or PHONEME_ID[p] < 2:
                    raise ValueError("%s:%d: unknown phoneme %r" % (path, lineno, p))
                ids.append(PHONEME_ID[p])
            entries.append((word, ids))
    return entries


def letter_tensor(words):
    """Padded letter ids [B, Tmax] (pad 0, masked out) and lengths [B]."""
    lengths = torch.tensor([len(w) for w in words], dtype=torch.long)
    letters = torch.zeros(len(words), int(lengths.max()), dtype=torch.long)
    for i, w in enumerate(words):
        letters[i, :len(w)] = torch.tensor([LETTER_ID[ch] for ch in w])
    return letters, lengths


def make_batch(entries):
    """Tensors of one training batch: letters, lengths, decoder inputs [<s>, p1..pn] and targets
    [p1..pn, </s>] (both [B, Umax], targets padded with -100 = ignored)."""
    letters, lengths = letter_tensor([w for w, _ in entries])
    umax = max(len(p) for _, p in entries) + 1
    y_in = torch.full((len(entries), umax), EOS, dtype=torch.long)
    y_out = torch.full((len(entries), umax), -100, dtype=torch.long)
    for i, (_, p) in enumerate(entries):
        y_in[i, :len(p) + 1] = torch.tensor([BOS] + p)
        y_out[i, :len(p) + 1] = torch.tensor(p + [EOS])
    return dict(letters=letters, lengths=lengths, y_in=y_in, y_out=y_out, words=len(entries),
                letter_tokens=int(lengths.sum()), target_tokens=sum(len(p) + 1 for _, p in entries))


def dev_references(entries):
    """The distinct words in file order and each word's list of reference pronunciations."""
    refs = {}
    for w, p in entries:
        refs.setdefault(w, []).append(p)
    return list(refs), refs


# ---------------------------------------------------------------------------------------- model

class G2P(nn.Module):
    def __init__(self, embed=64, hidden=128, dec_hidden=256):
        super().__init__()
        self.letter_emb = nn.Embedding(len(LETTERS), embed)
        self.encoder = nn.LSTM(embed, hidden, batch_first=True, bidirectional=True)
        enc = 2 * hidden
        self.phone_emb = nn.Embedding(len(PHONEMES), embed)
        self.cell = nn.LSTMCell(embed + dec_hidden, dec_hidden)
        self.W_a = nn.Linear(enc, dec_hidden, bias=False)
        self.W_c = nn.Linear(enc + dec_hidden, dec_hidden, bias=False)
        self.out = nn.Linear(dec_hidden, len(PHONEMES))
        self.dec_hidden = dec_hidden

    def encode(self, letters, lengths):
        """hbar [B, T, 2H] (zeros past each word's end), keys = W_a hbar, mask [B, T] of real letters."""
        packed = nn.utils.rnn.pack_padded_sequence(self.letter_emb(letters), lengths, batch_first=True,
                                                   enforce_sorted=False)
        hbar, _ = self.encoder(packed)
        hbar, _ = nn.utils.rnn.pad_packed_sequence(hbar, batch_first=True, total_length=letters.size(1))
        mask = torch.arange(letters.size(1))[None, :] < lengths[:, None]
        return hbar, self.W_a(hbar), mask

    def initial_state(self, rows):
        z = torch.zeros(rows, self.dec_hidden)
        return z, z, z  # h, c, htilde

    def step(self, y_emb, state, hbar, keys, mask):
        """One decoder step: the new (h, c, htilde)."""
        h, c, htilde = state
        h, c = self.cell(torch.cat([y_emb, htilde], 1), (h, c))
        scores = torch.bmm(keys, h.unsqueeze(2)).squeeze(2).masked_fill(~mask, float("-inf"))
        context = torch.bmm(torch.softmax(scores, 1).unsqueeze(1), hbar).squeeze(1)
        htilde = torch.tanh(self.W_c(torch.cat([context, h], 1)))
        return h, c, htilde

    def loss(self, b):
        """Cross-entropy summed over the real target steps, divided by the number of words."""
        hbar, keys, mask = self.encode(b["letters"], b["lengths"])
        y_emb = self.phone_emb(b["y_in"])  # [B, U, E]
        state = self.initial_state(b["words"])
        htildes = []
        for t in range(y_emb.size(1)):
            state = self.step(y_emb[:, t], state, hbar, keys, mask)
            htildes.append(state[2])
        logits = self.out(torch.stack(htildes, 1))  # [B, U, 41]
        return F.cross_entropy(logits.flatten(0, 1), b["y_out"].flatten(), ignore_index=-100,
                               reduction="sum") / b["words"]


def sinusoidal_positions(count, dim):
    """pe[p, 2i] = sin(p / 10000^(2i/dim)), pe[p, 2i+1] = cos(p / 10000^(2i/dim)), [count, dim]."""
    position = torch.arange(count, dtype=torch.float64)[:, None]
    frequency = torch.pow(10000.0, -torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    pe = torch.zeros(count, dim, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * frequency)
    pe[:, 1::2] = torch.cos(position * frequency)
    return pe.float()


class TransformerG2P(nn.Module):
    """The Transformer of samples/g2p (layers/transformer.cpp), d = --model-dim:

      * source: letter embedding [29, d] x sqrt(d) + sinusoidal positions, dropout; `layers`
        nn.TransformerEncoderLayer(d, heads, ff, dropout, relu, norm_first=True) and a final
        LayerNorm (nn.TransformerEncoder(norm=...)); the padding masked (src_key_padding_mask);
      * target: phoneme embedding [41, d] x sqrt(d) + the same positions (no dropout); `layers`
        nn.TransformerDecoderLayer(d, heads, ff, dropout, norm_first=True) under the causal mask with
        memory_key_padding_mask, a final LayerNorm, Linear(d, 41) with bias.

    loom has no dropout on the attention weights (only on each block's output and inside the
    feed-forward block), so the attention modules' own dropout is set to 0 here. Initialisation as
    loom's: embeddings normal(0, 1/sqrt(d)), every projection (q, k, v each) Glorot-uniform, biases 0,
    layer norms 1 and 0.
    """

    def __init__(self, layers=3, d=128, heads=4, ff=512, dropout=0.1, label_smoothing=0.1, max_positions=512):
        super().__init__()
        assert d % heads == 0 and d % 2 == 0
        self.d, self.heads, self.label_smoothing = d, heads, label_smoothing
        self.scale = math.sqrt(d)
        self.letter_emb = nn.Embedding(len(LETTERS), d)
        self.phone_emb = nn.Embedding(len(PHONEMES), d)
        self.dropout = nn.Dropout(dropout)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, heads, ff, dropout, activation="relu", batch_first=True, norm_first=True),
            layers, norm=nn.LayerNorm(d))
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d, heads, ff, dropout, activation="relu", batch_first=True, norm_first=True),
            layers, norm=nn.LayerNorm(d))
        self.out = nn.Linear(d, len(PHONEMES))
        self.register_buffer("pe", sinusoidal_positions(max_positions, d), persistent=False)
        self._causal = {}
        for module in self.modules():
            if isinstance(module, nn.MultiheadAttention):
                module.dropout = 0.0  # no dropout on the attention weights, as loom
        with torch.no_grad():
            for emb in (self.letter_emb, self.phone_emb):
                nn.init.normal_(emb.weight, 0.0, 1.0 / math.sqrt(d))
            for module in self.modules():
                if isinstance(module, nn.MultiheadAttention):
                    for part in module.in_proj_weight.split(d):  # q, k, v: each Glorot [d, d]
                        nn.init.xavier_uniform_(part)
                    nn.init.zeros_(module.in_proj_bias)
                elif isinstance(module, nn.Linear):
                    nn.init.xavier_uniform_(module.weight)
                    nn.init.zeros_(module.bias)

    def causal(self, n):
        """The causal mask [n, n]: -inf above the diagonal (nn.Transformer.generate_square_subsequent_mask)."""
        if n not in self._causal:
            self._causal[n] = torch.triu(torch.full((n, n), float("-inf")), 1)
        return self._causal[n]

    def encode(self, letters, lengths):
        """The encoder's output [B, T, d] and the padding [B, T] (True past each word's end)."""
        pad = torch.arange(letters.size(1))[None, :] >= lengths[:, None]
        x = self.dropout(self.letter_emb(letters) * self.scale + self.pe[:letters.size(1)])
        return self.encoder(x, src_key_padding_mask=pad), pad

    def embed_targets(self, y):
        """Phoneme ids [B, U] -> [B, U, d]: embedding x sqrt(d) + positions 0..U-1 (no dropout, as loom)."""
        return self.phone_emb(y) * self.scale + self.pe[:y.size(1)]

    def loss(self, b):
        """Label-smoothed cross-entropy summed over the real target steps, divided by the number of words.
        Target padding needs no key mask: it comes after each word's real steps, which the causal mask hides it from."""
        memory, pad = self.encode(b["letters"], b["lengths"])
        u = b["y_in"].size(1)
        h = self.decoder(self.embed_targets(b["y_in"]), memory, tgt_mask=self.causal(u), memory_key_padding_mask=pad)
        logits = self.out(h)
        return F.cross_entropy(logits.flatten(0, 1), b["y_out"].flatten(), ignore_index=-100, reduction="sum",
                               label_smoothing=self.label_smoothing) / b["words"]

    def load_loom(self, path):
        """Sets every parameter from a loom model file of samples/g2p's Transformer (g2p --save)."""
        records, params = read_loom_model(path)
        settings = dict(zip(*[iter(records["settings"].split())] * 2))
        want = {"layers": len(self.encoder.layers), "model": self.d, "heads": self.heads,
                "feedforward": self.encoder.layers[0].linear1.out_features}
        for key, value in want.items():
            if float(settings[key]) != value:
                raise SystemExit("torch_g2p: %s has %s %s, the peer was made with %s (give the file's sizes)"
                                 % (path, key, settings[key], value))
        used = set()

        def take(name):
            used.add(name)
            return params[name]

        def linear(module, name):  # loom: x W + b, W [in, out]; torch: x W^T + b
            module.weight.copy_(take(name + ".W").t())
            module.bias.copy_(take(name + ".b"))

        def norm(module, name):
            module.weight.copy_(take(name + ".scale"))
            module.bias.copy_(take(name + ".bias"))

        def attention(module, name):
            module.in_proj_weight.copy_(torch.cat([take("%s.%s.W" % (name, p)).t() for p in "qkv"]))
            module.in_proj_bias.copy_(torch.cat([take("%s.%s.b" % (name, p)) for p in "qkv"]))
            linear(module.out_proj, name + ".out")

        def layers(stack, name, attentions, norms):
            # An encoder layer (self_attn, norm1-2) or a decoder layer (and multihead_attn, norm3).
            for i, layer in enumerate(stack.layers):
                n = "%s.layers.%d" % (name, i)
                for a in attentions:
                    attention(getattr(layer, a), "%s.%s" % (n, a))
                linear(layer.linear1, n + ".linear1")
                linear(layer.linear2, n + ".linear2")
                for k in range(1, norms + 1):
                    norm(getattr(layer, "norm%d" % k), "%s.norm%d" % (n, k))
            norm(stack.norm, name + ".norm")

        # The model's name prefixes its parameters' (layers::Seq2SeqTransformer: NAME.source_embedding, ...).
        model = next((n[:-len(".source_embedding")] for n in params if n.endswith(".source_embedding")), None)
        if model is None:
            raise SystemExit("torch_g2p: %s holds no NAME.source_embedding: not a Seq2SeqTransformer's file" % path)
        with torch.no_grad():
            self.letter_emb.weight.copy_(take(model + ".source_embedding"))
            self.phone_emb.weight.copy_(take(model + ".target_embedding"))
            layers(self.encoder, model + ".encoder", ["self_attn"], 2)
            layers(self.decoder, model + ".decoder", ["self_attn", "multihead_attn"], 3)
            linear(self.out, model + ".project")
        if used != set(params):
            raise SystemExit("torch_g2p: %s holds parameters the peer has no place for: %s"
                             % (path, ", ".join(sorted(set(params) - used))))


def read_loom_model(path):
    """The records and parameters of a loom model file (training/model_file.cpp in a checked file,
    core/serialization.cpp): header "LOOMFILE", version 1, payload size, FNV-1a checksum; payload
    "loom-model-file 2", kind, records, then per parameter name, dims, precision (0 float, 1 double)
    and values. Strings and arrays are a u64 count, then the bytes."""
    import struct
    data = open(path, "rb").read()
    if data[:8] != b"LOOMFILE" or struct.unpack_from("<Q", data, 8)[0] != 1:
        raise SystemExit("torch_g2p: %s is not a loom file" % path)
    size, = struct.unpack_from("<Q", data, 16)
    payload = data[32:]
    if len(payload) != size:
        raise SystemExit("torch_g2p: %s is truncated" % path)
    pos = 0

    def u64():
        nonlocal pos
        pos += 8
        return struct.unpack_from("<Q", payload, pos - 8)[0]

    def text():
        nonlocal pos
        n = u64()
        pos += n
        return payload[pos - n:pos].decode()

    if text() != "loom-model-file 2" or text() != "g2p":
        raise SystemExit("torch_g2p: %s is not a g2p model file (version 2)" % path)
    records = {}
    for _ in range(u64()):
        key = text()
        records[key] = text()
    if records.get("architecture") != "transformer":
        raise SystemExit("torch_g2p: %s holds no Transformer" % path)
    params = {}
    for _ in range(u64()):
        name = text()
        dims = [u64() for _ in range(u64())]
        dtype = torch.float64 if u64() == 1 else torch.float32
        n = u64()
        width = 8 if dtype == torch.float64 else 4
        values = torch.frombuffer(bytearray(payload[pos:pos + n * width]), dtype=dtype)
        pos += n * width
        params[name] = values.reshape(dims).float()
    return records, params


# ------------------------------------------------------------------------------- beam decoders
# What beam_search needs of a model: encode the batch (K rows per word), then per step the logits
# [N, 41] of each row given its last token, and the rows reordered by their parents.

class LSTMBeam:
    """The LSTM model's step: (h, c, htilde) per row, attention over the word's letters."""

    def __init__(self, model, letters, lengths, K, max_len):
        self.model = model
        self.memory = tuple(x.repeat_interleave(K, 0) for x in model.encode(letters, lengths))
        self.state = model.initial_state(letters.size(0) * K)

    def step(self, y):
        self.state = self.model.step(self.model.phone_emb(y), self.state, *self.memory)
        return self.model.out(self.state[2])

    def reorder(self, rows):
        self.state = tuple(s[rows] for s in self.state)


class TransformerRerunBeam:
    """nn.TransformerDecoder over the whole prefix at every step (the encoder's output repeated for
    the K rows of each word), the last position's logits: how nn.Transformer users decode."""

    def __init__(self, model, letters, lengths, K, max_len):
        self.model = model
        memory, pad = model.encode(letters, lengths)
        self.memory, self.pad = memory.repeat_interleave(K, 0), pad.repeat_interleave(K, 0)
        self.prefix = torch.zeros(self.memory.size(0), 0, dtype=torch.long)

    def step(self, y):
        m = self.model
        self.prefix = torch.cat([self.prefix, y[:, None]], 1)
        u = self.prefix.size(1)
        h = m.decoder(m.embed_targets(self.prefix), self.memory, tgt_mask=m.causal(u),
                      memory_key_padding_mask=self.pad)
        return m.out(h[:, -1])

    def reorder(self, rows):
        self.prefix = self.prefix[rows]


class TransformerCachedBeam:
    """The same decoder, one position a step: each layer computes only the new position's q, k, v,
    appends k and v to its cache ([max_len, N, d], time-major so that a step writes one contiguous
    slice) and attends over the cache; the caches are reordered by the parents (index_select into a
    second buffer, swapped). Cross-attention keys and values are computed once per word ([B, T,
    heads, d/heads]) and the K rows of a word attend over them together (no copy per row). Same
    modules, same parameters as nn.TransformerDecoderLayer's forward in eval mode (norm_first, relu).
    The attention products are one query row per row and head: written as broadcast products and
    sums, 4-12x faster here than torch.bmm/matmul, which loop over thousands of tiny matrices."""

    def __init__(self, model, letters, lengths, K, max_len):
        self.model, self.K, self.t = model, K, 0
        memory, pad = model.encode(letters, lengths)
        B, T, d = memory.shape
        h = model.heads
        self.B, self.N, self.d, self.h, self.dh = B, B * K, d, h, d // h
        self.cross = []
        for layer in model.decoder.layers:
            w, b = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
            k = F.linear(memory, w[d:2 * d], b[d:2 * d]).view(B, 1, T, h, self.dh)
            v = F.linear(memory, w[2 * d:], b[2 * d:]).view(B, 1, T, h, self.dh)
            self.cross.append((k, v))
        # scores [B, K, T, heads] + 0 on the letters, -inf on the padding
        self.cross_bias = torch.zeros(B, 1, T, 1).masked_fill(pad[:, None, :, None], float("-inf"))
        n = len(model.decoder.layers)
        self.keys = [torch.empty(max_len, self.N, d) for _ in range(n)]
        self.values = [torch.empty(max_len, self.N, d) for _ in range(n)]
        self.spare = [torch.empty(max_len, self.N, d) for _ in range(2 * n)]

    def step(self, y):
        m, t, N, d, h, dh = self.model, self.t, self.N, self.d, self.h, self.dh
        scale = dh ** -0.5
        x = m.phone_emb(y) * m.scale + m.pe[t]  # [N, d]
        for i, layer in enumerate(m.decoder.layers):
            # causal self-attention over the cache
            sa = layer.self_attn
            q, k, v = F.linear(layer.norm1(x), sa.in_proj_weight, sa.in_proj_bias).split(d, 1)
            self.keys[i][t] = k
            self.values[i][t] = v
            keys = self.keys[i][:t + 1].view(t + 1, N, h, dh)
            values = self.values[i][:t + 1].view(t + 1, N, h, dh)
            p = torch.softmax((keys * (q * scale).view(N, h, dh)).sum(-1), 0)  # [t+1, N, heads]
            o = (p.unsqueeze(-1) * values).sum(0)  # [N, heads, dh]
            x = x + sa.out_proj(o.view(N, d))
            # cross-attention: the K rows of a word against the word's keys
            ca = layer.multihead_attn
            q = F.linear(layer.norm2(x), ca.in_proj_weight[:d], ca.in_proj_bias[:d]) * scale
            ck, cv = self.cross[i]
            s = (q.view(self.B, self.K, 1, h, dh) * ck).sum(-1) + self.cross_bias  # [B, K, T, heads]
            o = (torch.softmax(s, 2).unsqueeze(-1) * cv).sum(2)  # [B, K, heads, dh]
            x = x + ca.out_proj(o.view(N, d))
            # feed-forward
            x = x + layer.linear2(F.relu(layer.linear1(layer.norm3(x))))
        self.t += 1
        return m.out(m.decoder.norm(x))

    def reorder(self, rows):
        t = self.t
        for cache in (self.keys, self.values):
            for i in range(len(cache)):
                spare = self.spare.pop()
                torch.index_select(cache[i][:t], 1, rows, out=spare[:t])
                self.spare.append(cache[i])
                cache[i] = spare


class CheckedBeam:
    """Runs the cached and the re-running decoder side by side on the same tokens and reorders,
    keeping the largest difference of their logits; beam search follows the cached one's."""

    def __init__(self, model, letters, lengths, K, max_len):
        self.cached = TransformerCachedBeam(model, letters, lengths, K, max_len)
        self.rerun = TransformerRerunBeam(model, letters, lengths, K, max_len)
        self.max_difference, self.steps = 0.0, 0

    def step(self, y):
        a, b = self.cached.step(y), self.rerun.step(y)
        self.max_difference = max(self.max_difference, float((a - b).abs().max()))
        self.steps += 1
        return a

    def reorder(self, rows):
        self.cached.reorder(rows)
        self.rerun.reorder(rows)


@torch.no_grad()
def beam_search(model, letters, lengths, beam, max_len, fixed_steps=False, decoder=LSTMBeam):
    """Best pronunciation (list of phoneme ids, no </s>) of each word, and the decoder steps run.

    Batched over words: rows = words x K (word-major: row b*K + k). At the start only hypothesis
    0 of each word is alive (score 0, the others -inf). Each step: log_softmax of the logits;
    candidate score = hypothesis raw score (sum of log p) + log p(token); the top K of the word's
    K x 41 candidates (torch.topk) become its new beam; the decoder's state (LSTM: h, c, htilde;
    Transformer: the prefix, or the key/value caches), lengths and token histories are reordered by
    the back-pointers (candidate index // 41). `decoder` is one of the *Beam classes above.

    A hypothesis that emits </s> has ended. It keeps its slot in the beam with its raw score
    frozen: its only continuation is </s> again at log p = 0, so it competes with the live ones
    on raw score and is pushed out only by better ones. When a hypothesis ends its length-
    normalized score, (sum of log p including </s>) / (tokens including </s>), is compared with
    the word's best so far, kept if strictly greater (earlier wins ties; within one step the lower
    beam slot). At step max-len the hypotheses still alive count as ended there, normalized by
    max-len. The best finished hypothesis is the output.

    Stopping rule: the batch stops when every hypothesis in every word's beam has ended, or after
    max-len steps (with fixed_steps: always max-len steps). Words that stopped earlier stay in the
    batch (frozen, computed and ignored); rows are never compacted.
    """
    B, K, V = letters.size(0), beam, len(PHONEMES)
    N = B * K
    dec = decoder(model, letters, lengths, K, max_len)
    y = torch.full((N,), BOS, dtype=torch.long)
    score = torch.full((B, K), float("-inf"))
    score[:, 0] = 0.0
    ended = torch.zeros(N, dtype=torch.bool)
    length = torch.zeros(N, dtype=torch.long)  # tokens emitted, </s> included
    history = torch.zeros(N, 0, dtype=torch.long)
    frozen = torch.full((V,), float("-inf"))
    frozen[EOS] = 0.0
    best_score = torch.full((B,), float("-inf"))
    best_tokens = torch.zeros(B, max_len, dtype=torch.long)
    best_phones = torch.zeros(B, dtype=torch.long)  # phonemes in the best (no </s>)
    base = (torch.arange(B) * K)[:, None]
    steps = 0
    for t in range(max_len):
        steps += 1
        logp = torch.log_softmax(dec.step(y), 1)
        logp = torch.where(ended[:, None], frozen, logp)
        score, index = (score.view(N, 1) + logp).view(B, K * V).topk(K, 1)
        rows = (base + torch.div(index, V, rounding_mode="floor")).view(N)
        y = (index % V).view(N)
        dec.reorder(rows)
        was_ended = ended[rows]
        length = length[rows] + (~was_ended).long()
        history = torch.cat([history[rows], y[:, None]], 1)
        newly = ~was_ended & (y == EOS)
        ended = was_ended | newly
        final = newly | ~ended if t == max_len - 1 else newly
        if final.any():
            normalized = torch.where(final, score.view(N) / length.clamp(min=1), torch.tensor(float("-inf")))
            value, slot = normalized.view(B, K).max(1)
            better = value > best_score
            if better.any():
                pick = (base.view(B) + slot)[better]
                best_score[better] = value[better]
                best_tokens[better, :t + 1] = history[pick]
                best_phones[better] = length[pick] - ended[pick].long()
        if not fixed_steps and bool(ended.all()):
            break
    return [best_tokens[b, :int(best_phones[b])].tolist() for b in range(B)], steps


# ---------------------------------------------------------------------------------- measurements

def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def train_step(model, opt, b):
    opt.zero_grad(set_to_none=True)
    loss = model.loss(b)
    loss.backward()
    if ARGS.architecture == "transformer":  # the sample's gradient clipping (global norm)
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
    opt.step()
    return float(loss)


def beam_decoder(a):
    """The beam_search decoder class of --architecture and --decode-cache."""
    if a.architecture == "lstm":
        return LSTMBeam
    return TransformerCachedBeam if a.decode_cache else TransformerRerunBeam


def bench_train(a, model, opt, train):
    n = a.warmup + a.steps
    if n * a.batch > len(train):
        raise SystemExit("torch_g2p: %d steps of %d words need more than the %d training entries"
                         % (n, a.batch, len(train)))
    batches = [make_batch(train[k * a.batch:(k + 1) * a.batch]) for k in range(n)]
    model.train()
    for b in batches[:a.warmup]:
        train_step(model, opt, b)
    timed = batches[a.warmup:]
    start = time.perf_counter()
    losses = [train_step(model, opt, b) for b in timed]
    elapsed = time.perf_counter() - start
    return {
        "train_words_per_s": round(a.steps * a.batch / elapsed, 1),
        "train_ms_per_step": round(1e3 * elapsed / a.steps, 3),
        "train_letters_per_step": round(sum(b["letter_tokens"] for b in timed) / a.steps, 2),
        "train_target_steps_per_step": round(sum(b["target_tokens"] for b in timed) / a.steps, 2),
        "train_first_loss": round(losses[0], 4),
        "train_last_loss": round(losses[-1], 4),
    }


def decode_batches(a, words):
    """Letter tensors of consecutive batches of --decode-batch words."""
    return [letter_tensor(words[i:i + a.decode_batch]) for i in range(0, len(words), a.decode_batch)]


def bench_decode(a, model, dev_words):
    words = dev_words[:a.decode_words]
    batches = decode_batches(a, words)
    model.eval()
    dec = beam_decoder(a)
    beam_search(model, *batches[0], a.beam, a.max_len, a.fixed_steps, dec)  # warm-up, untimed
    steps, phones = 0, 0
    start = time.perf_counter()
    for letters, lengths in batches:
        out, s = beam_search(model, letters, lengths, a.beam, a.max_len, a.fixed_steps, dec)
        steps += s
        phones += sum(len(p) for p in out)
    elapsed = time.perf_counter() - start
    return {
        "decode_words_per_s": round(len(words) / elapsed, 1),
        "decode_s": round(elapsed, 3),
        "decode_words": len(words),
        "decode_batches": len(batches),
        "decode_steps": steps,  # decoder steps summed over batches (work depends on the weights)
        "decode_ms_per_step": round(1e3 * elapsed / steps, 3),
        "decode_mean_phonemes": round(phones / len(words), 3),
    }


def edit_distance(a, b):
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def sanity(a, model, opt, train, dev_words, refs):
    """Train --train-minutes on shuffled chunks of the training file, then score dev (beam search)."""
    rng = random.Random(a.seed)
    if a.architecture == "transformer" and a.lr_warmup > 0:  # the rate rises over the first steps, as g2p's
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / a.lr_warmup))
    else:
        schedule = None
    model.train()
    deadline = time.perf_counter() + 60.0 * a.train_minutes
    step, epoch, recent = 0, 0, []
    while time.perf_counter() < deadline:
        order = list(range(len(train)))
        rng.shuffle(order)
        for i in range(0, len(order) - a.batch + 1, a.batch):
            recent.append(train_step(model, opt, make_batch([train[j] for j in order[i:i + a.batch]])))
            if schedule is not None:
                schedule.step()
            step += 1
            if step % 200 == 0:
                print("step %d epoch %d loss/word %.3f" % (step, epoch, sum(recent) / len(recent)),
                      file=sys.stderr, flush=True)
                recent = []
            if time.perf_counter() >= deadline:
                break
        epoch += 1
    model.eval()
    errors, edits, ref_len, done = 0, 0, 0, 0
    start = time.perf_counter()
    for letters, lengths in decode_batches(a, dev_words):
        out, _ = beam_search(model, letters, lengths, a.beam, a.max_len, decoder=beam_decoder(a))
        for pred in out:
            word_refs = refs[dev_words[done]]
            done += 1
            errors += pred not in word_refs
            dist, ref = min((edit_distance(pred, r), len(r)) for r in word_refs)
            edits += dist
            ref_len += ref
    return {
        "sanity_train_minutes": a.train_minutes, "sanity_train_steps": step,
        "sanity_epochs": round(step * a.batch / len(train), 3),
        "dev_words": done, "dev_wer_percent": round(100.0 * errors / done, 2),
        "dev_per_percent": round(100.0 * edits / ref_len, 2),
        "dev_decode_s": round(time.perf_counter() - start, 2),
    }


@torch.no_grad()
def check(a, model, dev_words):
    """Cached decoding against re-running the prefix: beam search (width --beam, all --max-len steps,
    so reorders at every length) on a few dev words, both decoders fed the same tokens and parents."""
    model.eval()
    letters, lengths = letter_tensor(dev_words[:8])
    holder = {}

    def checked(*args):
        holder["beam"] = CheckedBeam(*args)
        return holder["beam"]

    out, _ = beam_search(model, letters, lengths, a.beam, a.max_len, True, checked)
    c = holder["beam"]
    return {"check_words": len(out), "check_steps": c.steps, "check_max_logit_difference": c.max_difference,
            "check_passed": c.max_difference <= 1e-4}


def main():
    a = ARGS
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    torch.manual_seed(a.seed)
    train = read_dict(os.path.join(a.data, "cmudict-train.dict"))
    dev_words, refs = dev_references(read_dict(os.path.join(a.data, "cmudict-dev.dict")))
    if a.decode_words is None:
        a.decode_words = len(dev_words)
    if a.architecture == "lstm":
        a.lr = a.lr or 2e-3
        model = G2P(a.embed, a.hidden, a.dec_hidden)
        opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    else:
        a.lr = a.lr or 1e-3
        model = TransformerG2P(a.layers, a.model_dim, a.heads, a.feedforward, a.dropout, a.label_smoothing)
        opt = torch.optim.Adam(model.parameters(), lr=a.lr, betas=(0.9, 0.98), eps=1e-8)
    result = {
        "engine": "pytorch", "torch": torch.__version__, "threads": a.threads, "blas_threads": a.blas_threads, "batch": a.batch,
        "warmup": a.warmup, "steps": a.steps, "architecture": a.architecture, "lr": a.lr, "letters": len(LETTERS),
        "phonemes": len(PHONEMES), "parameters": sum(p.numel() for p in model.parameters()),
        "decode_batch": a.decode_batch, "beam": a.beam, "max_len": a.max_len,
        "fixed_steps": a.fixed_steps, "seed": a.seed, "mode": a.mode,
    }
    if a.architecture == "lstm":
        result.update(embed=a.embed, hidden=a.hidden, dec_hidden=a.dec_hidden)
    else:
        result.update(layers=a.layers, model=a.model_dim, heads=a.heads, feedforward=a.feedforward,
                      dropout=a.dropout, label_smoothing=a.label_smoothing, decode_cache=a.decode_cache)
    if a.architecture != "transformer" and (a.check or a.loom_model or a.decode_cache):
        raise SystemExit("torch_g2p: --check, --loom-model and --decode-cache are for --architecture transformer")
    if a.loom_model is not None:
        model.load_loom(a.loom_model)
        result["loom_model"] = a.loom_model
    if a.load_state is not None:
        model.load_state_dict(torch.load(a.load_state))
    if a.check:
        result.update(check(a, model, dev_words))
        if not result["check_passed"]:
            print(json.dumps(result))
            raise SystemExit("torch_g2p: the cached decoder's logits differ from the re-run's by %g"
                             % result["check_max_logit_difference"])
    elif a.train_minutes is not None:
        result.update(sanity(a, model, opt, train, dev_words, refs))
        if a.save_state is not None:
            torch.save(model.state_dict(), a.save_state)
    else:
        if a.mode in ("train", "both"):
            result.update(bench_train(a, model, opt, train))
        if a.mode in ("decode", "both"):
            if a.architecture == "transformer" and a.mode == "both":  # decode the weights as loaded (as g2p_bench)
                if a.loom_model is not None:
                    model.load_loom(a.loom_model)
                elif a.load_state is not None:
                    model.load_state_dict(torch.load(a.load_state))
            result.update(bench_decode(a, model, dev_words))
    result["peak_rss_mib"] = round(peak_rss_mib(), 1)
    result["omp_wait_policy_env"] = os.environ.get("OMP_WAIT_POLICY", "")
    result["openblas_coretype_env"] = os.environ.get("OPENBLAS_CORETYPE", "")
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print("%-30s %s" % (k, v))


if __name__ == "__main__":
    main()
