"""Query results (Arrow tables) as numpy columns for the analyses that loop over windows:
numbers as float64 (NULL as NaN), text as object arrays, or text as integer codes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def numpy_column(col: pa.ChunkedArray, text: bool) -> np.ndarray:
    """A column as numpy: float64 (NULL -> NaN) for numbers, object (NULL -> None) for text."""
    if text:
        return col.to_numpy(zero_copy_only=False) if len(col) else np.empty(0, dtype=object)
    if pa.types.is_boolean(col.type):
        return col.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
    return col.cast(pa.float64()).to_numpy(zero_copy_only=False) if len(col) else np.empty(0)


def text_codes(values: pa.ChunkedArray, vocabulary: pa.Array) -> np.ndarray:
    """Position of each text value in ``vocabulary`` (int64), -1 for NULL or a value not in it."""
    if not len(values):
        return np.empty(0, dtype=np.int64)
    return pc.index_in(values, value_set=vocabulary).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)


def text_vocabulary(*cols: pa.ChunkedArray) -> pa.Array:
    """The distinct non-NULL values of text columns."""
    chunks = [c for col in cols for c in col.chunks]
    if not chunks:
        return pa.array([], pa.string())
    return pc.drop_null(pc.unique(pa.chunked_array(chunks, pa.string())))


@dataclass
class Columns:
    """Columns as numpy arrays (float64 for numbers, object for text, int64 for codes), sliced by
    row positions."""

    cols: dict[str, np.ndarray]

    @classmethod
    def of(cls, table: pa.Table, numbers: list[str], texts: tuple[str, ...] = ()) -> Columns:
        return cls({n: numpy_column(table.column(n), n in texts) for n in numbers + list(texts)})

    def take(self, idx: np.ndarray | slice) -> Columns:
        return Columns({n: c[idx] for n, c in self.cols.items()})

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name]

    def __len__(self) -> int:
        return len(next(iter(self.cols.values()))) if self.cols else 0
