"""Worker entry for the TensorFlow loopback tests (a module, so spawned workers can import
it): sets up MultiWorkerMirroredStrategy, sums a value over the workers and reports the TCP
sockets the worker listens on. Run as a script, it launches two such workers and writes
their results as JSON to the file named by its argument."""

from __future__ import annotations

import json
import sys
from typing import Any


def listen_and_sum(config_dict: dict) -> dict[str, Any]:
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import numpy as np
    import psutil

    from trainscale.config.options import RunConfig
    from trainscale.frameworks.tensorflow.distribute import setup_distribution, sum_over_workers
    from trainscale.parallel.distenv import DistEnv
    from trainscale.parallel.strategy import make_strategy

    config = RunConfig.from_flat(config_dict)
    strategy = make_strategy(config, DistEnv.from_environ())
    strategy.setup()
    try:
        summed = sum_over_workers(setup_distribution(config, strategy))
        rank = strategy.env.rank
        total = np.asarray(summed(np.array([rank + 1.0], dtype=np.float32))).tolist()
        tf_config = json.loads(os.environ["TF_CONFIG"])
        own = tf_config["cluster"]["worker"][tf_config["task"]["index"]]
        listening = [
            [c.laddr.ip, c.laddr.port]
            for c in psutil.Process().net_connections("inet")
            if c.status == psutil.CONN_LISTEN
        ]
        return {
            "sum": total,
            "tf_port": int(own.rsplit(":", 1)[1]),
            "listening": listening,
            "no_proxy": os.environ.get("no_proxy"),
        }
    finally:
        strategy.teardown()


def main(out: str) -> None:
    from trainscale.parallel.launcher import launch_workers

    from tests.helpers.tf_tiny import tf_config

    config = tf_config(global_batch_size=16, steps=1, workers=2, timeout_s=60).flat()
    results = launch_workers(listen_and_sum, (config,), 2)
    with open(out, "w") as file:
        json.dump({str(rank): result for rank, result in results.items()}, file)


if __name__ == "__main__":
    main(sys.argv[1])
