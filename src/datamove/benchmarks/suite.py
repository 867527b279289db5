"""The benchmark suite: every op as a ratio to a same-process memory copy, beside the peers.

``python bench/run.py`` or ``datamove bench``. In one process it measures,
per case, the *floor* (the same bytes copied into a preallocated array over
all cores: the faster of ``np.copyto`` split over them and the compiled
core's copy loop with streaming stores, timed in turns with each contender;
rows before this floor, in the committed results files, used ``np.copyto``
alone), then datamove with ``out=`` a
preallocated array, datamove allocating its result (against an allocating
copy, since fresh pages cost about as much as the copy), and every peer that
is installed and can run the case: OpenVINO's CPU plugin (output buffers
reused), onnxruntime (output bound to a preallocated array), TensorFlow,
PyTorch and the NumPy reshape/transpose/reshape idiom. Every figure is the
median time divided by the floor's median. Peers run with as many threads as
datamove.

>>> case = Case("s2d", "space_to_depth", (1, 4, 8, 8), "float32", ("blocks_first", 2))
>>> case.nbytes, case.label
(1024, 's2d [1,4,8,8] float32 blocks_first b2')
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..plans import formulas
from .. import opset, ops
from .common import Case, format_ratio
from ..engines.route import ENGINES

__all__ = ["Case", "suite", "survey", "summary", "main"]


def _scaled(shape: Sequence[int], size: int, itemsize: int, multiple: int) -> Tuple[int, ...]:
    """``shape`` with its batch changed so the tensor has about ``size`` bytes (batch a multiple of ``multiple``)."""
    per_batch = int(np.prod(shape[1:])) * itemsize
    batch = max(multiple, round(size / per_batch / multiple) * multiple)
    return (batch,) + tuple(shape[1:])


def suite(scale: str = "full", large: bool = False) -> List[Case]:
    """The fixed suite: all four ops, both modes, NCHW/NHWC, blocks 2/3/4/non-square, 4-D and 5-D,
    crops and pads, float32/uint8/float64, short inner runs (4-64 channels innermost), 4 KiB to 256 MiB
    (``"quick"``: small sizes only); ``large`` adds 512 MiB and 1 GiB cases."""
    big = {"full": 128 << 20, "quick": 1 << 20}[scale]
    mid = big // 2  # the short-run cases: 64 MiB
    cases: List[Case] = []
    f32 = "float32"
    for mode in ("blocks_first", "depth_first"):
        cases.append(Case("s2d", "space_to_depth", _scaled((1, 64, 256, 256), big, 4, 1), f32, (mode, 2)))
        cases.append(Case("d2s", "depth_to_space", _scaled((1, 256, 128, 128), big, 4, 1), f32, (mode, 2)))
    cases.append(Case("s2d", "space_to_depth", _scaled((1, 256, 256, 64), big, 4, 1), f32, ("blocks_first", 2), "nhwc"))
    cases.append(Case("d2s", "depth_to_space", _scaled((1, 256, 128, 128), big, 4, 1), f32, ("blocks_first", 2), "nhwc"))
    cases.append(Case("s2d", "space_to_depth", _scaled((1, 16, 240, 240), big, 4, 1), f32, ("blocks_first", 3)))
    cases.append(Case("s2d", "space_to_depth", _scaled((1, 16, 256, 256), big, 4, 1), f32, ("depth_first", 4)))
    cases.append(Case("d2s", "depth_to_space", _scaled((1, 144, 80, 80), big, 4, 1), f32, ("depth_first", 3)))
    cases.append(Case("s2d", "space_to_depth", _scaled((1, 64, 256, 256), big, 1, 1), "uint8", ("blocks_first", 2)))
    cases.append(Case("s2d", "space_to_depth", _scaled((1, 64, 256, 256), big, 8, 1), "float64", ("depth_first", 2)))
    cases.append(Case("s2d 5-D", "space_to_depth", _scaled((1, 32, 32, 128, 128), big, 4, 1), f32, ("blocks_first", 2)))
    cases.append(Case("d2s 5-D", "depth_to_space", _scaled((1, 256, 16, 64, 64), big, 4, 1), f32, ("depth_first", 2)))
    b2s: Callable[..., Tuple[Any, ...]] = lambda shape, block, crops: (block, crops[0], crops[1])  # noqa: E731
    cases.append(Case("b2s", "batch_to_space", _scaled((4, 32, 128, 128), big, 4, 4), f32, b2s(None, [1, 1, 2, 2], ([0, 0, 1, 0], [0, 0, 1, 2]))))
    cases.append(Case("b2s", "batch_to_space", _scaled((4, 32, 128, 128), big, 4, 4), f32, b2s(None, [1, 1, 2, 2], ([0, 0, 0, 0], [0, 0, 0, 0]))))
    cases.append(Case("b2s", "batch_to_space", _scaled((6, 32, 128, 128), big, 4, 6), f32, ([1, 1, 3, 2], [0, 0, 1, 0], [0, 0, 2, 1]), "nhwc"))
    cases.append(Case("s2b", "space_to_batch", _scaled((1, 32, 254, 254), big, 4, 1), f32, ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])))
    cases.append(Case("s2b", "space_to_batch", _scaled((1, 32, 256, 256), big, 1, 1), "uint8", ([1, 1, 4, 4], [0, 0, 0, 0], [0, 0, 0, 0])))
    cases.append(Case("s2b", "space_to_batch", _scaled((1, 32, 254, 254), big, 4, 1), f32, ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), "nhwc"))
    cases.append(Case("b2s 5-D", "batch_to_space", _scaled((8, 16, 16, 64, 64), big, 4, 8), f32, ([1, 1, 2, 2, 2], [0, 0, 0, 1, 1], [0, 0, 0, 1, 1])))
    for size in (4 << 10, 16 << 10, 256 << 10, 4 << 20):
        if size < big:
            cases.append(Case("s2d", "space_to_depth", _scaled((1, 4, 16, 16), size, 4, 1), f32, ("blocks_first", 2)))
            cases.append(Case("b2s", "batch_to_space", _scaled((4, 1, 16, 16), size, 4, 4), f32, ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1])))
    # Short inner runs: channels innermost (NHWC) with 4 to 64 channels, crops and pads, and the
    # cases where the contiguous runs are one item (depth_first in NHWC) or odd blocks.
    cases.append(Case("b2s short", "batch_to_space", _scaled((4, 16, 128, 128), mid, 4, 4), f32,
                      ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), "nhwc"))
    cases.append(Case("s2b short", "space_to_batch", _scaled((1, 4, 254, 254), mid, 4, 1), f32,
                      ([1, 1, 2, 2], [0, 0, 1, 1], [0, 0, 1, 1]), "nhwc"))
    cases.append(Case("s2d short", "space_to_depth", _scaled((1, 8, 256, 256), mid, 4, 1), f32, ("blocks_first", 2), "nhwc"))
    cases.append(Case("d2s short", "depth_to_space", _scaled((1, 64, 128, 128), mid, 4, 1), f32, ("blocks_first", 2), "nhwc"))
    cases.append(Case("s2d short", "space_to_depth", _scaled((1, 16, 256, 256), mid, 4, 1), f32, ("depth_first", 2), "nhwc"))
    cases.append(Case("d2s short", "depth_to_space", _scaled((1, 64, 128, 128), mid, 4, 1), f32, ("depth_first", 2), "nhwc"))
    # 2 to 4 output channels: tiles of one pixel, 16 to 64 bytes (transposed in registers a run at a time)
    cases.append(Case("s2d short", "space_to_depth", _scaled((1, 4, 256, 256), mid, 4, 1), f32, ("depth_first", 2), "nhwc"))
    cases.append(Case("d2s short", "depth_to_space", _scaled((1, 16, 128, 128), mid, 4, 1), f32, ("depth_first", 2), "nhwc"))
    cases.append(Case("s2d short", "space_to_depth", _scaled((1, 2, 256, 256), mid, 4, 1), f32, ("depth_first", 2), "nhwc"))
    cases.append(Case("d2s short", "depth_to_space", _scaled((1, 8, 128, 128), mid, 4, 1), f32, ("depth_first", 2), "nhwc"))
    cases.append(Case("d2s short", "depth_to_space", _scaled((1, 16, 128, 128), mid, 4, 1), f32, ("blocks_first", 2), "nhwc"))
    # TensorFlow's own layout: space_to_batch_nd / batch_to_space_nd with blocks on H and W of C-contiguous NHWC
    tf_margins = ([1, 2, 2, 1], [0, 1, 1, 0], [0, 1, 1, 0])
    cases.append(Case("s2b TF", "space_to_batch", _scaled((1, 254, 254, 8), mid, 4, 1), f32, tf_margins))
    cases.append(Case("b2s TF", "batch_to_space", _scaled((4, 128, 128, 8), mid, 4, 4), f32, tf_margins))
    cases.append(Case("s2d 5-D", "space_to_depth", _scaled((1, 8, 24, 48, 48), mid, 4, 1), f32, ("depth_first", 3)))
    cases.append(Case("s2b f64", "space_to_batch", _scaled((1, 8, 190, 190), mid, 8, 1), "float64",
                      ([1, 1, 3, 3], [0, 0, 1, 1], [0, 0, 1, 1])))
    cases.append(Case("b2s 5-D short", "batch_to_space", _scaled((8, 4, 32, 64, 64), mid, 4, 8), f32,
                      ([1, 1, 2, 2, 2], [0, 0, 1, 1, 1], [0, 0, 1, 1, 1]), "nhwc"))
    if scale == "full":
        cases.append(Case("s2d 256 MiB", "space_to_depth", _scaled((1, 64, 256, 256), 256 << 20, 4, 1), f32, ("blocks_first", 2)))
    if large:
        for size, name in ((512 << 20, "512 MiB"), (1 << 30, "1 GiB")):
            cases.append(Case(f"s2d {name}", "space_to_depth", _scaled((1, 64, 256, 256), size, 4, 1), f32, ("blocks_first", 2)))
            cases.append(Case(f"b2s {name}", "batch_to_space", _scaled((4, 32, 256, 256), size, 4, 4), f32,
                              ([1, 1, 2, 2], [0, 0, 1, 0], [0, 0, 1, 2])))
    return cases


def survey(scale: str = "full") -> List[Case]:
    """Many small images, outside the suite: where tiles are short (a few words a row) and the core's tables
    and units take over. Float32, NCHW and channels-last, 16 and 64 channels, images of 4 x 4 to 28 x 28
    with a 2 x 2 block and 6 x 6 to 21 x 21 with 3 x 3: SpaceToDepth and DepthToSpace in both modes
    (DepthToSpace where the channels divide), SpaceToBatch with pads of 1 and BatchToSpace with crops of 1
    on each side of H and W. The batch makes each input about 48 MiB (``"quick"``: 1 MiB). 168 cases.

    >>> cases = survey()
    >>> len(cases), cases[0].label
    (168, 'survey s2d [49152,16,4,4] float32 depth_first b2')
    """
    size = {"full": 48 << 20, "quick": 1 << 20}[scale]
    cases: List[Case] = []
    for layout in ("nchw", "nhwc"):
        for channels in (16, 64):
            for block in (2, 3):
                for side in ((4, 8, 14, 16, 28) if block == 2 else (6, 12, 21)):
                    n = max(1, size // (4 * channels * side * side))
                    for mode in ("depth_first", "blocks_first"):
                        cases.append(Case("survey s2d", "space_to_depth", (n, channels, side, side), "float32",
                                          (mode, block), layout))
                        if channels % (block * block) == 0:
                            cases.append(Case("survey d2s", "depth_to_space", (n, channels, side // block, side // block),
                                              "float32", (mode, block), layout))
                    margins = ([1, 1, block, block], [0, 0, 1, 1], [0, 0, 1, 1])
                    cases.append(Case("survey s2b", "space_to_batch", (n, channels, side - 2, side - 2), "float32",
                                      margins, layout))
                    cases.append(Case("survey b2s", "batch_to_space",
                                      (n * block * block, channels, side // block, side // block), "float32", margins, layout))
    return cases


def summary(rows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The spread of datamove's ratios over ``rows``: median, how many over 1.10x, 1.5x and 2x, the worst case.

    >>> summary([{"case": "a", "datamove": 0.9}, {"case": "b", "datamove": 2.5}, {"case": "c", "datamove": 1.2}])
    {'cases': 3, 'median': 1.2, 'over_1.10': 2, 'over_1.5': 1, 'over_2': 1, 'worst': 2.5, 'worst_case': 'b'}
    """
    ratios = [row["datamove"] for row in rows]
    worst = max(rows, key=lambda row: row["datamove"])
    return {"cases": len(rows), "median": statistics.median(ratios), "over_1.10": sum(r > 1.10 for r in ratios),
            "over_1.5": sum(r > 1.5 for r in ratios), "over_2": sum(r > 2 for r in ratios),
            "worst": worst["datamove"], "worst_case": worst["case"]}


# ------------------------------------------------------------------ arrays in a layout


def _in_layout(array: np.ndarray, layout: str) -> np.ndarray:
    """The same logical array, with channels (axis 1) innermost in memory for "nhwc"."""
    if layout == "nchw":
        return np.ascontiguousarray(array)
    channels_last: np.ndarray = np.ascontiguousarray(np.moveaxis(array, 1, -1)).transpose(0, array.ndim - 1,
                                                                                        *range(1, array.ndim - 1))
    return channels_last


def _empty(shape: Sequence[int], dtype: Any, layout: str) -> np.ndarray:
    if layout == "nchw":
        return np.empty(shape, dtype)
    cl = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    empty: np.ndarray = np.empty(cl, dtype).transpose(0, len(shape) - 1, *range(1, len(shape) - 1))
    return empty


# ------------------------------------------------------------------ timing


class Timer:
    """Medians of functions timed in turns, so a shared machine's swings hit them alike; ``before``, where
    given, runs (untimed, and outside the budget) before each timed call."""

    def __init__(self, budget: float, repeats: int) -> None:
        self.budget = budget
        self.repeats = repeats

    def medians(self, functions: Dict[str, Callable[[], Any]],
                before: Optional[Callable[[], Any]] = None) -> Dict[str, float]:
        for function in functions.values():
            function()  # warm up: compile, fault pages in
        times: Dict[str, List[float]] = {name: [] for name in functions}
        start = time.perf_counter()
        aside = 0.0  # time spent in before(): not the budget's
        rounds = 0
        while rounds < self.repeats or (time.perf_counter() - start - aside < self.budget * len(functions) and rounds < 50):
            for name, function in functions.items():
                if before is not None:
                    t = time.perf_counter()
                    before()
                    aside += time.perf_counter() - t
                t = time.perf_counter()
                function()
                times[name].append(time.perf_counter() - t)
            rounds += 1
            if rounds >= 3 and time.perf_counter() - start - aside > 4 * self.budget * len(functions):
                break
        return {name: statistics.median(values) for name, values in times.items()}


#: Cases that move this many bytes or more (input and output together) start each timed call from memory:
#: :func:`evictor`'s read of twice the last-level cache runs before it, untimed. Timed back to back, a
#: 64 MiB case on a machine whose L3 holds 260 MiB timed the floor's streaming copy with its source still
#: in the cache (``np.copyto``, timed just before it, had read it) against datamove's input from memory:
#: DepthToSpace blocks_first NHWC ``[16,64,128,128]`` read 1.54x that floor, 1.19x with every call cold;
#: TensorFlow's SpaceToBatch ``[33,254,254,8]`` 1.84x -> 1.28x (2-core Intel Xeon, in turns). Smaller cases
#: are timed warm, as a program's small calls run.
EVICT_BYTES = 32 << 20


def evictor(nbytes: int) -> Optional[Callable[[], Any]]:
    """What runs before each timed call of a case that moves ``nbytes``: None below :data:`EVICT_BYTES`, else
    a read of a buffer twice the last-level cache (the core's reading of it; 32 MiB where it has none),
    which leaves no line of the case's arrays or the floor's there."""
    if nbytes < EVICT_BYTES:
        return None
    try:
        from ..engines.native import engine as native_engine

        cache = native_engine.core().cache_bytes() or 32 << 20
    except ImportError:
        cache = 32 << 20
    buffer = np.ones(2 * cache // 8, np.uint64)  # (written: its pages exist)
    return lambda: np.bitwise_or.reduce(buffer)  # reads every line; plain stores of a fill might go around the cache


def _threads() -> int:
    from ..engines.native.threads import get_num_threads

    return get_num_threads()


class Floor:
    """A copy of the same bytes split over ``threads`` threads: into a preallocated array, or a fresh one.

    The floor is physical: the faster, timed in turns with each contender, of ``np.copyto`` split over the
    threads (:meth:`copy`; glibc's memcpy, which streams its stores around the cache only above its own
    threshold) and the compiled core's plain copy loop with streaming stores (:meth:`stream`; where the
    core is missing, ``np.copyto`` alone). Small copies are not split: below ``SPLIT_BYTES`` one
    ``np.copyto`` is faster than waking threads.
    """

    SPLIT_BYTES = 1 << 20

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self.pool = ThreadPoolExecutor(threads)
        try:
            from ..engines.native import engine as native_engine

            self.core: Any = native_engine.core()
        except ImportError:
            self.core = None

    def stream(self, src: np.ndarray, dst: np.ndarray) -> None:
        """The core's copy loop, stores around the cache (C-contiguous arrays of one size)."""
        self.core.copy(src, dst, self.threads, 1)

    def copies(self, src: np.ndarray, dst: np.ndarray) -> Dict[str, Callable[[], Any]]:
        """The floor's contenders for copying ``src`` into ``dst``, by name: the faster of them is the floor."""
        found: Dict[str, Callable[[], Any]] = {"floor_copyto_s": lambda: self.copy(src, dst)}
        if self.core is not None and hasattr(self.core, "copy"):
            found["floor_stream_s"] = lambda: self.stream(src, dst)
        return found

    def copy(self, src: np.ndarray, dst: np.ndarray) -> None:
        if src.nbytes < self.SPLIT_BYTES:
            np.copyto(dst, src)
            return
        a, b = src.reshape(-1), dst.reshape(-1)
        bounds = [a.size * k // self.threads for k in range(self.threads + 1)]
        jobs = [self.pool.submit(np.copyto, b[lo:hi], a[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
        for job in jobs:
            job.result()

    def allocating(self, src: np.ndarray) -> np.ndarray:
        dst = np.empty_like(src)
        self.copy(src, dst)
        return dst


# ------------------------------------------------------------------ peers


def _numpy_idiom(case: Case, data: np.ndarray) -> Optional[Callable[[], Any]]:
    """The reshape/transpose/reshape idiom people write by hand (``np.pad`` before, a copied crop after):
    the spec's steps (:mod:`datamove.plans.formulas`) in NumPy."""
    s = formulas.steps(case.op, opset.OPS[case.op].kwargs(case.args), data.shape)

    def run() -> Any:
        x = data if s.pads is None else np.pad(data, list(zip(*s.pads)))
        y = x.reshape(s.split).transpose(s.perm).reshape(s.merged)
        if s.crops is None:
            return y
        return np.ascontiguousarray(y[tuple(slice(b, n - e) for n, b, e in zip(s.merged, *s.crops))])

    return run


def _openvino(case: Case, data: np.ndarray, out: np.ndarray, threads: int) -> Optional[Callable[[], Any]]:
    try:
        import openvino as ov
        from openvino import opset13 as opset
    except ImportError:
        return None
    if case.layout != "nchw" or data.dtype not in (np.float32, np.uint8, np.float64):
        return None
    if data.dtype == np.float64:
        return None  # the CPU plugin runs f64 as f32
    parameter = opset.parameter(data.shape, ov.Type(data.dtype))
    if case.op == "space_to_depth":
        node = opset.space_to_depth(parameter, case.args[0], case.args[1])
    elif case.op == "depth_to_space":
        node = opset.depth_to_space(parameter, case.args[0], case.args[1])
    else:
        consts = [opset.constant(np.array(a, np.int64)) for a in case.args]
        node = getattr(opset, case.op)(parameter, *consts)
    # openvino's own annotations: ov.Model (openvino._ov_api) is not the _pyopenvino.Model its __init__ binds
    model = ov.Model([node], [parameter])  # pyright: ignore[reportGeneralTypeIssues]
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads})
    request = compiled.create_infer_request()
    request.set_input_tensor(ov.Tensor(data, shared_memory=True))
    request.set_output_tensor(ov.Tensor(out, shared_memory=True))
    infer: Callable[[], Any] = request.infer
    return infer


def _onnxruntime(case: Case, data: np.ndarray, out: np.ndarray, threads: int) -> Optional[Callable[[], Any]]:
    if case.op not in ("space_to_depth", "depth_to_space") or data.ndim != 4 or case.layout != "nchw":
        return None
    mode, block = case.args
    if case.op == "space_to_depth" and mode != "blocks_first":
        return None  # ONNX SpaceToDepth has no mode: blocks_first only
    try:
        import onnx
        import onnxruntime as ort
        from onnx import helper
    except ImportError:
        return None
    elem = {np.dtype(np.float32): onnx.TensorProto.FLOAT, np.dtype(np.uint8): onnx.TensorProto.UINT8, np.dtype(np.float64): onnx.TensorProto.DOUBLE}[data.dtype]
    attrs = {"blocksize": block}
    if case.op == "depth_to_space":
        attrs["mode"] = "DCR" if mode == "blocks_first" else "CRD"
    node = helper.make_node("SpaceToDepth" if case.op == "space_to_depth" else "DepthToSpace", ["x"], ["y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, data.shape)], [helper.make_tensor_value_info("y", elem, out.shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    binding = session.io_binding()
    binding.bind_cpu_input("x", data)
    binding.bind_output("y", "cpu", 0, out.dtype, out.shape, out.ctypes.data)
    return lambda: session.run_with_iobinding(binding)


def _tensorflow(case: Case, data: np.ndarray, threads: int) -> Optional[Callable[[], Any]]:
    if "tensorflow" not in sys.modules and not _tensorflow_wanted():
        return None
    try:
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
    except ImportError:
        return None
    if case.op in ("space_to_depth", "depth_to_space"):
        mode, block = case.args
        if mode != "blocks_first" or data.ndim != 4 or data.dtype == np.uint8 and case.op == "depth_to_space" and False:
            return None
        nhwc = tf.constant(np.moveaxis(data, 1, -1))  # TF's own layout: its kernel is timed, not the transpose
        function = tf.nn.space_to_depth if case.op == "space_to_depth" else tf.nn.depth_to_space
        return lambda: function(nhwc, block).numpy()
    x = tf.constant(np.ascontiguousarray(data))
    block = list(case.args[0][1:])
    margins = [[b, e] for b, e in zip(case.args[1][1:], case.args[2][1:])]
    if case.op == "batch_to_space":
        return lambda: tf.batch_to_space(x, block, margins).numpy()
    return lambda: tf.space_to_batch(x, block, margins).numpy()


def _tensorflow_wanted() -> bool:
    return os.environ.get("DATAMOVE_BENCH_TF", "1") != "0"


def _torch(case: Case, data: np.ndarray, threads: int) -> Optional[Callable[[], Any]]:
    if case.op not in ("space_to_depth", "depth_to_space") or case.args[0] != "depth_first" or data.ndim != 4:
        return None
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(threads)
    x = torch.from_numpy(data)
    if case.op == "space_to_depth":
        return lambda: torch.nn.functional.pixel_unshuffle(x, case.args[1])
    return lambda: torch.nn.functional.pixel_shuffle(x, case.args[1])


PEERS = ("openvino", "onnxruntime", "tensorflow", "torch", "numpy idiom")


# ------------------------------------------------------------------ the run


def _call(case: Case, data: np.ndarray, out: Optional[np.ndarray], engine: str) -> Any:
    return getattr(ops, case.op)(data, *case.args, out=out, engine=engine)


def run_case(case: Case, timer: Timer, floor: Floor, peers: Sequence[str], engine: str = "auto") -> Dict[str, Any]:
    rng = np.random.default_rng(0)
    logical = rng.integers(0, 255, size=case.shape, dtype=np.uint8).astype(case.dtype)
    data = _in_layout(logical, case.layout)
    result = _call(case, data, None, engine)
    out = _empty(result.shape, data.dtype, case.layout)
    # The floor copies as many bytes as the op writes (pads and crops change the size).
    flat_dst = np.empty(result.size, data.dtype)
    src_bytes = np.resize(np.ascontiguousarray(data).reshape(-1), flat_dst.size)
    row: Dict[str, Any] = {"case": case.label, "op": case.op, "shape": list(case.shape), "dtype": case.dtype,
                           "layout": case.layout, "args": [list(a) if isinstance(a, (list, tuple)) else a for a in case.args],
                           "in_bytes": int(data.nbytes), "out_bytes": int(result.nbytes)}
    functions: Dict[str, Callable[[], Any]] = {"datamove_s": lambda: _call(case, data, out, engine)}
    threads = floor.threads
    peer_out = np.empty(result.shape, data.dtype)  # peers write here; alive until their timing ends
    for peer in peers:
        function: Optional[Callable[[], Any]] = None
        try:
            if peer == "openvino":
                function = _openvino(case, data, peer_out, threads)
            elif peer == "onnxruntime":
                function = _onnxruntime(case, data, peer_out, threads)
            elif peer == "tensorflow":
                function = _tensorflow(case, data, threads)
            elif peer == "torch":
                function = _torch(case, np.ascontiguousarray(data), threads)
            elif peer == "numpy idiom":
                function = _numpy_idiom(case, np.ascontiguousarray(data))
        except Exception as exc:  # a peer that cannot build this case is reported, not fatal
            row[peer + "_error"] = f"{type(exc).__name__}: {exc}"[:200]
            function = None
        if function is not None:
            functions[peer] = function
    # Each contender is timed in turns with the floor, one contender at a time:
    # peers' thread pools spin after their work and would steal the cores
    # from whatever ran next. The ratio is to the floor timed beside it.
    floors = floor.copies(src_bytes, flat_dst)
    before = evictor(data.nbytes + result.nbytes)
    for name, function in functions.items():
        time.sleep(0.2)  # let the previous contender's threads go idle
        times = timer.medians({**floors, name: function}, before)
        fastest = min(times[f] for f in floors)  # the physical floor: the faster copy of the same bytes
        if name == "datamove_s":
            row["floor_s"] = fastest
            row.update({f: times[f] for f in floors})
            row["datamove"] = times[name] / fastest
        else:
            row[name] = times[name] / fastest
    # Allocating: a new result in the case's layout (channels-last data wants a channels-last result).
    if case.layout == "nchw":
        allocate = lambda: _call(case, data, None, engine)  # noqa: E731
    else:
        allocate = lambda: _call(case, data, _empty(result.shape, data.dtype, case.layout), engine)  # noqa: E731
    time.sleep(0.2)
    allocating = timer.medians({
        "floor_alloc_s": lambda: floor.allocating(src_bytes),
        "datamove_alloc_s": allocate,
    }, before)
    row["floor_alloc_s"] = allocating["floor_alloc_s"]
    row["datamove_alloc"] = allocating["datamove_alloc_s"] / row["floor_alloc_s"]
    return row


def table(rows: Sequence[Dict[str, Any]], peers: Sequence[str]) -> str:
    first = any("first_call" in row for row in rows)
    head = ["case", "MiB", "floor ms", "datamove", "alloc"] + (["first call"] if first else []) + list(peers)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [row["case"], f"{row['in_bytes'] / 2**20:.3g}", f"{row['floor_s'] * 1e3:.3f}",
                 format_ratio(row["datamove"]), format_ratio(row["datamove_alloc"])]
        cells += [format_ratio(row.get("first_call"))] if first else []
        cells += [format_ratio(row.get(p)) for p in peers]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None, parser_class: Any = argparse.ArgumentParser) -> int:
    """``datamove bench``; ``parser_class`` is the command line's (one-line usage errors)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--device" in argv and argv[argv.index("--device") + 1:][:1] == ["cuda"] or "--device=cuda" in argv:
        from . import gpu as bench_gpu  # the GPU suite: ratios to a device-to-device copy

        return bench_gpu.main(argv, parser_class)
    parser = parser_class(prog="datamove bench", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"], help="cpu (this suite) or cuda (datamove.benchmarks.gpu)")
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    parser.add_argument("--large", action="store_true", help="add 512 MiB and 1 GiB cases (needs about 4 GiB of memory)")
    parser.add_argument("--survey", action="store_true",
                        help="instead of the suite, 168 cases of many small images (16 and 64 channels, 4 x 4 to "
                             "28 x 28 pixels, NCHW and NHWC), with the spread of their ratios")
    parser.add_argument("--process", action="store_true",
                        help="also what a fresh process meets: each case's first call (>= 1 MiB) over its steady call, "
                             "a 10-call script against the NumPy idiom, import plus 10 calls of 64 MiB, "
                             "the first calls of new small shapes")
    parser.add_argument("--install-size", action="store_true", help="also the bytes 'pip install .' adds to a bare venv")
    parser.add_argument("--json", default="bench-results.json", help="where to write the results (default: %(default)s)")
    parser.add_argument("--peers", default=",".join(PEERS), help="comma-separated peers to time (default: all installed); '' for none")
    parser.add_argument("--only", default="", help="run only the cases whose label contains this text")
    parser.add_argument("--engine", default="auto", choices=("auto", *ENGINES),
                        help="the datamove engine timed (default: auto, chosen by the array's library, device and size)")
    parser.add_argument("--budget", type=float, default=0.3, help="seconds of timing per measurement (default: %(default)s)")
    args = parser.parse_args(argv)
    peers = [p for p in args.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        parser.error(f"unknown peers {unknown}; known: {list(PEERS)}")
    scale = "quick" if args.quick else "full"
    cases = [c for c in (survey(scale) if args.survey else suite(scale, args.large)) if args.only in c.label]
    if not cases:
        parser.error(f"no case's label contains {args.only!r}")
    threads = _threads()
    timer = Timer(args.budget, 5)
    floor = Floor(threads)
    machine = f"{platform.machine()}, {os.cpu_count()} CPUs, {threads} threads, Python {platform.python_version()}, NumPy {np.__version__}"
    print(f"datamove bench: {len(cases)} cases on {machine}; ratios = median time / median floor", file=sys.stderr)
    rows = []
    for number, case in enumerate(cases, 1):
        start = time.perf_counter()
        row = run_case(case, timer, floor, peers, args.engine)
        if args.process and case.nbytes >= 1 << 20:
            from . import process as bench_process

            times = bench_process.first_call(case)
            row["first_call"] = times["first_s"] / times["steady_s"]
            row.update(first_call_s=times["first_s"], first_steady_s=times["steady_s"],
                       first_core_s=times["first_core_s"], first_steady_core_s=times["steady_core_s"])
        rows.append(row)
        ours = f"{row['datamove']:.2f}x"
        print(f"[{number}/{len(cases)}] {case.label}: datamove {ours} ({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    print(table(rows, peers))
    results: Dict[str, Any] = {"machine": machine, "threads": threads, "peers": peers, "rows": rows}
    if args.survey:
        results["summary"] = spread = summary(rows)
        print(f"\n{spread['cases']} cases: median {spread['median']:.2f}x the copy floor; over 1.10x "
              f"{spread['over_1.10']}, over 1.5x {spread['over_1.5']}, over 2x {spread['over_2']}; "
              f"the worst {spread['worst']:.2f}x ({spread['worst_case']})")
    if args.process:
        from . import process as bench_process

        results["script"] = bench_process.script()
        results["cold_start"] = bench_process.cold_start()
        results["new_shapes"] = shapes = bench_process.new_shapes()
        s, c = results["script"], results["cold_start"]
        print(f"\n10 space_to_depth calls on 32 MiB, whole process: datamove {s['datamove_s']:.3f} s, "
              f"NumPy idiom {s['idiom_s']:.3f} s, ratio {s['ratio']:.2f}")
        print(f"import datamove {c['import_datamove_s'] * 1e3:.1f} ms after numpy; 10 calls of 64 MiB into out= "
              f"{c['ten_calls_s']:.3f} s; together {c['import_plus_calls_s']:.3f} s")
        print("a new small shape's first call in a warm process (median of 60 shapes), datamove / NumPy idiom: "
              + "; ".join(f"{op} {v['datamove_s'] * 1e6:.0f} / {v['idiom_s'] * 1e6:.0f} us" for op, v in shapes.items()))
    if args.install_size:
        from . import process as bench_process

        results["install"] = size = bench_process.install_size()
        print(f"pip install . into a bare venv adds {size['added_bytes'] / 2**20:.1f} MiB "
              f"(NumPy {size['numpy_bytes'] / 2**20:.1f} MiB of it): {', '.join(size['packages'])}")
    with open(args.json, "w") as handle:
        json.dump(results, handle, indent=1)
    print(f"wrote {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
