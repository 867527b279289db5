"""Which path runs a call on an array that is not a NumPy array: one table, from plain facts about the call.

:func:`route` takes :class:`Facts` (the array's library, the engine asked
for, whether a zero-copy NumPy view of it exists, whether the array-API
engine and the GPU engine can take it, its device and size) and returns the
:class:`Route`: the engine, and whether it runs on the NumPy view. A forced
``engine=`` is checked against the same table, and the message naming the
engines that can take the array comes from it. It imports nothing: the
facts are gathered by :mod:`datamove.dispatch.foreign`, which then follows the route.

>>> torch_cpu = Facts("torch.Tensor", "auto", view=True, namespace=True, triton=False, cuda=False, nbytes=1 << 20)
>>> route(torch_cpu)
Route(engine='native', through_view=True)
>>> route(torch_cpu._replace(nbytes=4096)), route(torch_cpu._replace(core=False))   # small; no compiled core
(Route(engine='numpy', through_view=True), Route(engine='numpy', through_view=True))
>>> route(torch_cpu._replace(view=False))          # a tensor that needs a gradient: no view
Route(engine='array_api', through_view=False)
>>> cuda = torch_cpu._replace(view=False, triton=True, cuda=True, nbytes=TRITON_MIN_BYTES)
>>> route(cuda), route(cuda._replace(nbytes=1 << 20))
(Route(engine='triton', through_view=False), Route(engine='array_api', through_view=False))
>>> own_ops(torch_cpu._replace(nbytes=4096)), own_ops(cuda._replace(nbytes=1 << 20))   # PyTorch's ops
(True, True)
>>> route(Facts("tf.Tensor", "auto", view=False, namespace=False, triton=False, cuda=False, nbytes=0))
Route(engine='tensorflow', through_view=False)
>>> jax_gpu = Facts("jax.Array", "auto", view=False, namespace=True, triton=False, cuda=True,
...                 nbytes=PALLAS_MIN_BYTES, pallas=True)
>>> route(jax_gpu), route(jax_gpu._replace(nbytes=4096)), route(jax_gpu._replace(cuda=False, engine="pallas"))
(Route(engine='pallas', through_view=False), Route(engine='array_api', through_view=False), Route(engine='pallas', through_view=False))
>>> route(torch_cpu._replace(engine="triton"))
Traceback (most recent call last):
    ...
datamove.errors.DataMoveError: engine 'triton' cannot take this torch.Tensor (it takes PyTorch and CuPy arrays on a CUDA device, and CPU tensors under TRITON_INTERPRET=1, with triton installed; strided tensors without a lazy conjugate or negative bit: call resolve_conj() / resolve_neg() first); engines that can: ['numpy', 'native', 'array_api']
"""

from __future__ import annotations

from typing import List, NamedTuple, Tuple

from ..errors import DataMoveError

__all__ = ["Facts", "Route", "route", "able", "own_ops", "tensor_repeats", "repeats_on_core", "two_step", "first_on_core",
           "ENGINES",
           "NATIVE_MIN_BYTES", "REPEAT_NATIVE_MIN_BYTES", "TORCH_REPEAT_NATIVE_MIN_BYTES", "TEMPORARY_MAX_BYTES",
           "TRITON_MIN_BYTES", "PALLAS_MIN_BYTES"]

#: Every engine name, in the order ``"auto"`` tries them.
ENGINES = ("numpy", "native", "array_api", "triton", "pallas")
#: From this many input bytes a NumPy array (or view) runs on the compiled core, below it on a strided
#: ``np.copyto``, which costs less than lowering and the call.
NATIVE_MIN_BYTES = 1 << 17
#: From this many input bytes a NumPy call with ``engine="auto"`` that repeats (its recipe kept,
#: :mod:`datamove.dispatch.recipes`) runs on the compiled core from its second call, below
#: ``NATIVE_MIN_BYTES`` too: its program made once, the core's run costs less than NumPy's strided copy,
#: and from its third call the core runs it alone (``src/native/runtime/repeat.cpp``), which pays at every
#: size. Float32, repeated, timeit, same process, in turns (2-core AMD EPYC), NumPy's way -> the core's:
#: SpaceToDepth 16 bytes 7.0 -> 1.9-2.0 us into a new array and 8.5-8.6 -> 1.3 us into out=; 1 KiB 5.6-5.8
#: -> 2.1-2.2 and 9.7-9.8 -> 1.5 us (the NumPy idiom: 2.1 and 3.6 us); BatchToSpace with crops of 1 KiB
#: 10.4-10.5 -> 4.7-4.8 us.
REPEAT_NATIVE_MIN_BYTES = 1
#: The same for a PyTorch CPU tensor (contiguous format), whose repeats from the third call run on the core
#: from the tensor's address (``_native.at``): float32, in turns (2-core AMD EPYC), before -> after: 256
#: bytes, SpaceToDepth depth_first (pixel_unshuffle, 6.1-6.6 us alone) 12.3 -> 8.2 us, blocks_first
#: (``as_strided(...).clone()``) 30.3 -> 7.6 us; so from any size.
TORCH_REPEAT_NATIVE_MIN_BYTES = 1
#: The largest temporary a small call's path may hold beside its result: the padded input of SpaceToBatch
#: (the result's size, which a small input's pads can make any size) or BatchToSpace's uncropped result.
TEMPORARY_MAX_BYTES = 1 << 20
#: From this many bytes a CUDA array runs on the GPU kernel: below it a launch's host cost (about 55 us,
#: half of it Triton's launcher) is more than the kernel saves over PyTorch's own ops.
TRITON_MIN_BYTES = 64 << 20
#: From this many bytes a JAX array on a GPU runs on the Pallas kernel, below it on XLA's own transpose
#: (the array-API engine). Provisional, not measured: no GPU was lent to the work that added the kernel;
#: set it from the JAX columns of ``datamove bench --device cuda``.
PALLAS_MIN_BYTES = 4 << 20


class Facts(NamedTuple):
    """What decides a call's path."""

    #: The array's kind as messages name it: ``"torch.Tensor"``, ``"jax.Array"``, ``"dask.array.Array"``, ...
    kind: str
    #: The engine asked for: ``"auto"`` or one of ``ENGINES``.
    engine: str
    #: A NumPy array over the data's memory exists (CPU, no gradient needed, not lazy): the NumPy engines can run.
    view: bool
    #: ``array_api_compat`` knows the array's namespace: the array-API engine can run.
    namespace: bool
    #: The GPU engine can take it (with Triton installed: a CUDA array, or a CPU tensor under its interpreter).
    triton: bool
    #: The array is on a CUDA device.
    cuda: bool
    #: The input's size in bytes.
    nbytes: int
    #: ``out=`` is absent, or writable through a NumPy view, or not a PyTorch tensor.
    out_view: bool = True
    #: Items are plain bits (not object references): the compiled core can copy them.
    plain: bool = True
    #: The Pallas engine can take it (a JAX array of whole-byte items on one device; off a GPU, interpreted).
    pallas: bool = False
    #: The compiled core is loaded (an install without a C++ compiler has none: ``"auto"`` runs on NumPy).
    core: bool = True


class Route(NamedTuple):
    """The path of a call."""

    engine: str
    #: The engine runs on NumPy views of the arrays' memory (zero copy), not on the arrays themselves.
    through_view: bool


# Kinds that only their own framework's ops take (datamove.engines.tensorflow_engine), so that graphs, XLA
# and gradients work; no engine of ENGINES can be forced on them.
_OWN_GRAPH = {"tf.Tensor": "tensorflow", "tf.Variable": "tensorflow"}

# Kinds whose NumPy view runs on the NumPy engines even where the array-API engine could take them.
_VIEWED = ("numpy.ndarray", "torch.Tensor")

_TRITON_TAKES = ("it takes PyTorch and CuPy arrays on a CUDA device, and CPU tensors under TRITON_INTERPRET=1, "
                 "with triton installed; strided tensors without a lazy conjugate or negative bit: "
                 "call resolve_conj() / resolve_neg() first")
_PALLAS_TAKES = ("it takes JAX arrays of whole-byte dtypes, fewer than 2**31 words, on one device; "
                 "off a GPU in Pallas' interpreter")


def able(facts: Facts) -> List[str]:
    """The engines that can take the array, in ``ENGINES`` order."""
    can = {"numpy": facts.view, "native": facts.view and facts.plain, "array_api": facts.namespace,
           "triton": facts.triton, "pallas": facts.pallas}
    return [name for name in ENGINES if can[name]]


def route(facts: Facts) -> Route:
    """The path of a call with ``facts``; a DataMoveError when no engine (or not the one asked for) can take it."""
    own = _OWN_GRAPH.get(facts.kind)
    if own is not None:
        if facts.engine != "auto":
            raise DataMoveError(f"engine {facts.engine!r} cannot take a {facts.kind}: TensorFlow tensors run on "
                                "TensorFlow's own ops, so that tf.function, XLA and gradients work; use engine='auto'")
        return Route(own, False)
    if facts.engine == "auto":
        if facts.triton and facts.cuda and facts.nbytes >= TRITON_MIN_BYTES:
            return Route("triton", False)  # one fused kernel
        if facts.pallas and facts.cuda and facts.nbytes >= PALLAS_MIN_BYTES:
            return Route("pallas", False)  # the same, in Pallas, for JAX
        if facts.view and facts.out_view and (facts.kind in _VIEWED or not facts.namespace):
            native = facts.nbytes >= NATIVE_MIN_BYTES and facts.plain and facts.core
            return Route("native" if native else "numpy", True)
        if facts.namespace:
            return Route("array_api", False)
        raise DataMoveError(f"no engine of this version can take a {facts.kind}; convert it with numpy.asarray")
    names = able(facts)
    if facts.engine not in names:
        if facts.kind == "numpy.ndarray":  # its dtype decides (objects, or outside the standard's)
            missing = "cannot take a numpy.ndarray"
        else:
            takes = {"triton": _TRITON_TAKES, "pallas": _PALLAS_TAKES}.get(facts.engine)
            missing = f"cannot take this {facts.kind}" + (f" ({takes})" if takes else "")
        raise DataMoveError(f"engine {facts.engine!r} {missing}; engines that can: {names}")
    return Route(facts.engine, facts.engine in ("numpy", "native"))


def tensor_repeats(facts: Facts, small_result: bool, own_op_takes: bool, core_takes: bool) -> Tuple[bool, bool]:
    """How a kept PyTorch recipe repeats a call without ``out=``: ``(own, core)``. ``own``: by PyTorch's own
    op or formula straight away (:func:`own_ops`, where its temporary is small and PyTorch takes the tensor
    as it is: ``own_op_takes``). ``core``: from its third call by the compiled core from the tensor's address,
    where its NumPy view exists, the core is loaded and the tensor is one it reads (``core_takes``), from
    ``TORCH_REPEAT_NATIVE_MIN_BYTES``, wherever the call runs on PyTorch's op or the core's engine anyway.

    >>> tensor_repeats(Facts("torch.Tensor", "auto", True, True, False, False, nbytes=4096), True, True, True)
    (True, True)
    """
    own = own_ops(facts) and small_result and own_op_takes
    core = (core_takes and facts.view and facts.core and facts.nbytes >= TORCH_REPEAT_NATIVE_MIN_BYTES
            and (own or route(facts).engine == "native"))
    return own, core


def repeats_on_core(facts: Facts) -> bool:
    """Whether a NumPy call that the table gave the NumPy engine, and that keeps its recipe, moves to the
    compiled core from its second call (``REPEAT_NATIVE_MIN_BYTES``: its lowering paid once, the core's run
    costs less than NumPy's strided copy, and from its third call the core repeats it alone).

    >>> repeats_on_core(Facts("numpy.ndarray", "auto", True, True, False, False, nbytes=64))
    True
    """
    return (facts.kind == "numpy.ndarray" and facts.engine == "auto" and facts.plain and facts.core
            and facts.nbytes >= REPEAT_NATIVE_MIN_BYTES)


def first_on_core(engine: object, ndarrays: bool) -> bool:
    """Whether a NumPy call's first call of a layout goes to the compiled core in one C call, planned, lowered
    and run there, with no recipe made (``datamove.dispatch.numpy_calls``: the key's next call makes it, where the core does not
    repeat it): with ``engine`` "auto" or "native", where data and any ``out=`` are exact ndarrays
    (``ndarrays``; subclasses keep their own semantics, and the core reads only ndarrays), at every size: a new
    small shape's first call is then 7 us against the idiom's 4 (SpaceToDepth, 60 shapes; the recipe's way
    took 45-156 us), and a large one's Python share 0.05-0.1 ms.

    >>> first_on_core("auto", True), first_on_core("numpy", True), first_on_core("native", False)
    (True, False, False)
    """
    return ndarrays and (engine == "auto" or engine == "native")


def two_step(facts: Facts, temporary_bytes: int, margins: bool) -> bool:
    """Whether a NumPy SpaceToBatch or BatchToSpace with pads or crops (``margins``) on the NumPy engine pads or
    crops through one temporary of ``temporary_bytes`` (the padded input, the uncropped result) in two copies,
    instead of one NumPy copy per piece: below ``NATIVE_MIN_BYTES``, a temporary up to ``TEMPORARY_MAX_BYTES``.

    >>> two_step(Facts("numpy.ndarray", "numpy", True, True, False, False, nbytes=4096), 8192, True)
    True
    """
    return margins and facts.nbytes < NATIVE_MIN_BYTES and temporary_bytes <= TEMPORARY_MAX_BYTES


def own_ops(facts: Facts) -> bool:
    """Whether a call with ``engine="auto"`` costs less on the array library's own ops than on any engine:
    a PyTorch CPU tensor below ``NATIVE_MIN_BYTES``, a CUDA tensor that the GPU engine does not take
    (``datamove.dispatch.recipes`` then calls ``pixel_shuffle``, a strided ``clone`` or the formula straight away)."""
    if facts.engine != "auto" or facts.kind != "torch.Tensor":
        return False
    if facts.cuda:
        return route(facts).engine != "triton"
    return facts.nbytes < NATIVE_MIN_BYTES
