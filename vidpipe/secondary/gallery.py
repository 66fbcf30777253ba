"""Re-identification across cameras: which tracks are one person, by their mean embeddings.

The gallery holds one entry per track that has been placed (``place``): its camera, its
normalised mean embedding, when it was first seen, when it ended (None while alive) and its
``global_id``. Placing a track compares it with the entries of the *other* cameras that the
rules allow, and gives it the best one's global id when that one is similar enough; else the
track keeps the id it has, or gets a fresh one. The rules:

* same camera: only a track that ended within ``reassociate_s`` of the track's first crop
  (an occlusion broke the person's track in two: the tracker matches by boxes alone);
* time: the candidate is alive, or ended at most ``window_s`` ago; with ``links`` it must
  have ended on a camera linked to the track's, between ``min_s`` and ``max_s`` before the
  track was first seen there (it walked from one to the other);
* similarity: cosine at least ``threshold``;
* one-to-one: a global id is never held by two live tracks of one camera, and the candidate
  must prefer the track too: no other track of the track's camera is more like it (the
  mutual best match). Where two people look alike this leaves both apart rather than merge
  them.

A track placed early (stable, while alive) and placed again when it ends may still join an
earlier person then, as long as nobody took its own fresh id meanwhile. Ended entries older
than the window are forgotten. Times are ``time.time()`` seconds; everything runs on the
caller's thread (the secondary stage holds a lock around it).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vidpipe.config.models import ReidLink

#: Most entries kept, ended ones first to go: a bound on memory when the window is long and
#: the cameras busy (each entry is about 1 KiB).
MAX_ENTRIES = 20000

Key = tuple[str, int]


@dataclass(slots=True)
class Entry:
    """One placed track."""

    camera: str
    track_id: int
    embedding: npt.NDArray[np.float32]
    first_seen: float
    global_id: int
    ended_at: float | None = None


@dataclass(frozen=True, slots=True)
class Match:
    """A placed track took an earlier track's global id."""

    global_id: int
    camera: str
    track_id: int
    similarity: float


class Gallery:
    """Tracks of every camera by embedding, for one embedder model.

    Args:
        threshold: least cosine similarity of two mean embeddings to call them one person.
        window_s: how long an ended track may be matched.
        links: the camera graph (empty: any camera may match any other).
        reassociate_s: how close a track's start must be to the end of another track of its
            own camera to be that person again (0: never on the same camera).
        enabled: False: no matching at all, every track keeps a fresh id of its own.
        ids: where fresh global ids come from (share one between galleries to keep ids
            unique across models).
    """

    def __init__(
        self,
        threshold: float,
        window_s: float,
        links: Sequence[ReidLink] = (),
        *,
        reassociate_s: float = 0.0,
        enabled: bool = True,
        ids: Iterator[int] | None = None,
    ) -> None:
        self.threshold = threshold
        self.window_s = window_s
        self.reassociate_s = reassociate_s
        self.links = tuple(links)
        self.enabled = enabled
        self._ids = ids if ids is not None else itertools.count(1)
        self._entries: dict[Key, Entry] = {}
        self._holders: dict[int, int] = {}  # global id -> entries holding it

    def __len__(self) -> int:
        return len(self._entries)

    def global_id(self, camera: str, track_id: int) -> int | None:
        entry = self._entries.get((camera, track_id))
        return None if entry is None else entry.global_id

    def place(
        self,
        camera: str,
        track_id: int,
        embedding: npt.NDArray[np.float32],
        first_seen: float,
        now: float,
    ) -> Match | None:
        """Add or update a track's entry and try to match it (see the module docstring).

        Returns:
            The match, when the track took an earlier track's global id just now.
        """
        self.prune(now)
        key = (camera, track_id)
        entry = self._entries.get(key)
        if entry is None:
            entry = Entry(camera, track_id, embedding, first_seen, self._fresh())
            self._entries[key] = entry
        else:
            entry.embedding = embedding
        if not self.enabled or self._holders[entry.global_id] > 1:
            return None  # its id is shared already: changing it would split a person
        match = self._best(entry, now)
        if match is not None:
            self._release(entry.global_id)
            entry.global_id = match.global_id
            self._holders[match.global_id] += 1
        return match

    def end(self, camera: str, track_id: int, now: float) -> None:
        """The track ended (it stays matchable for ``window_s``)."""
        entry = self._entries.get((camera, track_id))
        if entry is not None and entry.ended_at is None:
            entry.ended_at = now

    def prune(self, now: float) -> None:
        """Forget ended tracks older than the window, and the oldest ended ones above
        ``MAX_ENTRIES``."""
        old = [
            k
            for k, e in self._entries.items()
            if e.ended_at is not None and now - e.ended_at > self.window_s
        ]
        excess = len(self._entries) - len(old) - MAX_ENTRIES
        if excess > 0:
            ended = sorted(
                (e.ended_at, k)
                for k, e in self._entries.items()
                if e.ended_at is not None and now - e.ended_at <= self.window_s
            )
            old += [k for _, k in ended[:excess]]
        for key in old:
            self._release(self._entries.pop(key).global_id)

    # ------------------------------------------------------------------ matching

    def _fresh(self) -> int:
        gid = next(self._ids)
        self._holders[gid] = 1
        return gid

    def _release(self, gid: int) -> None:
        left = self._holders[gid] - 1
        if left:
            self._holders[gid] = left
        else:
            del self._holders[gid]

    def _best(self, entry: Entry, now: float) -> Match | None:
        """The most similar candidate that every rule allows, or None."""
        scored = [
            (float(entry.embedding @ c.embedding), c)
            for c in self._entries.values()
            if c.global_id != entry.global_id and self._in_reach(entry, c, now)
        ]
        scored.sort(key=lambda sc: -sc[0])
        for similarity, cand in scored:
            if similarity < self.threshold:
                return None
            if self._held_on_camera(cand.global_id, entry):
                continue
            if self._prefers_another(cand, entry, similarity, now):
                continue
            return Match(cand.global_id, cand.camera, cand.track_id, similarity)
        return None

    def _in_reach(self, track: Entry, cand: Entry, now: float) -> bool:
        """Whether the time and camera rules let ``track`` be ``cand``'s person."""
        if cand.camera == track.camera:
            # the same person after an occlusion: the tracker ended the track (some frames
            # after the person was last seen) near when the new one began
            return (
                cand.ended_at is not None
                and abs(track.first_seen - cand.ended_at) <= self.reassociate_s
            )
        if cand.ended_at is not None and now - cand.ended_at > self.window_s:
            return False
        if not self.links:
            return True
        if cand.ended_at is None:
            return False  # along a link the person has left the first camera
        gap = track.first_seen - cand.ended_at
        return any(
            (link.from_, link.to) == (cand.camera, track.camera) and link.min_s <= gap <= link.max_s
            for link in self.links
        )

    def _held_on_camera(self, gid: int, track: Entry) -> bool:
        """Whether another live track of ``track``'s camera holds ``gid``."""
        return any(
            e.global_id == gid and e.ended_at is None and e is not track
            for e in self._entries.values()
            if e.camera == track.camera
        )

    def _prefers_another(self, cand: Entry, track: Entry, similarity: float, now: float) -> bool:
        """Whether another track of ``track``'s camera that the rules let be ``cand``'s
        person (whether or not it took ``cand``'s id) is more like ``cand`` than ``track`` is:
        then ``track`` is not ``cand``'s mutual best match."""
        return any(
            float(other.embedding @ cand.embedding) > similarity
            for other in self._entries.values()
            if other.camera == track.camera
            and other is not track
            and self._in_reach(other, cand, now)
        )
