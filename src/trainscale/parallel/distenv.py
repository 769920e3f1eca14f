"""Where this process sits in a (possibly distributed) job, read once from the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class DistEnv:
    """Rank facts set by torchrun / the elastic launcher (or srun); passed around explicitly."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> DistEnv:
        """Read torchrun's variables; a plain process is rank 0 of 1."""
        env = os.environ if environ is None else environ
        if "RANK" not in env or "WORLD_SIZE" not in env:
            return cls()
        world_size = int(env["WORLD_SIZE"])
        return cls(
            rank=int(env["RANK"]),
            local_rank=int(env.get("LOCAL_RANK", env["RANK"])),
            world_size=world_size,
            local_world_size=int(env.get("LOCAL_WORLD_SIZE", world_size)),
        )


def launched_externally(environ: Mapping[str, str] | None = None) -> bool:
    """True when this process was started by torchrun (or another launcher) as one worker."""
    env = os.environ if environ is None else environ
    return "TORCHELASTIC_RUN_ID" in env or ("RANK" in env and "WORLD_SIZE" in env)
