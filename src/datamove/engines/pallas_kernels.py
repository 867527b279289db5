"""The JAX engine's one Pallas kernel: a :class:`~datamove.plans.moves.Move`, one tile per program.

Imported only by :mod:`datamove.engines.pallas_engine`, when a JAX array
runs there: importing Pallas costs about a second.

The kernel is the Triton engine's (:mod:`datamove.engines.triton_kernels`)
written in Pallas, which lowers to Triton on a GPU: each program moves one
``[BR, BA, BC]`` tile of the move's ``(r, a, c)`` dims at one index of its
outer dims, masked at the edges, SpaceToBatch's padding written as zeros
without a read, BatchToSpace's crop neither read nor written. Extents and
strides are Python ints baked into the kernel (``jax.jit`` compiles per shape
anyway), so Triton sees the unit strides: its coalescing pass gives the load
(``a`` fastest in ``src``) and the store (``c`` fastest in ``dst``) layouts of
their own, and moves the tile between them through shared memory.
Indices are 32-bit (JAX's default integers): the engine takes arrays of
fewer than 2**31 words.

Masked lanes point one past the end of their array: on a GPU their address is
never used; in Pallas' interpreter (``interpret=True``, on the CPU) a
gather there is clamped and a scatter there dropped, so a masked lane never
rewrites an element that another lane stores.

>>> import numpy as np
>>> from datamove.plans import moves
>>> m = moves.move("space_to_depth", {"mode": "blocks_first", "block_size": 2}, (1, 1, 4), (4, 4, 1),
...                (1, 2, 2), (4, 2, 1), 4, alignment=4)
>>> np.asarray(move_call(m, 4, 4, np.uint32, interpret=True)(np.arange(4, dtype=np.uint32))).tolist()
[0, 2, 1, 3]
"""

from __future__ import annotations

import math
from typing import Any, Callable, List, Tuple

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from ..plans.moves import Move

__all__ = ["move_call", "tiles", "TILE"]

#: Tile elements per program, by word width: the Triton engine's (4-16 KiB per program).
TILE = {1: 4096, 2: 4096, 4: 4096, 8: 2048}
_WARPS = 8
#: The largest index the kernel's 32-bit arithmetic holds (one past the end included).
MAX_WORDS = 2 ** 31 - 2


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def tiles(m: Move) -> Tuple[Tuple[int, int, int], Tuple[int, int, int]]:
    """The tile ``(BR, BA, BC)`` of non-empty move ``m`` and the tiles along ``(r, a, c)``: the Triton engine's sizes."""
    tile = TILE[m.word]
    bc = min(_pow2(m.ext_c), tile)
    ba = min(_pow2(m.ext_a), max(1, tile // bc))
    br = min(_pow2(m.ext_r), max(1, tile // (bc * ba)))
    return (br, ba, bc), (-(-m.ext_r // br), -(-m.ext_a // ba), -(-m.ext_c // bc))


def _load(ref: Any, index: Any, mask: Any) -> Any:
    old = getattr(pl, "load", None)  # JAX before Pallas' Triton API took refs (0.4.x): pl.load(ref, index)
    if old is not None:
        return old(ref, (index,), mask=mask, other=0)
    from jax.experimental.pallas import triton as plgpu

    return plgpu.load(ref.at[index], mask=mask, other=0)


def _store(ref: Any, index: Any, values: Any, mask: Any) -> None:
    old = getattr(pl, "store", None)
    if old is not None:
        old(ref, (index,), values, mask=mask)
        return
    from jax.experimental.pallas import triton as plgpu

    plgpu.store(ref.at[index], values, mask=mask)


def _kernel(m: Move, n_src: int, n_dst: int) -> Callable[[Any, Any], None]:
    """The kernel body of move ``m`` from ``n_src`` words into ``n_dst`` words."""
    (br, ba, bc), (tiles_r, tiles_a, tiles_c) = tiles(m)

    def kernel(src: Any, dst: Any) -> None:
        pid = pl.program_id(0)
        tc = pid % tiles_c
        rest = pid // tiles_c
        ta = rest % tiles_a
        rest = rest // tiles_a
        tr = rest % tiles_r
        rest = rest // tiles_r
        # the outer index, decoded innermost first: offsets in src and dst, and each condition's part
        so: Any = m.src0
        do: Any = m.dst0
        coord: List[Any] = [-off for off, *_ in m.conditions]
        for i, (extent, src_step, dst_step) in enumerate(m.outer):
            k = rest % extent
            rest = rest // extent
            so = so + k * src_step
            do = do + k * dst_step
            coord = [c + k * cond[5][i] for c, cond in zip(coord, m.conditions)]
        shape = (br, ba, bc)
        ir = tr * br + jax.lax.broadcasted_iota(jnp.int32, shape, 0)
        ia = ta * ba + jax.lax.broadcasted_iota(jnp.int32, shape, 1)
        ic = tc * bc + jax.lax.broadcasted_iota(jnp.int32, shape, 2)
        mask = (ir < m.ext_r) & (ia < m.ext_a) & (ic < m.ext_c)
        keep = mask
        for c, (_, limit, wr, wa, wc, _) in zip(coord, m.conditions):
            position = c + ir * wr + ia * wa + ic * wc
            keep = keep & (position >= 0) & (position < limit)
        read = so + ir * m.src_r + ia * m.src_a + ic * m.src_c
        values = _load(src, jnp.where(keep, read, n_src), keep)  # masked: the dtype's zero
        written = mask if m.fill else keep  # SpaceToBatch writes its padding, BatchToSpace skips its crop
        _store(dst, jnp.where(written, do + ir * m.dst_r + ia * m.dst_a + ic * m.dst_c, n_dst), values, written)

    return kernel


def move_call(m: Move, n_src: int, n_dst: int, dtype: Any, interpret: bool) -> Callable[[Any], Any]:
    """A function from ``n_src`` words of unsigned ``dtype`` (``src``, flat) to the ``n_dst`` words of move ``m``.

    ``m`` is not empty; ``interpret``: Pallas' interpreter (any device) instead of a GPU kernel.
    """
    _, counts = tiles(m)
    programs = math.prod(counts) * math.prod(e for e, _, _ in m.outer)
    options: Any = {}
    if not interpret:
        from jax.experimental.pallas import triton as plgpu

        # the Triton backend (a GPU's default may be Mosaic GPU, which takes no gathers)
        options["compiler_params"] = plgpu.CompilerParams(num_warps=_WARPS)
    out_shape: Any = jax.ShapeDtypeStruct((n_dst,), dtype)  # type: ignore[no-untyped-call]
    return pl.pallas_call(
        _kernel(m, n_src, n_dst), out_shape=out_shape, grid=(programs,),
        interpret=interpret, name="datamove_move", **options,
    )
