"""The GPU benchmark: every op as a ratio to a device-to-device copy of the same bytes, beside the peers.

``python bench/run.py --device cuda`` (or ``datamove bench --device cuda``).
In one process, per case: the *floor* (``torch.Tensor.copy_`` of the input's
bytes into a preallocated tensor), datamove with ``out=`` a preallocated
tensor (the Triton engine), datamove allocating its result (against an
allocating copy, ``clone``), and the peers that are installed: PyTorch eager
(the specs' reshape/permute/contiguous idiom, ``pixel_shuffle`` /
``pixel_unshuffle`` for depth_first, ``F.pad`` then the idiom for
SpaceToBatch, the idiom then a slice for BatchToSpace's crops),
``torch.compile`` of the same function, the CuPy idiom and ``jax.jit`` of the
``jnp`` idiom; and datamove on JAX arrays (``jax.jit`` of the op with
``engine="pallas"``: the Pallas kernel at every size). Times are medians of
CUDA-event timings (JAX: wall time to ``block_until_ready``), and every figure
is that median divided by the floor's. Every case's datamove result (the JAX
one too) is also compared bit for bit with PyTorch eager's.

>>> [c.label for c in suite("quick")][:1]
['s2d [8,64,32,32] float32 blocks_first b2']
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from ..plans import formulas
from .. import opset
from .common import Case, format_ratio

__all__ = ["suite", "main"]

GPU_PEERS = ("torch", "torch.compile", "cupy", "jax", "datamove jax")


def suite(scale: str = "full") -> List[Case]:
    """The issue's cases at 512 MiB of input (``"quick"``: 2 MiB), and the item widths."""
    big = scale == "full"
    hw = 512 if big else 32
    cases = [
        Case("s2d", "space_to_depth", (8, 64, hw, hw), "float32", ("blocks_first", 2)),
        Case("s2d", "space_to_depth", (8, 64, hw, hw), "float32", ("depth_first", 2)),
        Case("d2s", "depth_to_space", (8, 256, hw // 2, hw // 2), "float32", ("depth_first", 2)),
        Case("d2s", "depth_to_space", (8, 256, hw // 2, hw // 2), "float32", ("blocks_first", 2)),
        Case("s2d", "space_to_depth", (8, 64, hw, hw), "float32", ("blocks_first", 2), "nhwc"),
        Case("s2d5", "space_to_depth", (4, 32, 64, hw // 4, hw // 4), "float32", ("blocks_first", 2)),
        Case("b2s", "batch_to_space", (64, 32, hw // 2, hw // 2), "float32", ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))),
        Case("s2b", "space_to_batch", (16, 32, hw - 2, hw - 2), "float32", ((1, 1, 2, 2), (0, 0, 1, 1), (0, 0, 1, 1))),
        Case("s2d", "space_to_depth", (8, 64, hw, hw), "uint8", ("blocks_first", 2)),
        Case("s2d", "space_to_depth", (8, 64, hw, hw // 2), "float16", ("depth_first", 2)),
        Case("s2d", "space_to_depth", (4, 64, hw, hw // 2), "complex128", ("blocks_first", 2)),
        Case("s2d", "space_to_depth", (8, 64, hw, hw), "float32", ("blocks_first", 4)),
        Case("small", "space_to_depth", (1, 8, 16, 16), "float32", ("depth_first", 2)),
    ]
    return cases


# ------------------------------------------------------------------ the idioms


def _idiom(xp: Any, case: Case, permute: Callable[..., Any], pad: Callable[..., Any]) -> Callable[[Any], Any]:
    """The specs' pad / reshape / transpose / reshape / crop (:mod:`datamove.plans.formulas`) in ``xp`` (torch, cupy,
    jax.numpy): the peers' code."""
    params = opset.OPS[case.op].kwargs(case.args)
    lo, hi = params.get("pads_begin"), params.get("pads_end")

    def fn(x: Any) -> Any:
        s = formulas.steps(case.op, params, tuple(x.shape))
        if s.pads is not None:
            x = pad(x, lo, hi)
        y = xp.reshape(permute(xp.reshape(x, s.split), s.perm), s.merged)
        if s.crops is None:
            return y
        return y[tuple(slice(b, n - e) for n, b, e in zip(s.merged, *s.crops))]

    return fn


def _torch_fn(case: Case) -> Callable[[Any], Any]:
    import torch
    import torch.nn.functional as F

    if case.args[0] == "depth_first" and len(case.shape) == 4:
        b = case.args[1]
        return (lambda x: F.pixel_unshuffle(x, b)) if case.op == "space_to_depth" else (lambda x: F.pixel_shuffle(x, b))

    def pad(x: Any, lo: Sequence[int], hi: Sequence[int]) -> Any:
        widths = sum(((lo[i], hi[i]) for i in range(len(lo) - 1, 0, -1)), ())
        return F.pad(x, widths)

    idiom = _idiom(torch, case, lambda y, o: y.permute(o), pad)
    if case.layout == "nhwc":  # TensorFlow's layout: NHWC in, NHWC out
        return lambda x: idiom(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1).contiguous()
    return lambda x: idiom(x).contiguous()


# ------------------------------------------------------------------ timing


def _events(fn: Callable[[], Any], repeats: int) -> float:
    """Median seconds per call from CUDA events, with the calls queued back to back.

    No synchronisation between calls: while the GPU runs one call, the host
    queues the next, so a call's host overhead shows only where it exceeds
    the GPU time (small tensors), as in a real program.
    """
    import torch

    fn()
    fn()
    torch.cuda.synchronize()
    # torch.cuda.Event's __init__ has no annotations (PyTorch 2.13)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]  # type: ignore[no-untyped-call]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]  # type: ignore[no-untyped-call]
    fn()  # keeps the queue busy while the first start event is recorded
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    seconds: float = statistics.median(s.elapsed_time(e) / 1e3 for s, e in zip(starts, ends))
    return seconds


def _wall(fn: Callable[[], Any], repeats: int) -> float:
    fn()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def run_case(case: Case, peers: Sequence[str], repeats: int) -> Dict[str, Any]:
    import torch

    from .. import ops

    dtype = getattr(torch, case.dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    raw = torch.randint(0, 256, (case.nbytes,), dtype=torch.uint8, device="cuda", generator=gen)
    data = raw.view(dtype).reshape(case.shape)
    op = getattr(ops, case.op)
    peer_fn = _torch_fn(case)
    if case.layout == "nhwc":
        nhwc = data.permute(0, 2, 3, 1).contiguous()  # the NHWC tensor, and datamove's NCHW view of it
        data_view = nhwc.permute(0, 3, 1, 2)
        expected = peer_fn(nhwc)
        out = torch.empty_like(expected)
        out_view = out.permute(0, 3, 1, 2)
        ours = lambda: op(data_view, *case.args, out=out_view)
        ours_alloc = lambda: op(data_view, *case.args)
        peer_input = nhwc
    else:
        expected = peer_fn(data)
        out = torch.empty_like(expected)
        ours = lambda: op(data, *case.args, out=out)
        ours_alloc = lambda: op(data, *case.args)
        peer_input = data
    copy_dst = torch.empty_like(raw)
    row: Dict[str, Any] = {"case": case.label, "bytes": case.nbytes}
    floor = _events(lambda: copy_dst.copy_(raw), repeats)
    alloc_floor = _events(lambda: raw.clone(), repeats)
    row["floor_s"] = floor
    row["datamove"] = _events(ours, repeats) / floor
    row["datamove_alloc"] = _events(ours_alloc, repeats) / alloc_floor
    row["bit_equal"] = bool(torch.equal(out.contiguous().view(torch.uint8), expected.contiguous().view(torch.uint8)))
    if "torch" in peers:
        row["torch"] = _events(lambda: peer_fn(peer_input), repeats) / alloc_floor
    if "torch.compile" in peers and case.name != "small":
        try:
            compiled = torch.compile(peer_fn)
            compiled(peer_input)
            row["torch.compile"] = _events(lambda: compiled(peer_input), repeats) / alloc_floor
        except Exception as exc:  # pragma: no cover - a compiler failure is reported, not fatal
            row["torch.compile"] = None
            row["torch.compile_error"] = f"{type(exc).__name__}: {exc}"[:200]
    if "cupy" in peers and case.layout == "nchw" and case.dtype != "complex128":
        try:
            import cupy  # pyright: ignore[reportMissingImports]  # a GPU peer, installed only there

            x = cupy.from_dlpack(peer_input)
            fn = _idiom(cupy, case, lambda y, o: cupy.transpose(y, o), lambda x, lo, hi: cupy.pad(x, list(zip(lo, hi))))
            row["cupy"] = _events(lambda: cupy.ascontiguousarray(fn(x)), repeats) / alloc_floor
        except ImportError:
            pass
    jax_peers = {"jax", "datamove jax"} & set(peers)
    if jax_peers and case.layout == "nchw" and case.dtype != "complex128":  # JAX has no complex128 without x64
        try:
            import jax
            import jax.numpy as jnp

            x = jax.device_put(jnp.asarray(data.cpu().numpy()))
            if "jax" in jax_peers:
                fn = jax.jit(_idiom(jnp, case, lambda y, o: jnp.transpose(y, o), lambda x, lo, hi: jnp.pad(x, list(zip(lo, hi)))))
                row["jax"] = _wall(lambda: fn(x).block_until_ready(), repeats) / alloc_floor
            if "datamove jax" in jax_peers:  # the Pallas engine, forced: the kernel at every size
                ours_jax = jax.jit(lambda y: op(y, *case.args, engine="pallas"))
                got = ours_jax(x)
                row["datamove jax"] = _wall(lambda: ours_jax(x).block_until_ready(), repeats) / alloc_floor
                row["bit_equal"] = row["bit_equal"] and (
                    jax.device_get(got).tobytes() == expected.contiguous().cpu().numpy().tobytes())
                del got
            del x
        except ImportError:
            pass
    # per call on a small tensor: wall time is host time; "kernel" (engine="triton") is the host cost of one
    # launch of our kernel, which sets triton_engine.TRITON_MIN_BYTES
    row["small_us"] = {"datamove": _wall(ours_alloc, repeats) * 1e6, "torch": _wall(lambda: peer_fn(peer_input), repeats) * 1e6,
                       "copy": _wall(lambda: raw.clone(), repeats) * 1e6,
                       "kernel": _wall(lambda: op(data, *case.args, engine="triton"), repeats) * 1e6} if case.name == "small" else None
    del data, raw, out, expected, copy_dst
    torch.cuda.empty_cache()
    return row


def table(rows: Sequence[Dict[str, Any]], peers: Sequence[str]) -> str:
    head = ["case", "datamove out=", "datamove", *peers, "bit-equal"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["case"], format_ratio(r.get("datamove")), format_ratio(r.get("datamove_alloc"))]
        cells += [format_ratio(r.get(p)) for p in peers]
        cells.append("yes" if r.get("bit_equal") else "NO")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None, parser_class: Any = argparse.ArgumentParser) -> int:
    parser = parser_class(prog="datamove bench --device cuda", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    parser.add_argument("--json", default="bench-results-cuda.json")
    parser.add_argument("--peers", default=",".join(GPU_PEERS))
    parser.add_argument("--only", default="")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import torch

    if not torch.cuda.is_available():
        print("datamove bench --device cuda: no CUDA device", file=sys.stderr)
        return 2
    peers = [p for p in args.peers.split(",") if p]
    rows = []
    cases = [c for c in suite("quick" if args.quick else "full") if args.only in c.label]
    for i, case in enumerate(cases, 1):
        print(f"[{i}/{len(cases)}] {case.label}", file=sys.stderr, flush=True)
        rows.append(run_case(case, peers, args.repeats))
    device = torch.cuda.get_device_name()
    print(f"datamove GPU benchmark: median time / device copy of the same bytes ({device}, torch {torch.__version__})")
    print(table(rows, peers))
    for r in rows:
        if r.get("small_us"):
            print(f"{r['case']}: per call datamove {r['small_us']['datamove']:.1f} us, "
                  f"torch {r['small_us']['torch']:.1f} us, a plain copy {r['small_us']['copy']:.1f} us, "
                  f"our kernel forced (engine='triton': its host cost) {r['small_us']['kernel']:.1f} us")
    with open(args.json, "w") as f:
        json.dump({"device": device, "torch": torch.__version__, "python": platform.python_version(), "rows": rows}, f, indent=1)
    return 0
