"""Stand-ins for other libraries' arrays, to test the paths that take them without installing those libraries."""

from __future__ import annotations

from typing import Any

import numpy as np


class DLPackOnly:
    """An array that offers its data only through the DLPack protocol (as a CPU torch tensor does)."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.array.__dlpack_device__()
