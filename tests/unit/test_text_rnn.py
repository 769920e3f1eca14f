"""Text models (padding independence, FLOPs, bounded shapes in bf16), length bucketing, and
the trainer's `batch_order` and `flops_batch` hooks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from trainscale.data.bucketing import bucket_order
from trainscale.data.tensors import DataRequest, TensorData
from trainscale.metrics.flops import extra_flop_formulas
from trainscale.models import text_rnn
from trainscale.models.text_cnn import TextCNN
from trainscale.models.text_rnn import TextRNN, filler_lengths, rnn_compute_dtype
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.train.flops import count_flops_per_sample
from trainscale.train.trainer import train
from trainscale.workloads import get_workload
from trainscale.workloads.base import PYTORCH, Recipe, Workload

from tests.helpers.tiny import tiny_config

VOCAB = 50


def _models() -> dict[str, torch.nn.Module]:
    torch.manual_seed(0)
    return {
        "lstm": TextRNN(VOCAB, 3, cell="lstm", embed_dim=8, hidden_size=6),
        "gru": TextRNN(VOCAB, 3, cell="gru", embed_dim=8, hidden_size=6),
        "cnn": TextCNN(VOCAB, 3, embed_dim=8, filters=4),
    }


@pytest.mark.parametrize("name", ["lstm", "gru", "cnn"])
def test_output_does_not_depend_on_trailing_padding(name: str) -> None:
    model = _models()[name].eval()
    g = torch.Generator().manual_seed(1)
    lengths = [7, 2, 5, 1, 3]
    rows = [torch.randint(2, VOCAB, (n,), generator=g) for n in lengths]
    with torch.no_grad():
        alone = [model(r[None, :]) for r in rows]  # no padding at all
        for width in (7, 9, 40):
            batch = torch.zeros(len(rows), width, dtype=torch.long)
            for i, r in enumerate(rows):
                batch[i, : len(r)] = r
            together = model(batch)
            for i in range(len(rows)):
                torch.testing.assert_close(together[i], alone[i][0], rtol=1e-5, atol=1e-6)


def test_backward_direction_starts_at_the_last_real_token() -> None:
    # Changing the last real token changes the output; changing padding (were it read)
    # cannot be tested directly, so check that the reverse LSTM saw the last token first.
    model = _models()["lstm"].eval()
    x = torch.tensor([[5, 6, 7, 0, 0]])
    y = torch.tensor([[5, 6, 8, 0, 0]])
    with torch.no_grad():
        assert not torch.allclose(model(x), model(y))


def test_cell_argument_is_checked() -> None:
    with pytest.raises(ValueError, match="lstm, gru"):
        TextRNN(VOCAB, 2, cell="rnn")


# --- FLOPs -------------------------------------------------------------------------------


def _counted(model: torch.nn.Module, x: torch.Tensor) -> int:
    counter = FlopCounterMode(display=False, custom_mapping=extra_flop_formulas())
    with counter:
        model(x).sum().backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


@pytest.mark.parametrize(("cell", "gates"), [("lstm", 4), ("gru", 3)])
@pytest.mark.parametrize("lengths", [(6, 6), (6, 4)], ids=["equal", "mixed"])
def test_rnn_flops_match_the_analytic_count(cell: str, gates: int, lengths) -> None:
    # Equal lengths run the LSTM through the fused oneDNN kernel that torch's counter does
    # not know; mixed lengths decompose into matmuls. Both must count alike: per token and
    # direction 2*G*H*(E+H) forward, about three times that with the backward.
    embed, hidden = 8, 6
    model = TextRNN(VOCAB, 2, cell=cell, embed_dim=embed, hidden_size=hidden).train()
    x = torch.zeros(2, max(lengths), dtype=torch.long)
    for i, n in enumerate(lengths):
        x[i, :n] = 3
    forward = 2 * sum(lengths) * 2 * gates * hidden * (embed + hidden)
    classifier = 3 * 2 * 2 * 4 * hidden * 2  # forward + backward of the 24x2 linear
    assert _counted(model, x) == pytest.approx(3 * forward + classifier, rel=0.05)


def test_workload_flops_are_for_the_mean_length() -> None:
    workload = get_workload("imdb-bilstm")
    data = workload.make_synthetic(DataRequest(seed=0, max_train=64, max_test=8))
    x, y = workload.flops_batch(data)
    mean = (data.train_x != 0).sum(1).float().mean()
    assert x.shape == (2, round(float(mean))) and (x != 0).all()
    model = workload.build_model(data.meta)
    per_sample = count_flops_per_sample(model, x, y, workload)
    per_token = 3 * 2 * 2 * 4 * 128 * (128 + 128)
    assert per_sample == pytest.approx(per_token * x.shape[1], rel=0.01)


# --- bucketing -----------------------------------------------------------------------------


def _lengths(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g) * 0.6).exp().mul(50).round().clamp(1, 200).long()


def padding_fraction(lengths: np.ndarray, batch_size: int, order: np.ndarray) -> float:
    """Share of the positions in batches (each trimmed to its longest text) that are padding,
    for the batches cut in `order` (full batches only, as the trainer drops the last)."""
    num = (len(order) // batch_size) * batch_size
    batches = lengths[order[:num]].reshape(-1, batch_size)
    cells = batches.max(axis=1).sum() * batch_size
    return float(1.0 - batches.sum() / cells) if cells else 0.0


def test_padding_fraction() -> None:
    lengths = np.array([1, 3, 2, 2])
    assert padding_fraction(lengths, 2, np.array([0, 1, 2, 3])) == pytest.approx(1 - 8 / 10)
    assert padding_fraction(lengths, 2, np.array([0, 2, 1, 3])) == pytest.approx(1 - 8 / 10)
    assert padding_fraction(lengths, 2, np.array([2, 3, 0, 1])) == pytest.approx(1 - 8 / 10)
    assert padding_fraction(lengths, 2, np.array([0, 1])) == pytest.approx(2 / 6)


def test_bucket_order_is_a_permutation_with_less_padding() -> None:
    lengths = _lengths(5000)
    order = torch.randperm(5000, generator=torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(4)
    bucketed = bucket_order(order, lengths[order], 64, g)
    assert sorted(bucketed.tolist()) == sorted(order.tolist())
    full = 5000 // 64 * 64
    # the last partial batch stays last, so the trainer drops the same number of samples
    assert set(bucketed[full:].tolist()) == set(order[full:].tolist())
    lens = lengths.numpy()
    random_pad = padding_fraction(lens, 64, order.numpy())
    bucket_pad = padding_fraction(lens, 64, bucketed.numpy())
    assert bucket_pad < 0.05 < 0.3 < random_pad
    again = bucket_order(order, lengths[order], 64, torch.Generator().manual_seed(4))
    assert torch.equal(bucketed, again)


def test_ranks_get_batches_of_similar_length_at_each_step() -> None:
    # Two ranks' shards of one permutation, bucketed with the same generator seed: batch k
    # of both comes from the same pool position, so their lengths are close.
    lengths = _lengths(8192)
    order = torch.randperm(8192, generator=torch.Generator().manual_seed(5))
    shards = [order[r::2] for r in range(2)]
    per_rank = [
        bucket_order(s, lengths[s], 32, torch.Generator().manual_seed(9)).view(-1, 32)
        for s in shards
    ]
    longest = [lengths[b].max(dim=1).values.float() for b in per_rank]
    gap = (longest[0] - longest[1]).abs().mean() / longest[0].mean()
    assert gap < 0.1


def test_bucketing_can_be_switched_off() -> None:
    workload = get_workload("tweets-text")
    data = workload.make_synthetic(
        DataRequest(seed=0, max_train=512, max_test=8, options={"bucketing": "false"})
    )
    order = torch.randperm(512)
    assert torch.equal(workload.batch_order(order, data, 32, torch.Generator()), order)


# --- the trainer hooks ---------------------------------------------------------------------


class _Recorder(torch.nn.Module):
    """Remembers the first column of every training batch (the sample ids)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(1, 2)
        self.seen: list[list[int]] = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.seen.append(x[:, 0].long().tolist())
        return self.fc(x[:, :1].float())


def test_trainer_uses_batch_order_and_flops_batch() -> None:
    n = 64
    data = TensorData(
        train_x=torch.arange(n).float()[:, None].repeat(1, 3),
        train_y=torch.zeros(n, dtype=torch.long),
        test_x=torch.zeros(4, 3),
        test_y=torch.zeros(4, dtype=torch.long),
        kind="synthetic",
        source="tests",
    )
    calls = []
    model = _Recorder()

    def reverse(order, data_, batch_size, generator):
        calls.append((order.clone(), batch_size, generator.initial_seed()))
        return order.flip(0)

    def flops_batch(data_):
        calls.append("flops")
        return data_.train_x[:4], data_.train_y[:4]

    workload = Workload(
        name="mnist-cnn",
        description="hooks",
        models={PYTORCH: lambda meta: model},
        locate_real=lambda request: None,
        load_real=lambda request: data,
        make_synthetic=lambda request: data,
        target_accuracy=0.5,
        recipe=Recipe(optimizer="sgd", lr=0.01, batch_size=8, epochs=2.0, schedule="constant"),
        batch_order=reverse,
        flops_batch=flops_batch,
    )
    config = tiny_config(global_batch_size=8, epochs=2.0)
    env = DistEnv(rank=0, local_rank=0, world_size=1)
    outcome = train(config, workload, data, make_strategy(config, env))
    assert calls[0] == "flops" and len(calls) == 3  # flops once, then one call per epoch
    assert model.seen[0] == [0, 1, 2, 3]  # the FLOPs were counted on flops_batch's samples
    steps = model.seen[1:]
    for epoch, (order, batch_size, seed) in enumerate(calls[1:]):
        assert batch_size == 8 and seed == config.optimisation.seed * 1_000_003 + epoch
        expected = order.flip(0).view(-1, 8).tolist()
        assert steps[epoch * 8 : (epoch + 1) * 8] == expected
    assert outcome.summary["flops_per_sample"] is not None


def test_workloads_without_hooks_are_unchanged() -> None:
    workload = get_workload("mnist-cnn")
    assert workload.batch_order is None and workload.flops_batch is None


# --- precision of the recurrent layer ------------------------------------------------------


def test_rnn_compute_dtype() -> None:
    # CUDA's autocast would run cuDNN RNNs in fp16 under bf16 with no scaler: fp32 there.
    assert rnn_compute_dtype("cuda", torch.bfloat16) == torch.float32
    assert rnn_compute_dtype("cuda", torch.float16) == torch.float16
    assert rnn_compute_dtype("cpu", torch.bfloat16) == torch.bfloat16
    assert rnn_compute_dtype("cpu", None) == torch.float32
    assert rnn_compute_dtype("cuda", None) == torch.float32


def test_rnn_leaves_autocast_for_fp32_when_the_rule_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Pretend the CPU were CUDA: under a bf16 autocast the RNN then sees fp32 inputs with
    # autocast off, and its output is fp32.
    monkeypatch.setattr(text_rnn, "rnn_compute_dtype", lambda device_type, dtype: torch.float32)
    seen: list[tuple[torch.dtype, bool]] = []
    model = _models()["lstm"].eval()

    def record(module, args) -> None:
        seen.append((args[0].data.dtype, torch.is_autocast_enabled("cpu")))

    model.rnn.register_forward_pre_hook(record)
    x = torch.tensor([[5, 6, 7, 0], [4, 3, 0, 0]])
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(x)
    assert seen == [(torch.float32, False)]


def test_rnn_keeps_cpu_bf16_autocast() -> None:
    seen: list[bool] = []
    model = _models()["lstm"].eval()
    model.rnn.register_forward_pre_hook(lambda m, a: seen.append(torch.is_autocast_enabled("cpu")))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(torch.tensor([[5, 6, 7, 0]]))
    assert seen == [True]


# --- bounded shapes on the CPU's oneDNN path -----------------------------------------------


def _token_totals(model: TextRNN, batches: list[torch.Tensor], dtype: torch.dtype | None) -> list:
    """The row count of the packed input the recurrent layer got, batch by batch."""
    totals: list[int] = []
    handle = model.rnn.register_forward_pre_hook(lambda m, a: totals.append(a[0].data.shape[0]))
    with torch.no_grad(), torch.autocast("cpu", dtype=dtype or torch.float32, enabled=bool(dtype)):
        for x in batches:
            model(x)
    handle.remove()
    return totals


def _mixed_batches(count: int, texts: int, low: int, high: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(count):
        lengths = torch.randint(low, high + 1, (texts,), generator=g)
        x = torch.randint(2, VOCAB, (texts, high), generator=g)
        batches.append(x.masked_fill(torch.arange(high)[None, :] >= lengths[:, None], 0))
    return batches


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_cpu_bf16_token_totals_take_few_values(cell: str) -> None:
    # oneDNN builds and keeps a kernel per shape: a new token total every batch made a run's
    # memory grow without bound. Totals of 80-240 tokens must all become one shape.
    model = _models()[cell].eval()
    batches = _mixed_batches(20, texts=4, low=20, high=60)
    totals = _token_totals(model, batches, torch.bfloat16)
    assert len(set(totals)) == 1
    assert totals[0] % text_rnn.TOKEN_GRANULE == 0


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_fp32_and_equal_lengths_get_no_fillers(cell: str) -> None:
    # fp32 products go to the BLAS (no per-shape cache), and the FLOP count sees real tokens
    # only; a batch of equal lengths keeps one shape per length (and the LSTM's fused kernel).
    model = _models()[cell].eval()
    batches = _mixed_batches(3, texts=4, low=20, high=60)
    assert _token_totals(model, batches, None) == [int((x != 0).sum()) for x in batches]
    equal = torch.full((4, 30), 5)
    assert _token_totals(model, [equal], torch.bfloat16) == [120]


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_fillers_leave_the_real_texts_outputs_and_gradients_unchanged(
    cell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same batch with and without filler texts (a granule of 1 adds none), in train mode
    # under the CPU's bf16 autocast: equal logits and equal parameter gradients.
    torch.manual_seed(0)
    model = TextRNN(VOCAB, 3, cell=cell, embed_dim=8, hidden_size=6, dropout=0.0).train()
    (x,) = _mixed_batches(1, texts=5, low=3, high=40)
    assert _token_totals(model, [x], torch.bfloat16)[0] > int((x != 0).sum())  # fillers added
    results = []
    for granule in (text_rnn.TOKEN_GRANULE, 1):
        monkeypatch.setattr(text_rnn, "TOKEN_GRANULE", granule)
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(x)
        logits.float().sum().backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append((logits.detach(), grads))
    (with_fillers, grads_with), (without, grads_without) = results
    torch.testing.assert_close(with_fillers, without, rtol=0, atol=0)
    assert grads_with.keys() == grads_without.keys()
    for name in grads_with:
        torch.testing.assert_close(grads_with[name], grads_without[name], rtol=0, atol=0)


def test_filler_lengths() -> None:
    lengths = torch.tensor([5, 3, 2])  # 10 tokens
    assert filler_lengths(lengths, width=5, granule=16).tolist() == [5, 1]
    assert filler_lengths(lengths, width=5, granule=10).tolist() == []
    assert filler_lengths(torch.tensor([4, 4]), width=4, granule=16).tolist() == []
    assert sum(filler_lengths(lengths, width=5, granule=256).tolist()) == 246
