"""A training script whose `DataLoader` augments every sample on the CPU, as torchvision
transforms do: it shows what an input-bound script looks like under trainscale, and what
`num_workers` does about it (docs/own-scripts.md).

    python examples/augmenting_script.py --max-steps 50   # plain python: the meter is a no-op
    trainscale run examples/augmenting_script.py --data synthetic -- --max-steps 100
    trainscale run examples/augmenting_script.py --data synthetic --threads-per-worker 1 \
        --affinity 0,1 -- --max-steps 100 --num-workers 1

The images are synthetic (random pixels, random labels: throughput only, so tell trainscale
`--data synthetic`). Each sample is augmented in `__getitem__`: a random crop of a padded
image, a horizontal flip, a small random rotation, brightness and contrast jitter and
Gaussian noise. A batch of that costs most of what a training step of the small CNN costs, so
with `--num-workers 0` (the augmentation in the training process, between steps) the model
stands idle for its data for a large share of each step. With `--num-workers 1` a loader
process augments the next batches while the model trains on this one; it needs a core of its
own (the third command: one training thread, pinned to a set of two cores).
"""

import argparse
import math
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torch.utils.data.distributed import DistributedSampler

import trainscale

PAD = 4
"""Pixels of padding around each stored image, so a random crop can shift it."""


class AugmentedImages(Dataset[tuple[torch.Tensor, int]]):
    """Synthetic 3-channel images kept as uint8, made into float and augmented per sample."""

    def __init__(self, num: int, size: int, seed: int, augment: bool) -> None:
        generator = torch.Generator().manual_seed(seed)
        side = size + 2 * PAD
        self.images = torch.randint(
            0, 256, (num, 3, side, side), dtype=torch.uint8, generator=generator
        )
        self.labels = torch.randint(0, 10, (num,), generator=generator).tolist()
        self.size = size
        self.augment = augment

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = self.images[index].float().div_(255)
        if not self.augment:  # evaluation: the centre crop, nothing random
            image = image[:, PAD : PAD + self.size, PAD : PAD + self.size]
        else:
            image = self._augmented(image)
        return (image - 0.5) / 0.25, self.labels[index]

    def _augmented(self, image: torch.Tensor) -> torch.Tensor:
        size = self.size
        top, left = torch.randint(0, 2 * PAD + 1, (2,)).tolist()
        image = image[:, top : top + size, left : left + size]
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
        angle = (torch.rand(()) * 2 - 1) * math.radians(15)
        cos, sin, zero = torch.cos(angle), torch.sin(angle), torch.zeros(())
        theta = torch.stack([torch.stack([cos, -sin, zero]), torch.stack([sin, cos, zero])])
        grid = F.affine_grid(theta.unsqueeze(0), [1, 3, size, size], align_corners=False)
        image = F.grid_sample(image.unsqueeze(0), grid, align_corners=False).squeeze(0)
        mean = image.mean()
        contrast, brightness = 0.8 + 0.4 * torch.rand(()), 0.2 * (torch.rand(()) - 0.5)
        image = (image - mean) * contrast + mean + brightness
        return image + 0.05 * torch.randn_like(image)


class SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 8 * 8, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def evaluate(model: nn.Module, loader: DataLoader) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for x, y in loader:
            correct += int((model(x).argmax(dim=1) == y).sum())
            total += len(y)
    model.train()
    return correct / max(total, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description="Small CNN on per-sample augmented images")
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader processes")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--image-size", type=int, default=32)
    parser.add_argument("--train-samples", type=int, default=4096)
    parser.add_argument("--test-samples", type=int, default=512)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: no limit)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if distributed:  # under torchrun (or trainscale) with several processes
        dist.init_process_group("gloo")
    model: nn.Module = SmallCnn()
    if distributed:
        model = nn.parallel.DistributedDataParallel(model)
    train_set = AugmentedImages(args.train_samples, args.image_size, args.seed, augment=True)
    sampler: DistributedSampler[tuple[torch.Tensor, int]] | None = None
    if distributed:  # each process its own shard, as under torchrun
        sampler = DistributedSampler(train_set)
    train_loader = DataLoader(
        train_set,
        batch_size=args.batch_size,
        shuffle=sampler is None,
        sampler=sampler,
        num_workers=args.num_workers,
        # Loader processes kept across epochs: no new start-up wait at each epoch's first step.
        persistent_workers=args.num_workers > 0,
    )
    test_set = AugmentedImages(args.test_samples, args.image_size, args.seed + 1, augment=False)
    test_loader = DataLoader(test_set, batch_size=256)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    meter = trainscale.meter()
    steps = 0
    for epoch in range(args.epochs):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in train_loader:
            with meter.step(samples=len(x)):
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                optimizer.step()
            steps += 1
            if steps == args.max_steps:
                break
        meter.evaluate(accuracy=evaluate(model, test_loader))
        if steps == args.max_steps:
            break
    if distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
