"""The Transformer models from Python: a tiny TransformerLM's logits against a numpy float64
reimplementation of its architecture (embedding, positions, pre-norm blocks of causal multi-head
attention and a feed-forward, final norm, tied or own projection), over every parameter set to
random values; greedy generation against the argmax of that reference step by step; sampling's
seeds, top_k 1, streaming and Ctrl-C; safetensors round trips and hostile files; bad options."""

import math
import os
import signal
import threading
import time

import numpy as np
import pytest

import loom as C

V = 11


def options(**changes):
    o = dict(model_dim=16, heads=2, feedforward_dim=32, decoder_layers=2, dropout=0.0, activation="gelu",
             positions="learned", max_positions=16, tie_embeddings=True, scale_embedding=False)
    o.update(changes)
    return C.layers.TransformerOptions(**o)


def randomize(model, seed):
    """Every parameter random (norms and biases too, which start at 1 and 0), in float64."""
    model.to_precision(np.float64)
    rng = np.random.default_rng(seed)
    for p in model.parameters:
        p.value = rng.normal(0, 0.5, p.value.shape)


def layer_norm(x, scale, bias, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def gelu(x):
    return x * 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def reference_logits(model, ids):
    """The logits [T, V] of one sequence, computed here in float64 from the model's parameters."""
    o = model.options
    w = {p.name: np.asarray(p.value, np.float64) for p in model.parameters}
    n, d, h = o.name, o.model_dim, o.heads
    x = w[n + ".embedding"][ids]
    if o.scale_embedding:
        x = x * math.sqrt(d)
    positions = np.arange(len(ids))
    if o.positions == "learned":
        x = x + w[n + ".positions.table"][positions]
    else:
        j = np.arange(d)
        angle = positions[:, None] * 10000.0 ** (-(j - j % 2) / d)[None, :]
        x = x + np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
    T, dh = len(ids), d // h
    causal = np.tril(np.ones((T, T), bool))
    for i in range(o.decoder_layers):
        p = f"{n}.layers.{i}."
        y = layer_norm(x, w[p + "norm1.scale"], w[p + "norm1.bias"], o.epsilon)
        a = p + "self_attn."
        q, k, v = (y @ w[a + s + ".W"] + w[a + s + ".b"] for s in "qkv")
        heads = []
        for head in range(h):
            c = slice(head * dh, (head + 1) * dh)
            scores = q[:, c] @ k[:, c].T / math.sqrt(dh)
            scores = np.where(causal, scores, -np.inf)
            weights = np.exp(scores - scores.max(1, keepdims=True))
            weights /= weights.sum(1, keepdims=True)
            heads.append(weights @ v[:, c])
        x = x + np.concatenate(heads, 1) @ w[a + "out.W"] + w[a + "out.b"]
        y = layer_norm(x, w[p + "norm3.scale"], w[p + "norm3.bias"], o.epsilon)
        inner = y @ w[p + "linear1.W"] + w[p + "linear1.b"]
        inner = gelu(inner) if o.activation == "gelu" else np.maximum(inner, 0)
        x = x + inner @ w[p + "linear2.W"] + w[p + "linear2.b"]
    x = layer_norm(x, w[n + ".norm.scale"], w[n + ".norm.bias"], o.epsilon)
    if o.tie_embeddings:
        return x @ w[n + ".embedding"].T
    return x @ w[n + ".project.W"] + w[n + ".project.b"]


def sequences(*ids):
    return [np.array(s, np.float64).reshape(-1, 1) for s in ids]


@pytest.fixture(scope="module")
def lm():
    model = C.layers.TransformerLM(V, options())
    randomize(model, 1)
    return model


@pytest.mark.parametrize("changes", [{}, dict(positions="sinusoidal", tie_embeddings=False, scale_embedding=True,
                                              activation="relu", name="other")])
def test_logits_of_a_ragged_batch_equal_a_numpy_reimplementation(changes):
    model = C.layers.TransformerLM(V, options(**changes))
    randomize(model, 2)
    names = {p.name for p in model.parameters}
    prefix = model.options.name
    assert prefix + ".layers.1.self_attn.q.W" in names and prefix + ".norm.scale" in names
    assert (prefix + ".project.W" in names) == (not model.options.tie_embeddings)
    x = C.sequence.input_variable(1, name="symbols")
    logits = model(x)
    assert logits.shape == (V,)
    batch = [[1, 4, 2, 9, 0], [3], [10, 7, 7]]
    got = logits.eval({x: sequences(*batch)})
    assert len(got) == 3
    for ids, value in zip(batch, got):
        assert value.shape == (len(ids), V)
        np.testing.assert_allclose(value, reference_logits(model, ids), rtol=1e-9, atol=1e-9)


def test_greedy_generation_is_the_argmax_of_each_step(lm):
    prompts = [[1, 4, 2], [5]]
    got = lm.generate(prompts, 8)
    assert [len(g) for g in got] == [8, 8]
    for prompt, generated in zip(prompts, got):
        text = list(prompt)
        for symbol in generated:
            assert symbol == int(np.argmax(reference_logits(lm, text)[-1]))
            text.append(symbol)


def test_beam_search_finds_a_text_at_least_as_likely_as_greedy(lm):
    def log_probability(prompt, symbols):
        text, total = list(prompt), 0.0
        for s in symbols:
            z = reference_logits(lm, text)[-1]
            total += z[s] - (z.max() + np.log(np.exp(z - z.max()).sum()))
            text.append(s)
        return total

    greedy = lm.generate([[3, 1]], 4, hypotheses=True)[0][0]
    beam = lm.generate([[3, 1]], 4, beam_width=4, hypotheses=True)[0]
    assert len(beam) == 4
    assert beam[0]["log_probability"] >= greedy["log_probability"] - 1e-9
    assert beam[0]["log_probability"] == pytest.approx(log_probability([3, 1], beam[0]["symbols"]), abs=1e-9)
    assert greedy["log_probability"] == pytest.approx(log_probability([3, 1], greedy["symbols"]), abs=1e-9)


def test_sampling_is_reproducible_by_seed_and_top_k_1_is_greedy(lm):
    prompts = [[1, 4], [6, 6, 2]]
    first = lm.generate(prompts, 10, sample=True, temperature=1.5, seed=7)
    assert lm.generate(prompts, 10, sample=True, temperature=1.5, seed=7) == first
    others = [lm.generate(prompts, 10, sample=True, temperature=1.5, seed=s) for s in range(8, 12)]
    assert any(o != first for o in others)
    # Item i draws from the stream of seed + i: item 1 alone with seed 8 draws as item 1 with seed 7.
    assert lm.generate([prompts[1]], 10, sample=True, temperature=1.5, seed=8)[0] == first[1]
    assert lm.generate(prompts, 10, sample=True, top_k=1, seed=3) == lm.generate(prompts, 10)


def test_streamed_symbols_are_those_of_the_whole_generation(lm):
    whole = lm.generate([[2, 5]], 9, sample=True, top_p=0.9, seed=4)[0]
    assert list(lm.stream([2, 5], 9, sample=True, top_p=0.9, seed=4)) == whole
    seen = []
    called_from = set()

    def on_symbol(item, symbol):
        seen.append((item, symbol))
        called_from.add(threading.get_ident())

    got = lm.generate([[2, 5], [1]], 9, on_symbol=on_symbol)
    assert [s for i, s in seen if i == 0] == got[0] and [s for i, s in seen if i == 1] == got[1]
    # Leaving a stream early stops its generation.
    stream = lm.stream([2, 5], 1000)
    assert next(stream) == lm.generate([[2, 5]], 1)[0][0]
    stream.close()


def test_an_exception_in_the_callback_stops_the_generation(lm):
    def on_symbol(item, symbol):
        raise RuntimeError("enough")

    with pytest.raises(RuntimeError, match="enough"):
        lm.generate([[1]], 5, on_symbol=on_symbol)


def test_ctrl_c_stops_a_long_generation_with_keyboard_interrupt(lm):
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            lm.generate([[1]], 10 ** 7)
    finally:
        timer.cancel()


def test_ctrl_c_while_reading_a_stream_stops_its_generation(lm):
    threads = threading.active_count()
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    read = 0
    try:
        with pytest.raises(KeyboardInterrupt):
            for _ in lm.stream([1], 10 ** 7):
                read += 1
    finally:
        timer.cancel()
    assert 0 < read < 10 ** 7
    # The stream's thread has ended: the model generates again at once.
    assert len(lm.generate([[1]], 3)[0]) == 3
    timer.join()
    assert threading.active_count() == threads


@pytest.mark.parametrize("bad, words", [(dict(sample=True, top_p=0.0), ["top_p"]),
                                        (dict(sample=True, top_p=1.5), ["top_p"]),
                                        (dict(sample=True, temperature=-1.0), ["temperature"]),
                                        (dict(prompts=[[1, V]]), ["prompt", str(V)]),
                                        (dict(prompts=[[1, -2]]), ["prompt", "-2"]),
                                        (dict(beam_width=0), ["beam_width"]),
                                        (dict(max_length=0), ["max_length"])])
def test_bad_options_are_user_errors_before_any_step(lm, bad, words):
    called = []
    arguments = dict(prompts=[[1, 2]], max_length=5, on_symbol=lambda i, s: called.append(s))
    arguments.update(bad)
    with pytest.raises(C.UserError) as e:
        lm.generate(**arguments)
    for w in words:
        assert w in str(e.value)
    assert called == []


def test_options_keywords_and_errors():
    o = C.layers.TransformerOptions(model_dim=8, heads=2, activation="gelu", feedforward_dropout=0.0)
    assert (o.model_dim, o.heads, o.activation, o.feedforward_dropout, o.positions) == (8, 2, "gelu", 0.0,
                                                                                          "sinusoidal")
    with pytest.raises(C.UserError, match="activation.*'swish'"):
        C.layers.TransformerOptions(activation="swish")
    with pytest.raises(C.UserError, match="heads"):
        C.layers.TransformerLM(V, C.layers.TransformerOptions(model_dim=10, heads=3))
    g = C.layers.TransformerOptions.gpt(2, 2, 16, 32)
    assert (g.tie_embeddings, g.positions, g.feedforward_dim, g.init) == (True, "learned", 64, "gpt")


def test_safetensors_round_trip_and_model_file(lm, tmp_path):
    path = str(tmp_path / "lm.safetensors")
    C.save_safetensors(path, lm.parameters, {"format": "pt"})
    tensors, metadata = C.read_safetensors(path)
    assert metadata == {"format": "pt"}
    for p in lm.parameters:
        np.testing.assert_array_equal(tensors[p.name], p.value)
        assert tensors[p.name].dtype == np.float64
    other = C.layers.TransformerLM(V, options())
    other.to_precision(np.float64)
    assert C.load_safetensors(path, other.parameters) == {"format": "pt"}
    for a, b in zip(lm.parameters, other.parameters):
        np.testing.assert_array_equal(a.value, b.value)
    assert other.generate([[1, 4, 2]], 6) == lm.generate([[1, 4, 2]], 6)
    # The model file holds the architecture too.
    model_path = str(tmp_path / "lm.loom")
    lm.save(model_path, {"vocabulary": "abc"})
    loaded = C.layers.TransformerLM.load(model_path)
    assert (loaded.vocabulary, loaded.options.model_dim, loaded.options.decoder_layers) == (V, 16, 2)
    assert loaded.generate([[1, 4, 2]], 6) == lm.generate([[1, 4, 2]], 6)


def test_hostile_safetensors_files_are_data_errors_naming_the_file(lm, tmp_path):
    good = str(tmp_path / "good.safetensors")
    C.save_safetensors(good, lm.parameters)
    data = open(good, "rb").read()
    other = C.layers.TransformerLM(V, options())
    before = [p.value.copy() for p in other.parameters]
    for name, content in [("truncated.safetensors", data[:-7]),
                          ("header.safetensors", (40).to_bytes(8, "little") + b"{not json" + b" " * 31),
                          ("short.safetensors", b"\x01\x02")]:
        path = str(tmp_path / name)
        open(path, "wb").write(content)
        with pytest.raises(C.DataError) as e:
            C.load_safetensors(path, other.parameters)
        assert name in str(e.value)
    with pytest.raises(C.DataError, match="missing.safetensors"):
        C.load_safetensors(str(tmp_path / "missing.safetensors"), other.parameters)
    # A file of another model's parameters: a UserError naming the file, nothing changed.
    small = C.layers.TransformerLM(V, options(model_dim=8, feedforward_dim=8))
    path = str(tmp_path / "small.safetensors")
    C.save_safetensors(path, small.parameters)
    with pytest.raises(C.UserError, match="small.safetensors"):
        C.load_safetensors(path, other.parameters)
    for b, p in zip(before, other.parameters):
        np.testing.assert_array_equal(b, p.value)


def test_seq2seq_transformer_trains_its_graph_and_generates():
    o = C.layers.TransformerOptions(model_dim=8, heads=2, feedforward_dim=16, encoder_layers=1, decoder_layers=1,
                                    dropout=0.0)
    model = C.layers.Seq2SeqTransformer(7, 9, o)
    src = C.sequence.input_variable(1, name="source")
    prev = C.sequence.input_variable(1, name="previous")
    logits = model(src, prev)
    assert logits.shape == (9,)
    sources = sequences([1, 2, 3], [4])
    value = logits.eval({src: sources, prev: sequences([0, 5], [0, 6, 6])})
    assert [v.shape for v in value] == [(2, 9), (3, 9)]
    logits2, weights = model.forward(prev, model.encode(src))
    assert len(weights) == 1
    w = weights[0].eval({src: sources, prev: sequences([0, 5], [0, 6, 6])})
    np.testing.assert_allclose(w[0][:, :3].sum(1), 1.0, rtol=1e-5)
    assert {p.name for p in model.parameters} >= {"transformer.source_embedding", "transformer.project.W"}
    # Greedy generation: each symbol the argmax of the teacher-forced logits over the symbols before.
    got = model.generate(sources, 5, start_symbol=0, end_symbol=None)
    for n, symbols in enumerate(got):
        assert len(symbols) == 5
        previous = [0] + symbols[:-1]
        z = logits.eval({src: [sources[n]], prev: sequences(previous)})[0]
        assert list(np.argmax(z, 1)) == symbols
    assert list(model.stream(sources[1], 5, start_symbol=0, end_symbol=None)) == got[1]


def test_multi_head_attention_against_numpy():
    mha = C.layers.MultiHeadAttention(8, heads=2, causal=True)
    mha.to_precision(np.float64)
    rng = np.random.default_rng(5)
    for p in mha.parameters:
        p.value = rng.normal(0, 0.5, p.value.shape)
    assert [p.name for p in mha.parameters][:2] == ["MultiHeadAttention.q.W", "MultiHeadAttention.q.b"]
    x = C.sequence.input_variable(8)
    out, weights = mha.forward(x, x, x)
    data = [rng.normal(size=(4, 8)), rng.normal(size=(2, 8))]
    got_out, got_weights = out.eval({x: data}), weights.eval({x: data})
    w = {p.name.split(".", 1)[1]: p.value for p in mha.parameters}
    for xs, o, a in zip(data, got_out, got_weights):
        q, k, v = (xs @ w[s + ".W"] + w[s + ".b"] for s in "qkv")
        T = len(xs)
        heads, mean = [], np.zeros((T, T))
        for h in range(2):
            c = slice(4 * h, 4 * h + 4)
            s = np.where(np.tril(np.ones((T, T), bool)), q[:, c] @ k[:, c].T / 2.0, -np.inf)
            e = np.exp(s - s.max(1, keepdims=True))
            e /= e.sum(1, keepdims=True)
            heads.append(e @ v[:, c])
            mean += e / 2
        np.testing.assert_allclose(o, np.concatenate(heads, 1) @ w["out.W"] + w["out.b"], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(a[:, :T], mean, rtol=1e-9, atol=1e-9)
    with pytest.raises(C.UserError, match="heads"):
        C.layers.MultiHeadAttention(8, heads=3)


def test_dot_product_attention_of_a_batch_query():
    q = C.input_variable(3)
    k = C.sequence.input_variable(3)
    context, weights = C.layers.scaled_dot_product_attention(q, k, k)
    query = np.array([[1.0, 0.0, 2.0]])
    keys = [np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 1.0]])]
    s = keys[0] @ query[0] / math.sqrt(3)
    e = np.exp(s - s.max())
    e /= e.sum()
    np.testing.assert_allclose(context.eval({q: query, k: keys}), (e @ keys[0])[None, :], rtol=1e-6)


def test_parameters_are_trainable_the_gradient_against_finite_differences(lm):
    assert all(isinstance(p, C.Parameter) for p in lm.parameters)
    x = C.sequence.input_variable(1)
    # An asymmetric scalar: each logit weighted differently, so that errors cannot cancel out.
    weights = np.linspace(0.5, 1.5, V)
    loss = C.sequence.reduce_sum(C.reduce_sum(C.log_softmax(lm(x)) * C.constant(weights)))
    data = sequences([1, 4, 2], [7, 3])
    for p in (lm.parameters[0], [q for q in lm.parameters if q.name == "lm.layers.1.linear1.b"][0]):
        g = loss.grad({x: data}, wrt=[p])
        assert g.shape == p.value.shape
        original = p.value.copy()
        index = tuple(np.argwhere(np.abs(g) == np.abs(g).max())[0])
        step = np.zeros_like(original)
        step[index] = 1e-6
        values = []
        for sign in (1, -1):
            p.value = original + sign * step
            values.append(sum(float(np.sum(v)) for v in [loss.eval({x: data})]))
        p.value = original
        assert g[index] == pytest.approx((values[0] - values[1]) / 2e-6, rel=1e-5)
        assert g[index] != 0


def test_generation_from_a_start_symbol_and_a_bounded_text(lm):
    # No prompts: items texts from the start symbol; item i samples from the stream of seed + i.
    two = lm.generate(None, 6, start_symbol=3, items=2, sample=True, seed=5)
    assert len(two) == 2 and all(len(t) == 6 for t in two)
    assert lm.generate([[3]], 6, sample=True, seed=6) == [two[1]]
    # keep_symbols=False: the callback sees every symbol, the result only the last context's.
    seen = []
    short = lm.generate([[1, 2]], 40, keep_symbols=False, on_symbol=lambda i, s: seen.append(s))
    whole = lm.generate([[1, 2]], 40)[0]
    assert seen == whole
    assert 0 < len(short[0]) < 40 and short[0] == whole[-len(short[0]):]
    with pytest.raises(C.UserError, match="keep_symbols"):
        lm.generate([[1, 2]], 5, keep_symbols=False)


def test_seq2seq_model_file_round_trip(tmp_path):
    o = C.layers.TransformerOptions(model_dim=8, heads=2, feedforward_dim=16, encoder_layers=1, decoder_layers=2,
                                    dropout=0.0, positions="learned", max_positions=12)
    model = C.layers.Seq2SeqTransformer(7, 9, o)
    path = str(tmp_path / "s2s.loom")
    model.save(path)
    loaded = C.layers.Seq2SeqTransformer.load(path)
    assert (loaded.source_vocabulary, loaded.target_vocabulary, loaded.options.decoder_layers) == (7, 9, 2)
    assert loaded.options.positions == "learned"
    sources = sequences([1, 2, 3], [4, 5])
    assert loaded.generate(sources, 5, beam_width=3) == model.generate(sources, 5, beam_width=3)
    with pytest.raises(C.UserError, match="lm.loom.*transformer_lm"):
        lm_path = str(tmp_path / "lm.loom")
        C.layers.TransformerLM(V, options()).save(lm_path)
        C.layers.Seq2SeqTransformer.load(lm_path)


def test_additive_and_general_attention_weights_are_distributions():
    q = C.input_variable(3)
    k = C.sequence.input_variable(4)
    data = {q: np.array([[1.0, -1.0, 0.5], [0.0, 2.0, 1.0]]),
            k: [np.arange(12.0).reshape(3, 4) / 10, np.ones((1, 4))]}
    for attention in (C.layers.AdditiveAttention(5), C.layers.GeneralAttention()):
        context, weights = attention(q, k, k)
        assert context.shape == (4,)
        w = weights.eval(data)
        assert [a.shape[0] for a in w] == [3, 1]
        for a in w:
            assert float(np.sum(a)) == pytest.approx(1.0, rel=1e-5)
        assert attention.parameters
    # One key: its weight is 1 and the context is that key.
    np.testing.assert_allclose(context.eval(data)[1], np.ones(4), rtol=1e-6)


def test_a_stream_read_slowly_and_left_early_ends_its_thread(lm):
    threads = threading.active_count()
    stream = lm.stream([1], 10 ** 6)
    first = [next(stream) for _ in range(3)]
    time.sleep(0.3)  # the generation runs ahead until the queue is full, then waits
    first += [next(stream) for _ in range(2)]
    assert first == lm.generate([[1]], 5)[0]
    stream.close()
    assert threading.active_count() == threads


def test_two_threads_generate_with_one_model_at_once(lm):
    expected = {seed: lm.generate([[1, 2]], 30, sample=True, seed=seed) for seed in (1, 2)}
    got = {}

    def run(seed):
        got[seed] = lm.generate([[1, 2]], 30, sample=True, seed=seed)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected


def test_generation_reads_its_weights_in_int8_as_the_weights_put_on_the_int8_grid():
    """weights="int8": each product weight's output column as int8 times its largest magnitude / 127;
    the same model at float with every such weight put on that grid here generates the same text."""
    model = C.layers.TransformerLM(V, options(tie_embeddings=False))
    rng = np.random.default_rng(6)
    for p in model.parameters:
        p.value = rng.normal(0, 0.5, p.value.shape).astype(np.float32)
    prompts = [[1, 4, 2], [5], [7, 7]]
    full = model.generate(prompts, 8, hypotheses=True)
    before = C.get_bf16_products()
    try:
        C.set_bf16_products("off")  # the widening kernels: the rows as they are, the weights alone rounded
        assert not C.bf16_kernels_chosen()
        int8 = model.generate(prompts, 8, weights="int8", hypotheses=True)
        C.set_bf16_products("on")  # vdpbf16ps where the CPU has it: the rows rounded to bfloat16 too
        paired = model.generate(prompts, 8, weights="int8", hypotheses=True)
    finally:
        C.set_bf16_products(before)
    assert C.get_bf16_products() == before
    with pytest.raises(ValueError, match="expected auto, on or off"):
        C.set_bf16_products("maybe")
    bf16 = model.generate(prompts, 8, weights="bfloat16", hypotheses=True)
    for p in model.parameters:
        if p.name.endswith(".W"):  # [in, out]: a scale per output column
            w = p.value.astype(np.float64)
            scale = (np.abs(w).max(0) / 127).astype(np.float32).astype(np.float64)
            p.value = (np.rint(w / scale) * scale).astype(np.float32)
    on_grid = model.generate(prompts, 8, hypotheses=True)
    for a, b, c, d, e in zip(int8, on_grid, full, bf16, paired):
        assert a[0]["symbols"] == b[0]["symbols"]
        assert a[0]["log_probability"] == pytest.approx(b[0]["log_probability"], rel=1e-4)
        assert abs(e[0]["log_probability"] - b[0]["log_probability"]) < 0.05 * (1 + abs(b[0]["log_probability"]))
        assert abs(a[0]["log_probability"] - c[0]["log_probability"]) < 0.05 * (1 + abs(c[0]["log_probability"]))
        assert abs(d[0]["log_probability"] - c[0]["log_probability"]) < 0.05 * (1 + abs(c[0]["log_probability"]))
    with pytest.raises(C.UserError, match="expected float, bfloat16 or int8"):
        model.generate(prompts, 8, weights="int4")


def test_generation_keeps_its_cache_in_bfloat16_when_asked():
    """cache="bfloat16": every key and value row rounded as stored. Greedy decoding then scores
    near float's cache (the same model), the log-probabilities moved by the rounding; any other
    name is refused before any step."""
    model = C.layers.TransformerLM(V, options())
    rng = np.random.default_rng(8)
    for p in model.parameters:
        p.value = rng.normal(0, 0.5, p.value.shape).astype(np.float32)
    prompts = [[1, 4, 2, 9, 3], [5], [7, 7]]
    full = model.generate(prompts, 8, hypotheses=True)
    half = model.generate(prompts, 8, cache="bfloat16", hypotheses=True)
    moved = 0.0
    for a, b in zip(half, full):
        assert abs(a[0]["log_probability"] - b[0]["log_probability"]) < 0.05 * (1 + abs(b[0]["log_probability"]))
        moved = max(moved, abs(a[0]["log_probability"] - b[0]["log_probability"]))
    assert moved > 1e-6
    with pytest.raises(C.UserError, match="expected float or bfloat16"):
        model.generate(prompts, 8, cache="int8")


def test_two_inter_op_threads_generate_items_in_groups_with_the_same_text(lm):
    """With 2 inter-op threads and 4+ items a thread, items are generated in groups, one per thread:
    the same symbols, on_symbol called with the GIL from either thread, its exception raised here."""
    prompts = [[n % V, (3 * n + 1) % V] for n in range(9)]
    one = lm.generate(prompts, 20, sample=True, seed=3)
    seen = {}
    before = C.inter_op_threads()
    C.set_inter_op_threads(2)
    try:
        two = lm.generate(prompts, 20, sample=True, seed=3,
                          on_symbol=lambda item, symbol: seen.setdefault(item, []).append(symbol))

        def fail(item, symbol):
            if item == 8:
                raise ValueError("item 8")
        with pytest.raises(ValueError, match="item 8"):
            lm.generate(prompts, 20, sample=True, seed=3, on_symbol=fail)
    finally:
        C.set_inter_op_threads(before)
    assert two == one
    assert [seen[n] for n in range(9)] == one
