"""Up-front checks shared by the metric functions.

Every metric validates its inputs before computing anything, so that a bad
input fails with a :class:`ValueError` that names the argument and what is
allowed, rather than as a silent NaN in a report.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]


def as_float_array(values: ArrayLike, name: str, *, finite: bool = False) -> FloatArray:
    """Return ``values`` as a non-empty 1-D float array without NaN.

    ``finite=True`` also rejects ±inf, for statistics built on sums or means.
    Accepts lists, NumPy arrays and pandas Series (nullable dtypes included:
    ``pd.NA`` counts as NaN).
    """
    try:
        if isinstance(values, pd.Series | pd.Index | pd.api.extensions.ExtensionArray):
            array = values.to_numpy(dtype=float, na_value=np.nan)
        else:
            array = np.asarray(values, dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be numeric scores ({error})") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty: a metric needs at least one score per group")
    nan = np.isnan(array)
    if nan.any():
        raise ValueError(
            f"{name} contains NaN (first at position {int(np.argmax(nan))}, "
            f"{int(nan.sum())} in all): drop or impute missing scores first"
        )
    if finite and np.isinf(array).any():
        raise ValueError(f"{name} contains infinite values; this statistic needs finite scores")
    return np.asarray(array, dtype=np.float64)


def _object_array(values: ArrayLike, name: str, missing: str) -> NDArray[Any]:
    """A non-empty 1-D object array; ``missing`` words the error for a NaN/None entry."""
    if isinstance(values, pd.Series | pd.Index):
        values = values.to_numpy(dtype=object)
    array = np.asarray(values, dtype=object)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    if array.size == 0:
        raise ValueError(f"{name} is empty")
    absent = pd.isna(array)
    if absent.any():
        raise ValueError(f"{name} {missing} at position {int(np.argmax(absent))}")
    return array


def as_bool_array(values: ArrayLike, name: str) -> NDArray[np.bool_]:
    """Return booleans (or 0/1) as a non-empty 1-D bool array without missing values."""
    if isinstance(values, np.ndarray) and values.dtype == np.bool_ and values.ndim == 1:
        if values.size == 0:
            raise ValueError(f"{name} is empty")
        return values  # already what the checks below establish, without a loop in Python
    array = _object_array(values, name, "contains NaN or None")
    numeric = (bool, int, float, np.bool_, np.integer, np.floating)
    if not all(isinstance(value, numeric) and value in (0, 1) for value in array):
        raise ValueError(f"{name} must hold only booleans or 0/1")
    return array.astype(bool)


def as_label_array(values: ArrayLike, name: str) -> NDArray[Any]:
    """Return labels (group ids, candidate ids) as a 1-D object array without missing values."""
    return _object_array(values, name, "has a missing label")


def check_same_length(**arrays: NDArray[Any]) -> None:
    """Raise unless all the named arrays have the same length."""
    lengths = {name: len(array) for name, array in arrays.items()}
    if len(set(lengths.values())) > 1:
        shown = ", ".join(f"{name}={length}" for name, length in lengths.items())
        raise ValueError(f"inputs must have the same length, got {shown}")


def check_confidence(confidence: float) -> float:
    """Return ``confidence`` if it is a level strictly between 0 and 1."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        raise ValueError(f"confidence must be a number in (0, 1), got {confidence!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    return float(confidence)


def check_int(value: object, name: str, *, minimum: int, maximum: float = math.inf) -> int:
    """Return ``value`` if it is an integer (not a bool) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if not minimum <= value <= maximum:
        upper = "" if math.isinf(maximum) else f" and at most {int(maximum)}"
        raise ValueError(f"{name} must be at least {minimum}{upper}, got {value!r}")
    return int(value)


def check_bool(value: object, name: str) -> bool:
    """Return ``value`` if it is True or False."""
    if not isinstance(value, bool | np.bool_):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_choice(value: Hashable, name: str, allowed: Collection[Hashable]) -> None:
    """Raise unless ``value`` is one of ``allowed``, listing the allowed values."""
    if value not in allowed:
        listed = ", ".join(repr(option) for option in allowed)
        raise ValueError(f"{name} must be one of {listed}; got {value!r}")
