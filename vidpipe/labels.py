"""The model's class names: one table, one way to name a class id, one way to resolve filters."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from pathlib import Path

from vidpipe.config.base import ConfigError


class Labels(tuple[str, ...]):
    """Class names indexed by class id; immutable (a tuple of the names).

    A class id without a name (a model with more classes than the labels file has lines) is
    named by its number, everywhere: JSON records, metrics, drawn captions.
    """

    __slots__ = ()

    @classmethod
    def load(cls, path: Path) -> Labels:
        """Names from a file, one a line; blank lines are skipped.

        Raises:
            OSError, UnicodeDecodeError: the file cannot be read as UTF-8 text.
        """
        lines = path.read_text(encoding="utf-8").splitlines()
        return cls(line.strip() for line in lines if line.strip())

    @classmethod
    def numbered(cls, num_classes: int) -> Labels:
        """``"0"``, ``"1"``, ... for a model without a labels file."""
        return cls(str(i) for i in range(num_classes))

    @classmethod
    def of(cls, names: Iterable[str]) -> Labels:
        """``names`` as ``Labels`` (itself when it already is one)."""
        return names if isinstance(names, Labels) else cls(names)

    def name(self, class_id: int) -> str:
        """The name of ``class_id``, or the id as text when the table has no such entry."""
        return self[class_id] if 0 <= class_id < len(self) else str(class_id)

    def ids(
        self, items: Sequence[str | int] | None, *, where: str, camera: str | None = None
    ) -> frozenset[int] | None:
        """Resolve a class filter (names or ids) to class ids.

        Args:
            items: the filter as written in the YAML; None means every class.
            where: the filter's YAML path, e.g. ``cameras[0].zones[1].classes``.
            camera: the camera's name, for the message (None for a filter of no one camera,
                such as a sink's).

        Returns:
            The ids, or None when ``items`` is None.

        Raises:
            ConfigError: one problem per bad entry, each naming ``where[k]`` and the camera:
                ``cameras[0].classes[1] (driveway): unknown class 'persn' (did you mean
                'person'?)`` or ``... class id 95 out of range 0..79``.
        """
        if items is None:
            return None
        ids: set[int] = set()
        problems = []
        owner = f" ({camera})" if camera is not None else ""
        for k, item in enumerate(items):
            if isinstance(item, int):
                if 0 <= item < len(self):
                    ids.add(item)
                else:
                    problems.append(
                        f"{where}[{k}]{owner}: class id {item} out of range 0..{len(self) - 1}"
                    )
            elif item in self:
                ids.add(self.index(item))
            else:
                problems.append(f"{where}[{k}]{owner}: unknown class {item!r}{self._hint(item)}")
        if problems:
            raise ConfigError(problems)
        return frozenset(ids)

    def _hint(self, item: str) -> str:
        match = difflib.get_close_matches(item, list(self), n=1, cutoff=0.6)
        return f" (did you mean {match[0]!r}?)" if match else ""
