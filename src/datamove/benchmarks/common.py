"""What the CPU and GPU benchmark suites share: a case, and how a ratio is printed.

>>> case = Case("s2d", "space_to_depth", (1, 4, 8, 8), "float32", ("blocks_first", 2))
>>> case.nbytes, case.label
(1024, 's2d [1,4,8,8] float32 blocks_first b2')
>>> format_ratio(1.234), format_ratio(None)
('1.23', '—')
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

__all__ = ["Case", "format_ratio"]


class Case(NamedTuple):
    name: str
    op: str  # a datamove op name
    shape: Tuple[int, ...]  # the logical (NCHW-like) shape of the input
    dtype: str
    args: Tuple[Any, ...]  # the op's arguments after data
    layout: str = "nchw"  # "nhwc": channels innermost in memory, for input and output

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize

    @property
    def label(self) -> str:
        dims = ",".join(map(str, self.shape))
        if self.op in ("space_to_depth", "depth_to_space"):
            what = f"{self.args[0]} b{self.args[1]}"
        else:
            block = "x".join(map(str, self.args[0][1:]))
            margins = sum(self.args[1]) + sum(self.args[2])
            what = f"block {block}" + (" crops" if self.op == "batch_to_space" and margins else "") + (" pads" if self.op == "space_to_batch" and margins else "")
        return f"{self.name} [{dims}] {self.dtype} {what}" + (" NHWC" if self.layout == "nhwc" else "")


def format_ratio(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.2f}"
