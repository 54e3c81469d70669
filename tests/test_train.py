"""Tests for posgeo._train: tasks, the training loop, determinism, freezing, caching."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posgeo import Transformer, TransformerConfig, optimize
from posgeo import (
    IGNORE_INDEX,
    Batch,
    FirstMarkerTask,
    MLMTask,
    TrainConfig,
    TrainResult,
    evaluate,
    train,
)
from posgeo._train import LMTask, SortedTask, Task


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


MARKER = FirstMarkerTask(seq_len=8, n_filler=6)


def cfg_for(task, position: str = "learned", **kw) -> TransformerConfig:
    base = dict(
        vocab_size=task.vocab_size, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=8,
        position=position, n_classes=task.n_classes,
    )
    base.update(kw)
    return TransformerConfig(**base)


def tc(**kw) -> TrainConfig:
    base = dict(steps=20, batch_size=32, lr=3e-3, device="cpu", log_every=5)
    base.update(kw)
    return TrainConfig(**base)


# --------------------------------------------------------------------------- tasks


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), seq_len=st.integers(2, 9), vocab=st.integers(2, 6))
def test_sorted_task_labels_are_correct(seed, seq_len, vocab):
    b = SortedTask(vocab_size=vocab, seq_len=seq_len).sample(64, torch.Generator().manual_seed(seed))
    is_sorted = (b.tokens[:, 1:] >= b.tokens[:, :-1]).all(1)
    assert torch.equal(is_sorted.long(), b.targets)
    assert int(b.tokens.min()) >= 0 and int(b.tokens.max()) < vocab


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), seq_len=st.integers(2, 9))
def test_first_marker_task_labels_are_correct(seed, seq_len):
    task = FirstMarkerTask(seq_len=seq_len, n_filler=3)
    b = task.sample(64, torch.Generator().manual_seed(seed))
    assert torch.equal((b.tokens == task.marker_a).sum(1), torch.ones(64, dtype=torch.long))
    assert torch.equal((b.tokens == task.marker_b).sum(1), torch.ones(64, dtype=torch.long))
    pos_a = (b.tokens == task.marker_a).long().argmax(1)
    pos_b = (b.tokens == task.marker_b).long().argmax(1)
    assert torch.equal((pos_a < pos_b).long(), b.targets)


@pytest.mark.parametrize("task", [SortedTask(vocab_size=8, seq_len=6), FirstMarkerTask(seq_len=6, n_filler=4)])
def test_classification_tasks_are_balanced_and_order_sensitive(task):
    b = task.sample(8000, torch.Generator().manual_seed(0))
    assert abs(float(b.targets.float().mean()) - 0.5) < 0.03
    assert task.order_sensitive and task.kind == "cls" and task.n_classes == 2
    assert isinstance(task, Task)


def _positional_sampler(b: int, s: int) -> np.ndarray:
    """Token at position i is i (mod 5) with probability 0.8, else uniform: order matters."""
    rng = np.random.default_rng(s)
    base = np.tile(np.arange(6) % 5, (b, 1))
    noise = rng.integers(0, 5, (b, 6))
    return np.where(rng.random((b, 6)) < 0.8, base, noise)


def test_mlm_task_masks_and_targets():
    task = MLMTask(_positional_sampler, n_tokens=5, seq_len=6, name="positional-5", mask_prob=0.3)
    b = task.sample(500, torch.Generator().manual_seed(0))
    masked = b.tokens == task.mask_token
    assert torch.equal(masked, b.targets != IGNORE_INDEX)
    assert bool(masked.any(1).all())  # at least one masked token per sequence
    assert 0.25 < float(masked.float().mean()) < 0.4
    assert int(b.targets[masked].max()) < 5 and b.kind == "mlm"


def test_sampler_with_wrong_shape_is_a_clear_error():
    task = MLMTask(lambda b, s: np.zeros((b, 3), dtype=int), n_tokens=5, seq_len=6, name="bad")
    with pytest.raises(ValueError, match=r"shape \(2, 6\)"):
        task.sample(2, torch.Generator())
    with pytest.raises(ValueError, match="outside"):
        LMTask(lambda b, s: np.full((b, 4), 9), n_tokens=5, seq_len=4, name="oob").sample(2, torch.Generator())


def test_batch_validation():
    with pytest.raises(ValueError, match="unknown batch kind"):
        Batch(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, dtype=torch.long), "seq2seq")
    with pytest.raises(ValueError, match=r"targets must have shape \(2, 3\)"):
        Batch(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, dtype=torch.long), "mlm")


# --------------------------------------------------------------------------- training


def test_loss_decreases_on_a_tiny_task():
    res = train(cfg_for(MARKER), tc(steps=200, batch_size=64, log_every=20), MARKER, progress=False, cache=False)
    assert isinstance(res, TrainResult)
    first, last = res.history[0]["loss"], res.final("loss")
    assert first > 0.6  # chance level: log 2 = 0.693
    assert last < 0.2 and last < first
    assert res.history[-1]["step"] == 199 and res.device == "cpu"


def test_same_seed_same_result_other_seed_differs():
    cfg = cfg_for(MARKER, dropout=0.1)  # dropout draws random numbers too
    state = torch.random.get_rng_state()
    a = train(cfg, tc(), MARKER, progress=False, cache=False)
    b = train(cfg, tc(), MARKER, progress=False, cache=False)
    c = train(cfg, tc(seed=1), MARKER, progress=False, cache=False)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global RNG is untouched
    assert a.history == b.history
    for k in a.state_dict:
        assert torch.equal(a.state_dict[k], b.state_dict[k]), k
    assert a.history != c.history
    assert not torch.equal(a.state_dict["tok.weight"], c.state_dict["tok.weight"])


def test_frozen_parameters_are_unchanged():
    cfg = cfg_for(MARKER)
    freeze = ("blocks.0.attn", "blocks.1.attn", "pos")
    res = train(cfg, tc(freeze=freeze, weight_decay=0.1), MARKER, progress=False, cache=False)
    init = Transformer(cfg, seed=0).state_dict()
    frozen = [k for k in init if k.startswith(freeze)]
    assert len(frozen) == 9  # the table, and qkv + out weights and biases of 2 layers
    for k in init:
        same = torch.equal(init[k], res.state_dict[k])
        if k == "lm_head.weight":  # unused by a classification loss: no gradient, no update
            assert same
            continue
        assert same == (k in frozen), k


def test_snapshots_of_the_position_table():
    res = train(cfg_for(MARKER), tc(steps=10, snapshot_every=5), MARKER, progress=False, cache=False)
    assert sorted(res.snapshots) == [0, 5, 10]
    assert res.snapshots[0].shape == (8, 32)
    assert np.abs(res.snapshots[10] - res.snapshots[0]).max() > 1e-4
    np.testing.assert_allclose(res.snapshots[10], res.model().position_table())
    fixed = train(cfg_for(MARKER, "sinusoidal"), tc(steps=10, snapshot_every=5), MARKER, progress=False, cache=False)
    np.testing.assert_array_equal(fixed.snapshots[0], fixed.snapshots[10])


def test_eval_every_and_eval_fn_are_recorded():
    res = train(cfg_for(MARKER), tc(steps=10, eval_every=5, eval_batches=2), MARKER, progress=False, cache=False)
    evals = [r for r in res.history if "eval_accuracy" in r]
    assert [r["step"] for r in evals] == [5, 10] and all(0 <= r["eval_accuracy"] <= 1 for r in evals)

    def probe(model):
        assert not model.training
        return {"table_norm": float(np.linalg.norm(model.position_table()))}

    res = train(cfg_for(MARKER), tc(steps=10, eval_every=10), MARKER, eval_fn=probe, progress=False, cache=False)
    assert res.final("eval_table_norm") > 0
    with pytest.raises(KeyError, match="never recorded"):
        res.final("eval_accuracy")


def test_results_are_cached(private_cache):
    tmp_path = private_cache
    a = train(cfg_for(MARKER), tc(steps=5), MARKER, progress=False)
    assert len(list(tmp_path.glob("train-*.pkl"))) == 1
    b = train(cfg_for(MARKER), tc(steps=5), MARKER, progress=False)
    assert b.wall_time == a.wall_time and b.history == a.history  # read back, not recomputed
    train(cfg_for(MARKER), tc(steps=5), FirstMarkerTask(seq_len=8, n_filler=5), progress=False)
    train(cfg_for(MARKER), tc(steps=5, lr=1e-3), MARKER, progress=False)
    assert len(list(tmp_path.glob("train-*.pkl"))) == 3


def test_mlm_and_causal_lm_train():
    mlm = MLMTask(_positional_sampler, n_tokens=5, seq_len=6, name="positional-5", mask_prob=0.3)
    cfg = TransformerConfig(vocab_size=mlm.vocab_size, d_model=32, n_heads=4, n_layers=1, d_ff=64, max_len=6)
    res = train(cfg, tc(steps=150), mlm, progress=False, cache=False)
    # predicting i mod 5 at a masked slot is right with probability 0.8 + 0.2/5 = 0.84
    assert evaluate(res.model(), mlm, n_batches=4) > 0.75
    lm = LMTask(_positional_sampler, n_tokens=5, seq_len=6, name="positional-5")
    res = train(dataclasses.replace(cfg, vocab_size=5, causal=True), tc(steps=150), lm, progress=False, cache=False)
    assert evaluate(res.model(), lm, n_batches=4) > 0.75


def _marker_model(position: str) -> Transformer:
    res = train(cfg_for(MARKER, position), tc(steps=300, batch_size=64, log_every=50), MARKER, progress=False, cache=False)
    return res.model()


def test_position_free_encoder_at_chance_learned_positions_beat_it():
    acc_none = evaluate(_marker_model("none"), MARKER, n_batches=8, seed=7)
    acc_learned = evaluate(_marker_model("learned"), MARKER, n_batches=8, seed=7)
    assert abs(acc_none - 0.5) < 0.04  # 2048 samples: 4 sigma of a fair coin is 0.044
    assert acc_learned > 0.9


# --------------------------------------------------------------------------- errors


def test_bad_model_configs_raise_clear_errors():
    with pytest.raises(ValueError, match="unknown position 'absolute'"):
        cfg_for(MARKER, "absolute")
    with pytest.raises(ValueError, match="d_model=30 is not divisible by n_heads=4"):
        cfg_for(MARKER, d_model=30)


def test_incompatible_task_and_model_raise_clear_errors():
    long_task = FirstMarkerTask(seq_len=10, n_filler=6)
    with pytest.raises(ValueError, match=r"sequence length 10 exceeds the model's max_len=8"):
        train(cfg_for(MARKER), tc(), long_task, progress=False, cache=False)
    with pytest.raises(ValueError, match="vocab_size is 5"):
        train(cfg_for(MARKER, vocab_size=5), tc(), MARKER, progress=False, cache=False)
    with pytest.raises(ValueError, match="pass n_classes=2"):
        train(cfg_for(MARKER, n_classes=None), tc(), MARKER, progress=False, cache=False)
    lm = LMTask(_positional_sampler, n_tokens=5, seq_len=6, name="p")
    with pytest.raises(ValueError, match="causal=True"):
        train(cfg_for(lm, n_classes=None), tc(), lm, progress=False, cache=False)
    with pytest.raises(ValueError, match="matches no parameter"):
        train(cfg_for(MARKER), tc(freeze=("blocks.7",)), MARKER, progress=False, cache=False)
    with pytest.raises(ValueError, match="snapshot_every"):
        train(cfg_for(MARKER, "rope"), tc(snapshot_every=5), MARKER, progress=False, cache=False)
    with pytest.raises(TypeError, match="Task protocol"):
        train(cfg_for(MARKER), tc(), object(), progress=False, cache=False)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"steps": 0}, ValueError, "steps must be an int >= 1"),
        ({"lr": 0.0}, ValueError, "lr must be > 0"),
        ({"grad_clip": -1.0}, ValueError, "grad_clip"),
        ({"device": "tpu-9000"}, ValueError, "unknown device"),
        ({"freeze": "tok"}, TypeError, r"pass \('tok',\)"),
        ({"batch_size": 2.5}, TypeError, "batch_size must be an int"),
    ],
)
def test_bad_train_configs_raise_clear_errors(kwargs, error, match):
    with pytest.raises(error, match=match):
        TrainConfig(**kwargs)


# --------------------------------------------------------------------------- extension points
def test_prepare_hook_runs_after_init_and_needs_a_cache_description():
    def zero_tokens(model):
        with torch.no_grad():
            model.tok.weight.zero_()
        return model

    cfg = cfg_for(MARKER)
    with pytest.raises(ValueError, match="cache_options"):
        train(cfg, tc(steps=2), MARKER, prepare=zero_tokens, progress=False)
    res = train(cfg, tc(steps=1, lr=1e-12), MARKER, prepare=zero_tokens, progress=False, cache=False)
    assert float(res.state_dict["tok.weight"].abs().max()) < 1e-6  # prepared, then (almost) not moved
    with pytest.raises(TypeError, match="prepare must be callable"):
        train(cfg, tc(steps=1), MARKER, prepare="zero", progress=False, cache=False)


def test_position_weight_decay_needs_a_table_and_is_keyed(private_cache):
    cfg = cfg_for(MARKER)
    with pytest.raises(ValueError, match="trainable position table"):
        train(dataclasses.replace(cfg, position="none"), tc(steps=1), MARKER, position_weight_decay=1.0, progress=False)
    train(cfg, tc(steps=2), MARKER, position_weight_decay=0.0, progress=False)
    train(cfg, tc(steps=2), MARKER, position_weight_decay=5.0, progress=False)
    train(cfg, tc(steps=2), MARKER, progress=False)
    assert len(list(private_cache.glob("train-*.pkl"))) == 3  # three different results, three entries


def test_optimize_is_the_loop_of_train():
    w = torch.nn.Parameter(torch.tensor([2.0, -1.0]))
    seen = []
    log = optimize([{"params": [w], "weight_decay": 0.0}], lambda step: ((w**2).sum(), torch.tensor(1.0)),
                   steps=7, lr=0.1, log_every=3, after_step=seen.append, progress=False)
    assert [r["step"] for r in log] == [0, 3, 6] and seen == list(range(1, 8))
    assert float((w.detach()**2).sum()) < 5.0
    with pytest.raises(ValueError, match="param_groups"):
        optimize([], lambda step: (w.sum(), w.sum()), steps=1, lr=0.1, progress=False)
    with pytest.raises(ValueError, match="lr must be >"):
        optimize([{"params": [w]}], lambda step: (w.sum(), w.sum()), steps=1, lr=0.0, progress=False)


def test_optimize_resumed_from_a_checkpoint_ends_as_the_uninterrupted_run():
    """Fault injection: interrupted in its checkpoint at step 6 of 10, resumed from what it saved."""
    import copy

    def run(**kwargs):
        torch.manual_seed(0)
        w = torch.nn.Parameter(torch.tensor([2.0, -1.0, 0.5]))
        g = torch.Generator().manual_seed(1)

        def loss(step):  # a noisy objective: the resumed run must also continue the caller's generator
            x = torch.randn(3, generator=g)
            return ((w - x) ** 2).sum(), torch.tensor(0.0)

        return w, g, loss

    w, g, loss = run()
    whole = optimize([{"params": [w], "weight_decay": 0.1}], loss, steps=10, lr=0.05, log_every=2, progress=False)
    saved, checkpoints = {}, []

    def save_then_die(done, state):
        checkpoints.append(done)
        saved.update(done=done, w=w2.detach().clone(), g=g2.get_state(), opt=copy.deepcopy(state), log=copy.deepcopy(log))
        if done == 6:
            raise KeyboardInterrupt

    w2, g2, loss2 = run()
    log = []
    with pytest.raises(KeyboardInterrupt):
        optimize([{"params": [w2], "weight_decay": 0.1}], loss2, steps=10, lr=0.05, log_every=2, history=log,
                 checkpoint=save_then_die, checkpoint_every=3, progress=False)
    assert checkpoints == [3, 6]
    w3, g3, loss3 = run()
    with torch.no_grad():
        w3.copy_(saved["w"])
    g3.set_state(saved["g"])
    resumed = optimize([{"params": [w3], "weight_decay": 0.1}], loss3, steps=10, lr=0.05, log_every=2,
                       history=saved["log"], start=saved["done"], optimizer_state=saved["opt"], progress=False)
    assert resumed == whole and torch.equal(w3, w)
    w4, g4, loss4 = run()  # the same 4 steps from the same point without AdamW's moments: another run
    with torch.no_grad():
        w4.copy_(saved["w"])
    g4.set_state(saved["g"])
    optimize([{"params": [w4], "weight_decay": 0.1}], loss4, steps=4, lr=0.05, progress=False)
    assert not torch.allclose(w4, w, rtol=0, atol=1e-4)


def test_optimize_resume_and_checkpoint_options_are_checked():
    w = torch.nn.Parameter(torch.tensor([1.0]))
    args = ([{"params": [w]}], lambda step: ((w**2).sum(), torch.tensor(0.0)))
    with pytest.raises(ValueError, match="needs optimizer_state"):
        optimize(*args, steps=5, lr=0.1, start=2, progress=False)
    with pytest.raises(ValueError, match="past the last step"):
        optimize(*args, steps=5, lr=0.1, start=6, optimizer_state={}, progress=False)
    with pytest.raises(ValueError, match="start"):
        optimize(*args, steps=5, lr=0.1, start=-1, progress=False)
    with pytest.raises(ValueError, match="checkpoint and checkpoint_every together"):
        optimize(*args, steps=5, lr=0.1, checkpoint=lambda done, state: None, progress=False)
    with pytest.raises(ValueError, match="checkpoint and checkpoint_every together"):
        optimize(*args, steps=5, lr=0.1, checkpoint_every=2, progress=False)
    with pytest.raises(ValueError, match="checkpoint_every"):
        optimize(*args, steps=5, lr=0.1, checkpoint=lambda done, state: None, checkpoint_every=0, progress=False)
    done = []
    optimize(*args, steps=4, lr=0.1, checkpoint=lambda d, state: done.append(d), checkpoint_every=2, progress=False)
    assert done == [2]  # not after the last step: the result itself is stored then


@pytest.mark.parametrize(
    ("kwargs", "exc", "match"),
    [
        ({"lr": float("inf")}, ValueError, "lr must be finite"),
        ({"lr": float("nan")}, ValueError, "lr must be finite"),
        ({"weight_decay": float("nan")}, ValueError, "weight_decay must be finite"),
        ({"grad_clip": float("inf")}, ValueError, "grad_clip must be finite"),
        ({"seed": 2**64}, ValueError, "seed must be an int <="),
        ({"lr": "1e-3"}, TypeError, "lr must be a real number"),
    ],
)
def test_non_finite_and_oversized_settings_are_refused_at_construction(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        TrainConfig(**kwargs)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a torch without CUDA")
def test_cuda_on_a_cpu_build_is_a_clear_error():
    with pytest.raises(ValueError, match="no usable CUDA device"):
        TrainConfig(device="cuda")


def test_optimize_with_sgd_takes_plain_gradient_steps():
    # on w**2 a gradient step multiplies w by (1 - 2 lr): after 3 steps of lr 0.1, 3 * 0.8**3
    w = torch.nn.Parameter(torch.tensor([3.0]))
    optimize([{"params": [w], "weight_decay": 0.0}], lambda step: ((w**2).sum(), torch.tensor(0.0)),
             steps=3, lr=0.1, optimizer="sgd", progress=False)
    assert float(w.detach()) == pytest.approx(3 * 0.8**3, rel=1e-6)
    with pytest.raises(ValueError, match="unknown optimizer 'adam'"):
        optimize([{"params": [w]}], lambda step: ((w**2).sum(), torch.tensor(0.0)), steps=1, lr=0.1,
                 optimizer="adam", progress=False)
