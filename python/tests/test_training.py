"""Training from Python: one step of sgd, momentum_sgd and adam against its formula in numpy float64
(gradients computed in numpy, not by loom), the rate units (mean vs summed gradient), CNTK's schedule
values, the Trainer's counters and printer, checkpoints that resume bit for bit, fit, Ctrl-C during
fit, and the errors."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import loom as C
from support import rng


def _linear_regression(seed=0, n=6):
    """A float64 linear model y = x W + b with a squared error per item, and one minibatch."""
    r = rng(seed)
    x = C.input_variable(3, name="x")
    y = C.input_variable(2, name="y")
    w = C.parameter((3, 2), init=r.normal(size=(3, 2)), dtype=np.float64, name="w")
    b = C.parameter(2, init=r.normal(size=2), dtype=np.float64, name="b")
    z = C.times(x, w) + b
    loss = C.squared_error(z, y)
    data = {x: r.normal(size=(n, 3)), y: r.normal(size=(n, 2))}
    return x, y, w, b, z, loss, data


def _numpy_gradients(w, b, data, x, y):
    """d/dW and d/db of the MEAN over items of sum_j (x W + b - y)_j^2, in float64."""
    xs, ys = data[x], data[y]
    e = xs @ w + b - ys
    n = len(xs)
    return 2 * xs.T @ e / n, 2 * e.sum(axis=0) / n


def test_sgd_step_is_w_minus_lr_times_the_mean_gradient():
    x, y, w, b, z, loss, data = _linear_regression()
    w0, b0 = w.value.copy(), b.value.copy()
    trainer = C.Trainer(z, (loss, loss), [C.sgd(z.parameters, lr=0.1)])
    assert trainer.train_minibatch(data) is True
    gw, gb = _numpy_gradients(w0, b0, data, x, y)
    np.testing.assert_allclose(w.value, w0 - 0.1 * gw, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(b.value, b0 - 0.1 * gb, rtol=1e-12, atol=1e-13)
    expected_loss = np.mean(np.sum((data[x] @ w0 + b0 - data[y]) ** 2, axis=1))
    assert trainer.previous_minibatch_loss_average == pytest.approx(expected_loss, rel=1e-12)
    assert trainer.previous_minibatch_evaluation_average == pytest.approx(expected_loss, rel=1e-12)
    assert trainer.previous_minibatch_sample_count == 6
    assert trainer.total_number_of_samples_seen == 6


def test_a_per_sample_rate_applies_to_the_summed_gradient():
    x, y, w, b, z, loss, data = _linear_regression(1)
    w0, b0 = w.value.copy(), b.value.copy()
    lr = C.learning_rate_schedule(0.01, C.UnitType.sample)
    C.Trainer(z, loss, C.sgd(z.parameters, lr)).train_minibatch(data)
    gw, gb = _numpy_gradients(w0, b0, data, x, y)
    np.testing.assert_allclose(w.value, w0 - 0.01 * 6 * gw, rtol=1e-12, atol=1e-13)
    # learning_parameter_schedule(lr, minibatch_size=k): lr is meant for the mean over k samples.
    x, y, w, b, z, loss, data = _linear_regression(1)
    C.Trainer(z, loss, C.sgd(z.parameters, C.learning_parameter_schedule(0.3, minibatch_size=3))).train_minibatch(data)
    np.testing.assert_allclose(w.value, w0 - 0.3 / 3 * 6 * gw, rtol=1e-12, atol=1e-13)
    x, y, w, b, z, loss, data = _linear_regression(1)
    C.Trainer(z, loss, C.sgd(z.parameters, C.learning_parameter_schedule_per_sample(0.01))).train_minibatch(data)
    np.testing.assert_allclose(w.value, w0 - 0.01 * 6 * gw, rtol=1e-12, atol=1e-13)


def test_momentum_sgd_two_steps_with_cntk_unit_gain():
    x, y, w, b, z, loss, data = _linear_regression(2)
    w0, b0 = w.value.copy(), b.value.copy()
    trainer = C.Trainer(z, loss, C.momentum_sgd(z.parameters, 0.1, C.momentum_schedule(0.9)))
    v_w, v_b, ww, bb = np.zeros_like(w0), np.zeros_like(b0), w0, b0
    for _ in range(2):
        trainer.train_minibatch(data)
        gw, gb = _numpy_gradients(ww, bb, data, x, y)
        v_w, v_b = 0.9 * v_w + 0.1 * gw, 0.9 * v_b + 0.1 * gb  # CNTK's unit gain: (1 - m) g
        ww, bb = ww - 0.1 * v_w, bb - 0.1 * v_b
    np.testing.assert_allclose(w.value, ww, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(b.value, bb, rtol=1e-11, atol=1e-12)
    assert trainer.parameter_learners[0].learning_rate() == 0.1  # CNTK's value, before the unit gain


def test_l2_regularization_and_gradient_clipping_by_the_global_norm():
    x, y, w, b, z, loss, data = _linear_regression(16)
    w0, b0 = w.value.copy(), b.value.copy()
    gw, gb = _numpy_gradients(w0, b0, data, x, y)
    norm = np.sqrt(np.sum(gw ** 2) + np.sum(gb ** 2))
    assert norm > 0.5
    C.Trainer(z, loss, C.sgd(z.parameters, 0.1, l2_regularization_weight=0.3,
                             gradient_clipping_threshold_per_sample=0.5)).train_minibatch(data)
    scale = 0.5 / norm  # the global norm over both parameters, before the decay is added
    np.testing.assert_allclose(w.value, w0 - 0.1 * (gw * scale + 0.3 * w0), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(b.value, b0 - 0.1 * (gb * scale + 0.3 * b0), rtol=1e-12, atol=1e-13)


def test_reset_learning_rate_keeps_the_unit_gain():
    x, y, w, b, z, loss, data = _linear_regression(15)
    w0, b0 = w.value.copy(), b.value.copy()
    learner = C.momentum_sgd(z.parameters, 0.1, 0.5)
    trainer = C.Trainer(z, loss, learner)
    learner.reset_learning_rate(C.learning_parameter_schedule(0.2))
    assert learner.learning_rate() == 0.2
    trainer.train_minibatch(data)
    gw, _ = _numpy_gradients(w0, b0, data, x, y)
    np.testing.assert_allclose(w.value, w0 - 0.2 * 0.5 * gw, rtol=1e-12, atol=1e-13)  # v = (1 - m) g
    with pytest.raises(C.UserError, match="unit"):
        learner.reset_learning_rate(C.learning_rate_schedule(0.1, C.UnitType.sample))


def test_adam_steps_by_its_formula():
    x, y, w, b, z, loss, data = _linear_regression(3)
    learner = C.adam(z.parameters, lr=0.05, momentum=0.8, variance_momentum=0.99, epsilon=1e-8)
    trainer = C.Trainer(z, loss, learner)
    params = [w.value.copy(), b.value.copy()]
    moments = [[0.0, 0.0], [0.0, 0.0]]
    for t in (1, 2):
        trainer.train_minibatch(data)
        grads = _numpy_gradients(params[0], params[1], data, x, y)
        for k, g in enumerate(grads):
            m, v = moments[k]
            m, v = 0.8 * m + 0.2 * g, 0.99 * v + 0.01 * g ** 2
            moments[k] = [m, v]
            params[k] = params[k] - 0.05 * (m / (1 - 0.8 ** t)) / (np.sqrt(v / (1 - 0.99 ** t)) + 1e-8)
    np.testing.assert_allclose(w.value, params[0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.value, params[1], rtol=1e-10, atol=1e-12)
    assert learner.learning_rate() == 0.05


def test_logistic_regression_loss_falls_with_adam_and_sgd():
    r = rng(4)
    xs = r.normal(size=(64, 2))
    labels = (xs[:, :1] - 0.5 * xs[:, 1:] > 0).astype(np.float64)
    for make in (lambda p: C.adam(p, 0.1, 0.9), lambda p: C.sgd(p, 0.5)):
        x, y = C.input_variable(2), C.input_variable(1)
        w = C.parameter((2, 1), init=0.0, dtype=np.float64)
        b = C.parameter(1, init=0.0, dtype=np.float64)
        p = C.sigmoid(C.times(x, w) + b)
        trainer = C.Trainer(p, C.binary_cross_entropy(p, y), [make(p.parameters)])
        losses = []
        for _ in range(30):
            trainer.train_minibatch({x: xs, y: labels})
            losses.append(trainer.previous_minibatch_loss_average)
        assert losses[0] == pytest.approx(np.log(2), rel=1e-12)  # p = 0.5 everywhere at the start
        assert losses[-1] < 0.5 * losses[0]
        assert all(b2 <= a + 1e-12 for a, b2 in zip(losses, losses[1:]))


def test_schedules_give_cntks_values():
    s = C.learning_parameter_schedule(0.01)
    assert (s[0], s[1], s[10 ** 6]) == (0.01, 0.01, 0.01)
    s = C.learning_parameter_schedule([0.01, 0.001], epoch_size=1000)
    assert (s[0], s[1], s[999], s[1000], s[1001], s[10 ** 6]) == (0.01, 0.01, 0.01, 0.001, 0.001, 0.001)
    s = C.learning_parameter_schedule([(12, 0.1), (15, 0.01), (1, 0.001)], epoch_size=100)
    assert (s[0], s[1199], s[1200], s[2699], s[2700], s[5000]) == (0.1, 0.1, 0.01, 0.01, 0.001, 0.001)
    # loom's own schedules are functions of the update's number.
    cos = C.warmup_cosine_decay(1.0, 2, 10, 0.1)
    assert cos(0) == pytest.approx(0.5) and cos(1) == pytest.approx(1.0)
    assert cos(6) == pytest.approx(0.1 + 0.9 * (1 + np.cos(np.pi * 4 / 8)) / 2)
    assert C.step_decay(0.1, 3, 0.5)(7) == pytest.approx(0.1 * 0.25)


def test_a_schedule_by_samples_changes_the_rate_between_minibatches():
    x, y, w, b, z, loss, data = _linear_regression(5, n=4)
    learner = C.sgd(z.parameters, C.learning_parameter_schedule([0.1, 0.02], epoch_size=8))
    trainer = C.Trainer(z, loss, learner)
    rates = []
    for _ in range(3):
        w_before, b_before = w.value.copy(), b.value.copy()
        trainer.train_minibatch(data)
        gw, _ = _numpy_gradients(w_before, b_before, data, x, y)
        rates.append(np.mean((w_before - w.value) / gw))
        assert learner.learning_rate() == (0.1 if trainer.total_number_of_samples_seen < 8 else 0.02)
    np.testing.assert_allclose(rates, [0.1, 0.1, 0.02], rtol=1e-9)  # 0, 4, 8 samples seen before each


def test_loom_rates_by_update_number_and_python_functions():
    for lr, expected in ((C.warmup_cosine_decay(0.2, 2, 10), [0.1, 0.2, 0.2, 0.2 * (1 + np.cos(np.pi / 8)) / 2]),
                         (lambda step: 0.3 / (step + 1), [0.3, 0.15, 0.1, 0.075])):
        x, y, w, b, z, loss, data = _linear_regression(13)
        trainer = C.Trainer(z, loss, C.sgd(z.parameters, lr))
        rates = []
        for _ in range(4):
            w_before, b_before = w.value.copy(), b.value.copy()
            trainer.train_minibatch(data)
            gw, _ = _numpy_gradients(w_before, b_before, data, x, y)
            rates.append(np.mean((w_before - w.value) / gw))
        np.testing.assert_allclose(rates, expected, rtol=1e-9)


def test_progress_printer_prints_each_n_minibatches_and_epochs(capsys):
    x, y, w, b, z, loss, data = _linear_regression(6)
    printer = C.logging.ProgressPrinter(freq=2, tag="lin", num_epochs=3)
    trainer = C.Trainer(z, (loss, loss), [C.sgd(z.parameters, 0.01)], [printer])
    for _ in range(4):
        trainer.train_minibatch(data)
    trainer.summarize_training_progress()
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 3, out  # two every-2 lines and the epoch's
    assert all("lin" in line for line in lines)
    assert "minibatch 1-2" in lines[0] and "minibatch 3-4" in lines[1]
    assert "epoch 1 of 3" in lines[2], out


def test_checkpoint_round_trip_resumes_bit_for_bit(tmp_path):
    path = str(tmp_path / "lin.ckpt")
    x, y, w, b, z, loss, data = _linear_regression(7)
    trainer = C.Trainer(z, loss, C.adam(z.parameters, 0.05, 0.9))
    batches = [{x: rng(40 + k).normal(size=(5, 3)), y: rng(50 + k).normal(size=(5, 2))} for k in range(5)]
    for d in batches[:2]:
        trainer.train_minibatch(d)
    trainer.save_checkpoint(path, {"epoch": 3, "note": "mid"})
    for d in batches[2:]:
        trainer.train_minibatch(d)
    w_whole, b_whole, seen = w.value.copy(), b.value.copy(), trainer.total_number_of_samples_seen
    assert trainer.restore_from_checkpoint(path) == {"epoch": 3, "note": "mid"}
    assert trainer.total_number_of_samples_seen == 10
    for d in batches[2:]:
        trainer.train_minibatch(d)
    assert np.array_equal(w.value, w_whole) and np.array_equal(b.value, b_whole)  # Adam's moments restored
    assert trainer.total_number_of_samples_seen == seen
    # A damaged file is a DataError and changes nothing.
    with open(path, "r+b") as f:
        f.seek(40)
        f.write(b"\xff\xff\xff")
    with pytest.raises(C.DataError):
        trainer.restore_from_checkpoint(path)
    assert np.array_equal(w.value, w_whole)


def test_fit_trains_its_epochs_and_resumes_from_its_checkpoint(tmp_path):
    def run(max_steps, path):
        x, y, w, b, z, loss, data = _linear_regression(8)
        batches = [{x: rng(60 + k).normal(size=(4, 3)), y: rng(70 + k).normal(size=(4, 2))} for k in range(3)]
        trainer = C.Trainer(z, loss, C.sgd(z.parameters, 0.05))
        result = C.fit(trainer, batches, epochs=2, checkpoint=path, max_steps=max_steps)
        return result, w.value.copy()

    whole, w_whole = run(0, None)
    assert whole["steps"] == 6 and whole["epochs"] == 2 and whole["stopped"] == "epochs"
    assert whole["epoch_losses"][1] < whole["epoch_losses"][0]
    path = str(tmp_path / "fit.ckpt")
    part, _ = run(4, path)
    assert part["stopped"] == "max_steps" and part["steps"] == 4
    rest, w_rest = run(0, path)
    assert rest["resumed"] and rest["steps"] == 6
    assert rest["epoch_losses"] == whole["epoch_losses"]
    assert np.array_equal(w_rest, w_whole)


def test_fit_evaluates_keeps_the_best_and_prints(capsys):
    x, y, w, b, z, loss, data = _linear_regression(12, n=8)
    scores, kept = [1.0, 3.0, 2.0], []

    def evaluate():
        kept.append(w.value.copy())
        return scores[len(kept) - 1]

    trainer = C.Trainer(z, loss, C.sgd(z.parameters, 0.05), [C.logging.ProgressPrinter(tag="fit", num_epochs=3)])
    result = C.fit(trainer, lambda epoch, index: data, epochs=3, minibatches_per_epoch=2, evaluate=evaluate)
    assert [e["score"] for e in result["evaluations"]] == scores
    assert [e["step"] for e in result["evaluations"]] == [2, 4, 6]
    assert result["best"] == 1
    assert np.array_equal(w.value, kept[1]) and not np.array_equal(kept[1], kept[2])  # the best restored
    out = capsys.readouterr().out
    assert out.count("[fit] epoch") == 3 and "epoch 3 of 3" in out and out.count("evaluation at step") == 3, out


def test_ctrl_c_during_fit_raises_keyboard_interrupt_and_leaves_the_checkpoint_whole(tmp_path):
    path = str(tmp_path / "stop.ckpt")
    x, y, w, b, z, loss, data = _linear_regression(9, n=32)
    trainer = C.Trainer(z, loss, C.sgd(z.parameters, 0.001))
    steps = []

    def source(epoch, index):
        steps.append(index)
        return data

    def interrupt():
        while len(steps) < 5:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        C.fit(trainer, source, epochs=1, minibatches_per_epoch=10 ** 7, checkpoint=path, checkpoint_every=1)
    sender.join()
    assert time.monotonic() - started < 30
    assert len(steps) < 10 ** 6
    # The checkpoint is whole: a new trainer restores it, with the steps trained before the signal.
    x2, y2, w2, b2, z2, loss2, _ = _linear_regression(10, n=32)
    other = C.Trainer(z2, loss2, C.sgd(z2.parameters, 0.001))
    other.restore_from_checkpoint(path)
    assert np.array_equal(w2.value, w.value)
    assert other.total_number_of_samples_seen == trainer.total_number_of_samples_seen > 0


def test_ctrl_c_during_train_minibatch_calls_raises_keyboard_interrupt_between_whole_minibatches():
    x, y, w, b, z, loss, data = _linear_regression(14, n=2000)
    trainer = C.Trainer(z, loss, C.sgd(z.parameters, 0.001))
    done = []

    def interrupt():
        while len(done) < 3:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=interrupt)
    sender.start()
    with pytest.raises(KeyboardInterrupt):
        for _ in range(10 ** 6):
            trainer.train_minibatch(data)
            done.append(trainer.previous_minibatch_loss_average)
    sender.join()
    assert len(done) < 10 ** 6
    # Each minibatch was trained whole: the samples seen are whole minibatches.
    assert trainer.total_number_of_samples_seen % 2000 == 0 and trainer.total_number_of_samples_seen >= 3 * 2000
    w_now = w.value.copy()
    trainer.test_minibatch(data)  # inference only: nothing changes
    assert np.array_equal(w.value, w_now)


def test_bad_input_is_a_user_error_naming_what_was_given():
    x, y, w, b, z, loss, data = _linear_regression(11)
    with pytest.raises(C.UserError, match="sgd: no parameters to learn"):
        C.sgd([], 0.1)
    with pytest.raises(C.UserError, match="item 1 of parameters is not a Parameter"):
        C.adam([w, x], 0.1, 0.9)
    with pytest.raises(C.UserError, match="no L1"):
        C.sgd(z.parameters, 0.1, l1_regularization_weight=0.1)
    with pytest.raises(C.UserError, match="epoch_size"):
        C.learning_parameter_schedule([0.1, 0.2])
    with pytest.raises(C.UserError, match="momentum"):
        C.momentum_sgd(z.parameters, 0.1, C.momentum_schedule([0.9, 0.8], epoch_size=10))
    with pytest.raises(C.UserError, match="momentum_schedule"):
        C.momentum_sgd(z.parameters, 0.1, C.momentum_as_time_constant_schedule(1100))
    learner = C.sgd(z.parameters, 0.1)
    trainer = C.Trainer(z, loss, learner)
    w0 = w.value.copy()
    with pytest.raises(C.UserError, match="already trains another Trainer"):
        C.Trainer(z, loss, learner)
    with pytest.raises(C.UserError, match="one learner"):
        C.Trainer(z, loss, [C.sgd([w], 0.1), C.sgd([b], 0.1)])
    with pytest.raises(C.UserError, match="train_minibatch"):
        trainer.train_minibatch({x: data[x]})  # no data for y
    with pytest.raises(C.UserError, match="train_minibatch"):
        trainer.train_minibatch({x: np.ones((6, 4)), y: data[y]})  # x's samples are of 3
    assert np.array_equal(w.value, w0) and trainer.total_number_of_samples_seen == 0  # refused before any work
    with pytest.raises(C.UserError, match="evaluate returns a number"):
        C.fit(trainer, [data], evaluate=lambda: "good")
    with pytest.raises(C.UserError, match="minibatches_per_epoch"):
        C.fit(trainer, lambda epoch, index: data)

    def broken(epoch, index):
        raise LookupError(f"no minibatch {index}")

    with pytest.raises(LookupError, match="no minibatch 0"):  # the source's own error, as it raised it
        C.fit(trainer, broken, minibatches_per_epoch=2)


@pytest.mark.parametrize("matrices_only", [True, False])
def test_adamw_decays_matrices_only_when_asked(matrices_only):
    # Adam's step of the linear model, computed in numpy: with decay, each parameter that decays is
    # first scaled by 1 - lr * weight_decay (torch.optim.AdamW); with decay_matrices_only the bias
    # (one axis) is not.
    x, y, w, b, z, loss, data = _linear_regression(3)
    w0, b0 = w.value.copy(), b.value.copy()
    lr, wd = 0.01, 0.5
    learner = C.adamw(z.parameters, lr, beta1=0.9, beta2=0.99, epsilon=1e-8, weight_decay=wd,
                      decay_matrices_only=matrices_only)
    C.Trainer(z, loss, learner).train_minibatch(data)
    gw, gb = _numpy_gradients(w0, b0, data, x, y)

    def adam(p0, g, decays):
        m, v = 0.1 * g, 0.01 * g * g  # (1 - beta) g and (1 - beta2) g^2 from zero moments
        m_hat, v_hat = m / (1 - 0.9), v / (1 - 0.99)
        return p0 * (1 - lr * wd if decays else 1.0) - lr * m_hat / (np.sqrt(v_hat) + 1e-8)

    np.testing.assert_allclose(w.value, adam(w0, gw, True), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(b.value, adam(b0, gb, not matrices_only), rtol=1e-10, atol=1e-12)


def test_matmul_precision_is_set_for_a_with_block_and_put_back():
    assert C.get_matmul_precision() == "highest"
    with C.matmul_precision("medium"):
        assert C.get_matmul_precision() == "medium"
        with pytest.raises(RuntimeError):
            with C.matmul_precision("highest"):
                assert C.get_matmul_precision() == "highest"
                raise RuntimeError("left by an exception")
        assert C.get_matmul_precision() == "medium"
    assert C.get_matmul_precision() == "highest"
    with pytest.raises(C.UserError, match="low"):
        C.set_matmul_precision("low")
    with pytest.raises(C.UserError, match="set_inter_op_threads: takes 1 or more threads; got 0"):
        C.set_inter_op_threads(0)
    assert C.inter_op_threads() >= 1
    assert C.gemm_kernels()
