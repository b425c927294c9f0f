"""The Transformer models, attention and generation (C++ loom::layers' names), re-exported by
``loom.layers``; safetensors are at loom's top level.

    import loom as C
    o = C.layers.TransformerOptions(model_dim=16, heads=2, feedforward_dim=32, decoder_layers=2,
                                    dropout=0, activation="gelu", tie_embeddings=True)
    lm = C.layers.TransformerLM(50, o)
    x = C.sequence.input_variable(1)
    logits = lm(x)                      # [50] at every step; lm.parameters for a Trainer
    lm.generate([[3, 4]], max_length=20)                        # greedy: [[...20 ids]]
    lm.generate([[3, 4]], 20, sample=True, top_k=5, seed=1)     # sampling
    for symbol in lm.stream([3, 4], 20, sample=True): ...       # each id as it is drawn

CNTK has no Transformer: these are loom's. Generation releases the GIL while the engine runs; Ctrl-C
stops it at the next step with KeyboardInterrupt.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

from . import _loom
from ._graph import _f64

TransformerOptions = _loom.layers.TransformerOptions
TransformerLM = _loom.layers.TransformerLM
Seq2SeqTransformer = _loom.layers.Seq2SeqTransformer
MultiHeadAttention = _loom.layers.MultiHeadAttention
AdditiveAttention = _loom.layers.AdditiveAttention
GeneralAttention = _loom.layers.GeneralAttention
dot_product_attention = _loom.layers.dot_product_attention
scaled_dot_product_attention = _loom.layers.scaled_dot_product_attention
self_attention = _loom.layers.self_attention

__all__ = ["AdditiveAttention", "GeneralAttention", "MultiHeadAttention", "Seq2SeqTransformer", "TransformerLM",
           "TransformerOptions", "dot_product_attention", "scaled_dot_product_attention", "self_attention"]


def _ids(prompts: Any) -> Optional[List[List[int]]]:
    if prompts is None:
        return None
    return [[int(s) for s in p] for p in prompts]


def _best(items: list) -> List[List[int]]:
    return [list(hypotheses[0]["symbols"]) for hypotheses in items]


def _lm_generate(self, prompts: Optional[Sequence[Sequence[int]]] = None, max_length: int = 0, *,
                 beam_width: int = 1, sample: bool = False, temperature: float = 1.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int = 0, start_symbol: Optional[int] = None,
                 end_symbol: Optional[int] = None, context: Optional[int] = None,
                 on_symbol: Optional[Callable[[int, int], Any]] = None, items: int = 0,
                 hypotheses: bool = False, keep_symbols: bool = True, weights: str = "float",
                 cache: str = "float") -> list:
    """Generates after each prompt (a list of id lists, one per item): greedy decoding (the default),
    beam search (beam_width > 1) or sampling (sample=True with temperature, top_k, top_p, seed: item i
    draws from the stream of seed + i). Returns each item's best symbols (a list of id lists), or with
    hypotheses=True each item's hypotheses, best first, as dicts (symbols, log_probability, score, ended).

    start_symbol None: each item starts from its prompt's first symbol (the model has no start symbol);
    end_symbol None: nothing ends a text, each runs max_length symbols. context: the most symbols the
    model is fed in a row (None: max_positions with learned positions, else no limit; beam search has
    none, so a prompt and max_length must fit the positions); past it a text goes on from its last
    context / 2 symbols. on_symbol(item, symbol) is called as each symbol is
    chosen (greedy and sampling), with the GIL; an exception it raises stops the generation.
    Bad options (top_p outside (0, 1], a negative temperature, an id beyond the vocabulary) are a
    UserError before any step; Ctrl-C stops it with KeyboardInterrupt at the next step.
    keep_symbols=False (with on_symbol, where the text goes): each text keeps only the symbols its
    next steps read, so a long generation's memory does not grow; what it returns holds those only.
    weights: the precision the step's products read the weights in, "float", "bfloat16" (weights and
    the rows they multiply rounded, half the bytes) or "int8" (each output column's weights as int8
    times a scale, a quarter of the bytes; the rows rounded to bfloat16 on CPUs with AVX-512 BF16,
    where both multiply bfloat16 pairs): faster where generation waits on memory, at a cost in
    quality (the README's lm paragraph measures both); the model's own weights stay float.
    cache: the precision the key/value cache keeps its rows in, "float" or "bfloat16" (each row
    rounded as stored: half the bytes the attention reads a step, which bound long contexts).
    """
    if context is None:
        o = self.options
        context = o.max_positions if o.positions == "learned" and beam_width == 1 else 0
    ids = _ids(prompts)
    if ids is None and start_symbol is None:
        raise _loom.UserError("TransformerLM.generate: give prompts, or a start_symbol and items")
    got = self._generate(ids, int(max_length), beam_width=int(beam_width), sample=bool(sample),
                         temperature=float(temperature), top_k=int(top_k), top_p=float(top_p), seed=int(seed),
                         start_symbol=start_symbol, end_symbol=end_symbol, context=int(context), on_symbol=on_symbol,
                         items=int(items), keep_symbols=bool(keep_symbols), weights=str(weights),
                         cache=str(cache))
    return got if hypotheses else _best(got)


class _Stop(Exception):
    pass


def _stream(generate: Callable[..., Any], arguments: tuple, keywords: Dict[str, Any]) -> Iterator[int]:
    """Runs generate(*arguments, on_symbol=..., **keywords) in a thread and yields item 0's symbols as
    they are chosen; leaving the loop early (break, an exception, Ctrl-C) stops the generation. The
    queue between them is bounded: a generation waits for a slow reader instead of filling memory."""
    symbols: "queue.Queue[Any]" = queue.Queue(maxsize=1024)
    stop = threading.Event()
    done = object()

    def hand_over(thing: Any) -> None:
        while not stop.is_set():
            try:
                symbols.put(thing, timeout=0.05)
                return
            except queue.Full:
                continue
        raise _Stop()

    def run() -> None:
        try:
            generate(*arguments, on_symbol=lambda item, symbol: hand_over(symbol), **keywords)
            hand_over(done)
        except _Stop:
            pass
        except BaseException as e:  # handed to the reader
            try:
                hand_over(e)
            except _Stop:
                pass

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    try:
        while True:
            got = symbols.get()
            if got is done:
                return
            if isinstance(got, BaseException):
                raise got
            yield got
    finally:
        stop.set()
        worker.join()


def _lm_stream(self, prompt: Sequence[int], max_length: int, **options: Any) -> Iterator[int]:
    """Yields the symbols generate would give for one prompt, each as it is chosen (greedy decoding or
    sampling; generate's keyword arguments). The engine runs in a thread of its own with the GIL
    released; breaking out of the loop stops it at its next symbol. The generator keeps only the
    symbols its next steps read (keep_symbols=False), so a stream of any length runs in bounded memory."""
    if "on_symbol" in options or "hypotheses" in options or "keep_symbols" in options:
        raise _loom.UserError("TransformerLM.stream: on_symbol, hypotheses and keep_symbols are generate's")
    return _stream(self.generate, ([list(prompt)], max_length), dict(options, keep_symbols=False))


def _s2s_generate(self, sources: Any, max_length: int, *, beam_width: int = 1, sample: bool = False,
                  temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, seed: int = 0,
                  start_symbol: int = 0, end_symbol: Optional[int] = 0, context: int = 0,
                  on_symbol: Optional[Callable[[int, int], Any]] = None, hypotheses: bool = False) -> list:
    """Translates each source (a list of arrays of ids [T_i, 1], as eval takes a sequence input):
    greedy, beam search or sampling as TransformerLM.generate, from start_symbol until end_symbol (or
    max_length). Returns each item's best target symbols, or its hypotheses with hypotheses=True."""
    got = self._generate(sources, int(max_length), beam_width=int(beam_width), sample=bool(sample),
                         temperature=float(temperature), top_k=int(top_k), top_p=float(top_p), seed=int(seed),
                         start_symbol=start_symbol, end_symbol=end_symbol, context=int(context),
                         on_symbol=on_symbol)
    return got if hypotheses else _best(got)


def _s2s_stream(self, source: Any, max_length: int, **options: Any) -> Iterator[int]:
    """Yields the target symbols generate would give for one source (an array of ids [T, 1]) as each
    is chosen."""
    if "on_symbol" in options or "hypotheses" in options:
        raise _loom.UserError("Seq2SeqTransformer.stream: on_symbol and hypotheses are generate's")
    return _stream(self.generate, ([source], max_length), options)


def _to_precision(self, dtype: Any) -> None:
    """Converts every parameter to dtype (numpy.float32 or numpy.float64) in place; generation and
    graphs built afterwards run in it."""
    _loom._to_precision(list(self.parameters), _f64(dtype, type(self).__name__ + ".to_precision"))


TransformerLM.generate = _lm_generate
TransformerLM.stream = _lm_stream
TransformerLM.to_precision = _to_precision
Seq2SeqTransformer.generate = _s2s_generate
Seq2SeqTransformer.stream = _s2s_stream
Seq2SeqTransformer.to_precision = _to_precision
MultiHeadAttention.to_precision = _to_precision
