"""A Lightning Fabric training script, which trainscale measures unchanged but for its meter
lines (docs/own-scripts.md): Fabric sets up the model, the optimizer and the data loaders
(DDP over gloo and a DistributedSampler when launched as several processes), the loop
stays the script's own.

    pip install lightning-fabric          # or: pip install "trainscale[examples]"
    python examples/fabric_script.py --max-steps 20                       # plain: no-op meter
    torchrun --nproc-per-node 2 examples/fabric_script.py --max-steps 20  # DDP over gloo
    trainscale run examples/fabric_script.py --data synthetic --workers 2 -- --max-steps 20

Fabric needs no launcher of its own here: it finds torchrun's environment (RANK,
LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and the launcher's
TORCHELASTIC_RUN_ID), which `trainscale run` gives its workers too, and joins it.

It learns a synthetic task with something to learn: random vectors labelled by a fixed
random linear "teacher", so that its held-out accuracy rises well above chance. The data is
synthetic: tell trainscale with `--data synthetic`.
"""

import argparse
import os

import torch
import torch.nn.functional as F
from lightning_fabric import Fabric
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainscale


def teacher_task(num: int, features: int, classes: int, seed: int) -> TensorDataset:
    """Gaussian inputs labelled by the argmax of a fixed random linear map (the same map
    for every seed, so that training and held-out sets are one task)."""
    teacher = torch.randn(features, classes, generator=torch.Generator().manual_seed(0))
    x = torch.randn(num, features, generator=torch.Generator().manual_seed(seed))
    return TensorDataset(x, (x @ teacher).argmax(dim=1))


def main() -> None:
    parser = argparse.ArgumentParser(description="an MLP classifier with Lightning Fabric")
    parser.add_argument("--batch-size", type=int, default=64, help="per process")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--features", type=int, default=32)
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--train-samples", type=int, default=4096)
    parser.add_argument("--test-samples", type=int, default=1024)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after N steps (0: no limit)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    # Under torchrun, Fabric checks devices x nodes against the launcher's WORLD_SIZE.
    devices = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    nodes = int(os.environ.get("WORLD_SIZE", "1")) // devices
    fabric = Fabric(accelerator="cpu", devices=devices, num_nodes=nodes)
    fabric.launch()  # launched already: Fabric only joins the processes it finds
    fabric.seed_everything(args.seed)

    model = nn.Sequential(
        nn.Linear(args.features, args.hidden),
        nn.ReLU(),
        nn.Linear(args.hidden, args.classes),
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    model, optimizer = fabric.setup(model, optimizer)
    train_set = teacher_task(args.train_samples, args.features, args.classes, args.seed)
    test_set = teacher_task(args.test_samples, args.features, args.classes, args.seed + 1)
    train_loader, test_loader = fabric.setup_dataloaders(
        DataLoader(train_set, batch_size=args.batch_size, shuffle=True),
        DataLoader(test_set, batch_size=256),
    )

    meter = trainscale.meter()
    steps = 0
    for epoch in range(args.epochs):
        model.train()
        for x, y in train_loader:
            with meter.step(samples=len(x)):
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x), y)
                fabric.backward(loss)
                optimizer.step()
            steps += 1
            if steps == args.max_steps:
                break
        model.eval()
        counts = torch.zeros(2, dtype=torch.long)  # right answers, samples
        with torch.no_grad():
            for x, y in test_loader:  # each process its shard of the test set
                counts += torch.stack([(model(x).argmax(dim=1) == y).sum(), torch.tensor(len(y))])
        right, seen = torch.as_tensor(fabric.all_reduce(counts, reduce_op="sum")).tolist()
        accuracy = right / seen
        meter.evaluate(accuracy=accuracy)
        fabric.print(f"epoch {epoch + 1}: {steps} steps, test accuracy {accuracy:.3f}")
        if steps == args.max_steps:
            break


if __name__ == "__main__":
    main()
