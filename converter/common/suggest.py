"""'Did you mean' for names a user typed: flags, pass names, instruction names."""

from __future__ import annotations

import difflib
import re
from typing import Iterable


def _spelling(name: str) -> str:
    """What a name is once its separators are set aside: `cublas_gemm`, `cublas-gemm` and
    `tanh_3` / `tanh.3` are one name typed with different separators."""
    return re.sub(r"[-_.]", "", name.lower())


def close_names(typed: str, known: Iterable[str], n: int = 3, cutoff: float = 0.75) -> list[str]:
    """The known names closest to `typed`: first those equal to it but for '-', '_' and '.'
    (a sure match), else difflib's close matches."""
    known = list(dict.fromkeys(known))
    same = [k for k in known if _spelling(k) == _spelling(typed) and k != typed]
    if same:
        return same[:n]
    # Two letters swapped (`rnu`, `--ouptuts`): the same letters, nearly in order.
    swapped = [k for k in known if sorted(k) == sorted(typed) and difflib.SequenceMatcher(None, k, typed).ratio() >= 0.6]
    if swapped:
        return swapped[:n]
    return difflib.get_close_matches(typed, known, n=n, cutoff=cutoff)


def did_you_mean(typed: str, known: Iterable[str], quote: str = "") -> str:
    """'; did you mean X?' (or 'X or Y'), or '' when nothing is close."""
    close = close_names(typed, known)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f"{quote}{c}{quote}" for c in close) + "?"
