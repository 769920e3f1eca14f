"""An ordinary PyTorch training script (after pytorch/examples' MNIST CNN) that trainscale
can measure unchanged but for two lines: `meter = trainscale.meter(model=model)` and
`with meter.step(samples=len(x)):` around each step (docs/own-scripts.md).

    python examples/mnist_script.py --epochs 1                      # plain: the meter is a no-op
    torchrun --nproc-per-node 2 examples/mnist_script.py --epochs 1  # DDP (gloo; NCCL on GPUs)
    trainscale run examples/mnist_script.py --data synthetic --workers 2 -- --max-steps 20

By default it trains on synthetic tensors (a TensorDataset of random images with random
labels: throughput only, no accuracy to claim: tell trainscale with `--data synthetic`),
so it runs anywhere without a download. It trains on the GPU when torch sees one (as
pytorch/examples does), else on the CPU.
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

import trainscale


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.dropout2(F.relu(self.fc1(x)))
        return F.log_softmax(self.fc2(x), dim=1)


def synthetic(num: int, seed: int) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(num, 1, 28, 28, generator=generator)
    return TensorDataset(images, torch.randint(0, 10, (num,), generator=generator))


def evaluate(model: nn.Module, loader: DataLoader, device: torch.device) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            correct += int((model(x).argmax(dim=1) == y).sum())
            total += len(y)
    model.train()
    return correct / max(total, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description="MNIST CNN (synthetic tensors by default)")
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--train-samples", type=int, default=2048)
    parser.add_argument("--test-samples", type=int, default=512)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: no limit)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    use_cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:  # under torchrun (or trainscale) with several processes
        dist.init_process_group("nccl" if use_cuda else "gloo")
    model: nn.Module = Net().to(device)
    if distributed:
        model = nn.parallel.DistributedDataParallel(
            model, device_ids=[local_rank] if use_cuda else None
        )
    train_set = synthetic(args.train_samples, args.seed)
    sampler = DistributedSampler(train_set) if distributed else None
    train_loader = DataLoader(
        train_set, batch_size=args.batch_size, shuffle=sampler is None, sampler=sampler
    )
    test_loader = DataLoader(synthetic(args.test_samples, args.seed + 1), batch_size=256)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)

    meter = trainscale.meter(model=model)
    steps = 0
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in train_loader:
            with meter.step(samples=len(x)):
                x, y = x.to(device), y.to(device)
                optimizer.zero_grad()
                loss = F.nll_loss(model(x), y)
                loss.backward()
                optimizer.step()
            steps += 1
            if steps == args.max_steps:
                break
        meter.evaluate(accuracy=evaluate(model, test_loader, device))
        scheduler.step()
        if steps == args.max_steps:
            break
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
