"""The compiled row copy (_gather.c): the types its callers rely on."""
import numpy as np

def take_strings(out: np.ndarray, out_ends: np.ndarray, written: int, sources: list[tuple[np.ndarray, np.ndarray]],
                 chunk_of: np.ndarray, within: np.ndarray, /) -> int: ...
