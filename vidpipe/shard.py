"""Split the cameras of one config across several processes: rendezvous hashing.

Shard ``i`` of ``n`` runs the cameras whose name scores highest for ``i`` among ``0..n-1``
(highest random weight, Thaler and Ravishankar 1998). Every camera lands in exactly one shard,
the assignment depends only on the camera name and ``n`` (not on the order or the other
cameras), and going from ``n`` to ``n + 1`` shards moves only the cameras that the new shard
wins: about ``1 / (n + 1)`` of them, each to the new shard.

The hash is BLAKE2b, not Python's ``hash()``, which is salted per process.

Rendezvous hashing is even only on average: 120 cameras in 3 shards came out 48, 36 and 36.
Where every process holds a hard number of cameras (one GIL drives at most about 40 NVDEC
cameras on the H200), the largest shard sets the count. ``sharding.assignment: balanced``
bounds the load instead (consistent hashing with bounded loads, Mirrokni, Thorup and
Zadimoghaddam 2018): the cameras, in name order, each take the highest-scoring shard that still
has room (each shard holds ``cameras // n``, and ``cameras % n`` of them one more). Shards then
differ by at most one camera, at the price of the name-only property: the assignment depends on
the whole list of enabled cameras, so adding one may move a few others. Every process reads the
same config, so they agree.

Where the shard comes from, first match wins:

1. ``vidpipe run --shard i/n``;
2. ``$VIDPIPE_SHARD=i/n``;
3. ``$VIDPIPE_SHARD_COUNT=n`` with the index from ``$VIDPIPE_SHARD_INDEX`` or else from the
   trailing ``-<ordinal>`` of ``$HOSTNAME`` (a Kubernetes StatefulSet pod is ``name-<ordinal>``).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from vidpipe.config import ConfigError


def _score(shard: int, camera: str) -> int:
    digest = hashlib.blake2b(f"{shard}\0{camera}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def owner(camera: str, count: int) -> int:
    """The shard (``0..count-1``) that runs ``camera``."""
    if count < 1:
        raise ValueError(f"shard count must be at least 1, got {count}")
    return max(range(count), key=lambda i: _score(i, camera))


def balanced_owners(cameras: Iterable[str], count: int) -> dict[str, int]:
    """Each camera's shard (``0..count-1``), no shard more than one camera above another."""
    if count < 1:
        raise ValueError(f"shard count must be at least 1, got {count}")
    names = sorted(set(cameras))  # the order in the YAML must not matter
    # Every shard holds `base` cameras and `extra` of them one more: a cap of ceil(N / n)
    # alone could leave 7 cameras in 3 shards as 3, 3 and 1.
    base, extra = divmod(len(names), count)
    load = [0] * count
    owners: dict[str, int] = {}
    for name in names:
        ranked = sorted(range(count), key=lambda i: _score(i, name), reverse=True)
        shard = next(i for i in ranked if load[i] < base or (load[i] == base and extra > 0))
        if load[shard] == base:
            extra -= 1
        load[shard] += 1
        owners[name] = shard
    return owners


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard ``index`` of ``count`` (``0 <= index < count``)."""

    index: int
    count: int

    def __post_init__(self) -> None:
        if self.count < 1 or not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= index < count")

    def owns(self, camera: str) -> bool:
        """True if this shard runs ``camera``."""
        return self.count == 1 or owner(camera, self.count) == self.index

    def select(self, cameras: Sequence[str], balanced: bool = False) -> list[str]:
        """The names this shard runs, in their original order. ``balanced``: by
        ``balanced_owners`` over all of ``cameras`` (pass every enabled camera)."""
        if not balanced or self.count == 1:
            return [c for c in cameras if self.owns(c)]
        owners = balanced_owners(cameras, self.count)
        return [c for c in cameras if owners[c] == self.index]

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def parse_shard(text: str, where: str = "--shard") -> Shard:
    """``"i/n"`` -> Shard; ConfigError naming ``where`` if malformed or out of range."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise ConfigError([f"{where}: expected INDEX/COUNT such as 0/4, got {text!r}"])
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1 or index >= count:
        raise ConfigError(
            [f"{where}: shard {index}/{count} out of range (need 0 <= INDEX < COUNT)"]
        )
    return Shard(index, count)


def resolve_shard(arg: str | None, env: Mapping[str, str] | None = None) -> Shard | None:
    """The shard from the command line or the environment (see the module doc); None: all."""
    env = os.environ if env is None else env
    if arg:
        return parse_shard(arg)
    if env.get("VIDPIPE_SHARD"):
        return parse_shard(env["VIDPIPE_SHARD"], "$VIDPIPE_SHARD")
    count_text = env.get("VIDPIPE_SHARD_COUNT")
    if not count_text:
        return None
    if env.get("VIDPIPE_SHARD_INDEX"):
        index_text, where = env["VIDPIPE_SHARD_INDEX"], "$VIDPIPE_SHARD_INDEX"
    else:
        m = re.search(r"-(\d+)$", env.get("HOSTNAME", ""))
        if not m:
            raise ConfigError(
                [
                    "$VIDPIPE_SHARD_COUNT is set but the shard index is not: set "
                    "$VIDPIPE_SHARD_INDEX, or run as a StatefulSet pod whose $HOSTNAME ends in "
                    f"-<ordinal> (got {env.get('HOSTNAME', '')!r})"
                ]
            )
        index_text, where = m.group(1), "$HOSTNAME ordinal"
    return parse_shard(f"{index_text}/{count_text}", f"{where} with $VIDPIPE_SHARD_COUNT")
