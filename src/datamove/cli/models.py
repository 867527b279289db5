"""The commands on IR models: ``check``, ``inspect``, ``run-model MODEL.xml -i NAME=FILE.npy -o OUT.npz`` and ``verify``.

:mod:`datamove.cli.app` wires them in; the logic is here. Exit statuses of
``check``: 0 when every recorded shape agrees, 1 when any disagrees (or a layer
breaks its operation's rules), 2 when the files cannot be read or are refused.

>>> main = __import__("datamove.cli.app", fromlist=["main"]).main
>>> main(["check", "examples/ir/space_to_depth.xml"])
model 'space_to_depth' (examples/ir/space_to_depth.xml): 3 layers, 3 inferred, 0 opaque
OK: every recorded shape agrees with the inferred one
0
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from typing import Any, Dict, List, Optional, Sequence

from .. import opset
from .common import CommandError, add_engine_option, add_model_arguments, check_target, load_inputs, write_file
from ..rules.dims import format_shape
from ..errors import DataMoveError, quote, show

__all__ = ["add_check_parser", "add_run_model_parser", "is_model_run", "check_command", "run_command",
           "inspect_command", "inspect_model"]

_CHECK_EPILOG = """\
Every layer's output shape is inferred (BatchToSpace, SpaceToBatch,
SpaceToDepth, DepthToSpace through datamove.shapes; Parameter, Const, Convert,
Result) and compared with the dims recorded in the IR. Layers of other types
are opaque: their recorded shapes are trusted. OpenVINO records an interval or
unknown dim of a port as -1, so -1 agrees with any dim that is not static.

exit status: 0 all agree, 1 a disagreement or an invalid layer, 2 the files
cannot be read or are refused (unsafe XML, a Const past the end of the .bin, ...)

example:
  datamove check examples/ir/batch_to_space_2d_wrong.xml
"""

_RUN_EPILOG = """\
Each -i gives a Parameter's array (by its name) as a .npy file; its dtype and
shape must fit the Parameter ('datamove inspect MODEL.xml' lists them). The
outputs are saved to OUT.npz, one array per Result, named by the Result's
tensor name (OpenVINO's output name); or, when -o names a folder (an existing
one, or a name ending in /), as FOLDER/NAME.npy files that the operations
write in place as memory maps, so large outputs are never held in memory.
The model may contain only Parameter, Const, Convert, BatchToSpace,
SpaceToBatch, SpaceToDepth, DepthToSpace and Result layers.

A run over half a second shows its progress on stderr when that is a
terminal (--progress: always; --quiet: never): the bytes the layers have
written of those they will write in all, and the time left at that pace.

examples:
  datamove run-model examples/ir/space_to_depth.xml -i data=image.npy -o out.npz
  datamove run-model model.xml -i data=big.npy -o outputs/ --max-bytes 8G
"""

#: ``datamove run-model`` refuses to compute more than this many bytes of arrays in all
#: (or DEFAULT_MAX_FACTOR times the inputs' bytes, if more), unless --max-bytes says otherwise:
#: a 2 KB IR with a 16-byte input can ask SpaceToBatch for gigabytes of padding.
DEFAULT_MAX_BYTES = 256 * 2**20
DEFAULT_MAX_FACTOR = 16
#: The longest output name saved as an .npz member (a zip name field holds 65,535 bytes).
MAX_OUTPUT_NAME_BYTES = 4096
_BYTES = re.compile(r"([0-9]{1,15})\s*([KMGT](?:i?B)?)?", re.IGNORECASE)

_OPTIONS_WITH_VALUES = {"-i", "--input", "-o", "--output", "--bin", "--engine", "--max-bytes", "--block-shape", "--crops-begin",
                        "--crops-end", "--pads-begin", "--pads-end", "--mode", "--block-size"}
_OPERATION_NAMES = set(opset.NAMES) | set(opset.OPENVINO_TYPES)


def is_model_run(argv: Sequence[str]) -> bool:
    """Is ``argv`` the former ``run MODEL.xml ...`` spelling of ``run-model`` (not ``run OP IN.npy OUT.npy``)?

    The first positional argument after ``run`` decides: a name ending in
    ``.xml``, or an existing file that is not an operation's name.

    >>> is_model_run(["run", "model.xml", "-i", "x=x.npy", "-o", "y.npz"]), is_model_run(["run", "batch_to_space"])
    (True, False)
    """
    if not argv or argv[0] != "run":
        return False
    skip = False
    for token in argv[1:]:
        if skip:
            skip = False
            continue
        if token.startswith("-"):
            skip = "=" not in token and token in _OPTIONS_WITH_VALUES
            continue
        return token.lower().endswith(".xml") or (token not in _OPERATION_NAMES and os.path.isfile(token))
    return False


def add_check_parser(commands: Any, parser_class: Any) -> None:
    """Add ``check`` to the subcommands of the ``datamove`` parser."""
    check = commands.add_parser(
        "check", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_CHECK_EPILOG,
        help="check the recorded shapes of an OpenVINO IR model against datamove's shape inference",
        description="Read MODEL.xml safely, infer every layer's output shape and report where the IR disagrees.",
    )
    check.add_argument("model", metavar="MODEL.xml", help="the IR's .xml file")
    check.add_argument("--bin", metavar="FILE", help="its weights (default: MODEL.bin)")
    check.set_defaults(handler=check_command)

    inspect = commands.add_parser(
        "inspect", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_INSPECT_EPILOG,
        help="list an OpenVINO IR's inputs and outputs (names, shapes, element types) and its layers by type",
        description="Read MODEL.xml safely and print the inputs 'datamove run-model' expects, "
                    "the outputs it saves and the layers by type.",
    )
    inspect.add_argument("model", metavar="MODEL.xml", help="the IR's .xml file")
    inspect.add_argument("--bin", metavar="FILE", help="its weights (default: MODEL.bin)")
    inspect.set_defaults(handler=inspect_command)


_INSPECT_EPILOG = """\
The inputs are what 'datamove run-model MODEL.xml -i NAME=FILE.npy' expects: one
.npy file per Parameter, of its element type (as a NumPy dtype) and of a
shape that fits its dims (? any size, 2..8 an interval). The outputs' shapes
are inferred with datamove.shapes (through opaque layers, as recorded).

example:
  datamove inspect examples/ir/space_to_depth.xml
"""


def _element_types(model: Any) -> Dict[int, str]:
    """Each layer's output element type: a Parameter's or Const's own, a Convert's destination, else its input's."""
    types: Dict[int, str] = {}
    for layer in model.layers:
        if layer.type in ("Parameter", "Const"):
            types[layer.id] = layer.attributes.get("element_type", "?")
        elif layer.type == "Convert":
            types[layer.id] = layer.attributes.get("destination_type", "?")
        elif layer.inputs:
            source, _ = model._source(layer, 0)
            types[layer.id] = types.get(source.id, "?")
        else:
            types[layer.id] = "?"
    return types


def _typed(element_type: str) -> str:
    from ..ir.model import ELEMENT_TYPES

    import numpy as np

    numpy_name = ELEMENT_TYPES.get(element_type, (None, None))[0]
    if not numpy_name:
        return quote(element_type)[1:-1]
    try:
        numpy_name = np.dtype(numpy_name).name
    except TypeError:  # bfloat16 without ml_dtypes
        pass
    return f"{element_type} ({numpy_name})"


def inspect_model(model: Any) -> List[str]:
    """The lines of ``datamove inspect``: the inputs ``run`` expects, the outputs it gives, the layers by type.

    >>> from datamove.ir import read_model
    >>> print("\\n".join(inspect_model(read_model("examples/ir/space_to_depth.xml"))))
    model 'space_to_depth' (examples/ir/space_to_depth.xml): IR v11, 3 layers
    inputs (-i NAME=FILE.npy):
      data: [5, 7, 4, 6] f32 (float32)
    outputs (in the .npz):
      output: [5, 28, 2, 3] f32 (float32)
    layers: 1 Parameter, 1 SpaceToDepth, 1 Result
    """
    from collections import Counter

    report = model.check()
    types = _element_types(model)
    lines = [f"model {quote(model.name)} ({show(model.xml_path)}): IR v{model.version}, {len(model.layers)} layers",
             "inputs (-i NAME=FILE.npy):"]
    for layer in model.parameters:
        names = [n for n in layer.outputs[0].names if n != layer.name][:3] if layer.outputs else []
        also = f" (also {', '.join(map(quote, names))})" if names else ""
        lines.append(f"  {quote(layer.name)[1:-1]}: {format_shape(layer.shape)} {_typed(types[layer.id])}{also}")
    if not model.parameters:
        lines.append("  (none)")
    lines.append("outputs (in the .npz):")
    for name, layer in model.output_names().items():
        source, index = model._source(layer, 0)
        shape = report.inferred.get((source.id, source.outputs[index].id), source.outputs[index].shape)
        lines.append(f"  {quote(name)[1:-1]}: {format_shape(shape)} {_typed(types[source.id])}")
    counts = Counter(layer.type for layer in model.layers)
    lines.append("layers: " + ", ".join(f"{count} {quote(kind)[1:-1]}" for kind, count in counts.items()))
    from ..ir.model import RUNNABLE_TYPES

    others = sorted(kind for kind in counts if kind not in RUNNABLE_TYPES)
    if others:
        lines.append(f"'datamove run' cannot run it (layers of other types: {', '.join(quote(k)[1:-1] for k in others[:10])}"
                     f"{', ...' if len(others) > 10 else ''}); 'datamove check' still checks its shapes")
    if not report.ok:
        lines.append(f"'datamove check' reports {len(report.mismatches)} mismatch(es) and "
                     f"{len(report.invalid)} invalid layer(s)")
    return lines


def inspect_command(args: argparse.Namespace) -> int:
    """``datamove inspect``: print what the model takes and gives."""
    model = _read(args)
    try:
        lines = inspect_model(model)
    except DataMoveError as exc:
        raise CommandError(str(exc)) from None
    print("\n".join(lines))
    return 0


def add_run_model_parser(commands: Any) -> None:
    """Add ``run-model MODEL.xml -i NAME=FILE.npy ... -o OUT.npz`` to the subcommands of the ``datamove`` parser."""
    run = commands.add_parser(
        "run-model", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_RUN_EPILOG,
        help="run an OpenVINO IR model made of the four operations on .npy inputs",
        description="Run an OpenVINO IR model made of the four operations on .npy inputs; save the outputs as .npz "
                    "(or as .npy files in a folder).",
    )
    add_model_arguments(run)
    run.add_argument("-o", "--output", required=True, metavar="OUT.npz",
                     help="where to save the outputs: an .npz file, or a folder (an existing one, or a name ending "
                          "in /) for one NAME.npy per output, each written in place as a memory map "
                          "(large outputs are never held in memory)")
    run.add_argument("--bin", metavar="FILE", help="the weights (default: MODEL.bin)")
    add_engine_option(run, "the engine executing the operations")
    shown = run.add_mutually_exclusive_group()
    shown.add_argument("--progress", action="store_true",
                       help="show the progress even when stderr is not a terminal (for runs over half a second)")
    shown.add_argument("-q", "--quiet", action="store_true",
                       help="no progress (by default it shows on a terminal, for runs over half a second)")
    run.add_argument("--max-bytes", metavar="SIZE",
                     help="refuse to compute more than SIZE bytes of arrays in all (e.g. 512M, 4G, none); "
                          f"default: {DEFAULT_MAX_FACTOR} times the inputs' bytes, at least "
                          f"{DEFAULT_MAX_BYTES // 2**20} MiB")
    run.set_defaults(handler=run_command)


def _read(args: argparse.Namespace) -> Any:
    from ..ir import read_model

    try:
        return read_model(args.model, args.bin)
    except DataMoveError as exc:
        raise CommandError(str(exc)) from None


def check_command(args: argparse.Namespace) -> int:
    """``datamove check``: print the report; 0 when it is OK, else 1."""
    model = _read(args)
    try:
        report = model.check()
    except DataMoveError as exc:  # a Const's bytes that cannot be read (--bin a directory, a file that changed)
        raise CommandError(str(exc)) from None
    print(report)
    return 0 if report.ok else 1


def _save_npz(file: Any, arrays: Dict[str, Any]) -> None:
    """What ``np.savez`` writes, for members named ``NAME.npy`` (``np.savez(file, **arrays)`` refuses "file")."""
    import zipfile

    import numpy as np

    with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(name, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def _member_name(name: str) -> str:
    """The .npz member for output ``name``; names that no archive tool could extract safely are refused."""
    problem = None
    if not name:
        problem = "it is empty"
    elif len(name.encode("utf-8", "surrogatepass")) > MAX_OUTPUT_NAME_BYTES:
        problem = f"it is longer than {MAX_OUTPUT_NAME_BYTES} bytes"
    elif any(ord(c) < 32 or ord(c) == 127 for c in name):
        problem = "it holds control characters"
    elif "\\" in name or name.startswith("/") or any(part in ("", ".", "..") for part in name.split("/")):
        problem = "it is not a relative path without '.', '..' or empty parts (an archive member's rule)"
    if problem:
        raise CommandError(f"output {quote(name)} cannot be saved in an .npz: {problem}")
    return name + ".npy"


def parse_bytes(text: str) -> Optional[int]:
    """``--max-bytes``: bytes, with an optional K, M, G or T suffix (powers of 1024); ``none`` for no bound.

    >>> parse_bytes("1024"), parse_bytes("64M"), parse_bytes("2GiB"), parse_bytes("none")
    (1024, 67108864, 2147483648, None)
    """
    value = text.strip()
    if value.lower() == "none":
        return None
    match = _BYTES.fullmatch(value)
    if not match:
        raise CommandError(f"--max-bytes: {quote(text, 40)} is not a size (write e.g. 1000000, 512M, 4G or none)")
    number, unit = match.groups()
    scale: int = 1024 ** " KMGT".index((unit or " ")[0].upper())
    return int(number) * scale


class _NpyFolder:
    """The outputs as ``FOLDER/NAME.npy`` memory maps, written in place by the operations.

    Each is a temporary file beside its target, its blocks reserved up front
    (a full disk is an error then, never a crash while writing through the
    map), renamed into place only when every output is complete.
    """

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.files: Dict[str, Any] = {}  # name -> (temporary, final, array)

    def allocate(self, name: str, shape: Any, dtype: Any) -> Any:
        import tempfile

        import numpy as np

        from .files import check_writable_target

        final = os.path.join(self.folder, _member_name(name))
        os.makedirs(os.path.dirname(final), exist_ok=True)  # a name "a/b" is the file a/b.npy, as in an .npz
        check_writable_target(final)
        descriptor, temporary = tempfile.mkstemp(prefix=".datamove-", suffix=".npy.tmp", dir=os.path.dirname(final))
        os.close(descriptor)
        self.files[name] = (temporary, final, None)
        if 0 in shape:  # NumPy cannot map an empty file: a small array, saved at commit
            array = np.empty(shape, dtype)
        else:
            array = np.lib.format.open_memmap(temporary, mode="w+", dtype=dtype, shape=shape)
            with open(temporary, "r+b") as file:
                size = os.fstat(file.fileno()).st_size
                if hasattr(os, "posix_fallocate"):
                    os.posix_fallocate(file.fileno(), 0, size)
        self.files[name] = (temporary, final, array)
        return array

    def commit(self) -> None:
        import numpy as np

        for temporary, final, array in self.files.values():
            if isinstance(array, np.memmap):
                array.flush()
            else:
                with open(temporary, "wb") as file:
                    np.save(file, array, allow_pickle=False)
            with open(temporary, "rb") as file:
                os.fsync(file.fileno())
        for temporary, final, _ in self.files.values():
            os.replace(temporary, final)
        self.files.clear()

    def abort(self) -> None:
        for temporary, _, _ in self.files.values():
            try:
                os.remove(temporary)
            except OSError:
                pass
        self.files.clear()


def format_bytes(count: int) -> str:
    """A byte count as people read it, in powers of 1024.

    >>> format_bytes(512), format_bytes(3 << 20), format_bytes(1536 << 20)
    ('512 B', '3.0 MiB', '1.5 GiB')
    """
    size, unit = float(count), "B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            break
        size /= 1024
    return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"


def format_duration(seconds: float) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour), rounded up: a time left never reads 0:00 before the end.

    >>> format_duration(4.2), format_duration(125), format_duration(3725)
    ('0:05', '2:05', '1:02:05')
    """
    total = math.ceil(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


class _Progress:
    """``[######      ] 32.0 MiB of 128.0 MiB, 0:03 left (SpaceToBatch)`` on stderr, redrawn in place.

    It counts the bytes the layers write (:meth:`datamove.ir.Model.bytes_written`:
    moving bytes is what takes the time), and the time left is the time so far
    at the pace so far. Silent for the first half second, so quick runs print
    nothing; with ``enabled`` False, always silent.
    """

    WIDTH = 24
    #: Seconds of silence first: a run shorter than this prints nothing.
    DELAY = 0.5

    def __init__(self, enabled: bool) -> None:
        import time

        self.enabled, self.start, self.shown, self.clock = enabled, time.monotonic(), False, time.monotonic

    def __call__(self, done: int, total: int, layer: Any) -> None:
        elapsed = self.clock() - self.start
        if not self.enabled or elapsed < self.DELAY:
            return
        if layer is None:
            self.clear()
            return
        bar = "#" * (self.WIDTH * done // total if total else 0)
        left = f"{format_duration(elapsed * (total - done) / done)} left" if done else "time left unknown yet"
        sys.stderr.write(f"\rdatamove run-model: [{bar:<{self.WIDTH}}] {format_bytes(done)} of {format_bytes(total)}, "
                         f"{left} ({quote(layer.type, 30)[1:-1]})\x1b[K")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def _is_folder(path: str) -> bool:
    return path.endswith(os.sep) or path.endswith("/") or os.path.isdir(path)


def run_command(args: argparse.Namespace) -> int:
    """``datamove run-model``: load the inputs, run, save an .npz (or .npy files), print one line per output."""
    max_bytes = parse_bytes(args.max_bytes) if args.max_bytes is not None else None
    folder = _NpyFolder(args.output) if _is_folder(args.output) else None
    if folder is None:
        check_target(args.output)
    model = _read(args)
    inputs = load_inputs(args.input)
    if args.max_bytes is None:
        given = sum(array.nbytes for array in inputs.values())
        max_bytes = max(DEFAULT_MAX_BYTES, DEFAULT_MAX_FACTOR * given)
    members = {_member_name(name): name for name in model.output_names()}
    progress = _Progress(args.progress or (not args.quiet and sys.stderr.isatty()))
    try:
        if folder is not None:
            os.makedirs(args.output, exist_ok=True)
        outputs = model.run(inputs, engine=args.engine, max_bytes=max_bytes, progress=progress,
                            allocate=None if folder is None else folder.allocate)
        if folder is not None:
            folder.commit()
    except (DataMoveError, TypeError) as exc:
        hint = (" (datamove run-model's default bound; raise it with --max-bytes)"
                if args.max_bytes is None and "max_bytes" in str(exc) else "")
        raise CommandError(f"{exc}{hint}") from None
    except MemoryError:
        raise CommandError("not enough memory for the model's outputs") from None
    except OSError as exc:
        raise CommandError(f"cannot write {show(args.output)}: {exc.strerror or exc} (no output file was "
                           "changed)") from None
    finally:
        progress.clear()
        if folder is not None:
            folder.abort()  # after a commit, nothing is left to remove
    # names are checked by _member_name: no control characters
    lines: List[str] = [f"{name}: {format_shape(array.shape)} {array.dtype}" for name, array in outputs.items()]
    if folder is None:
        arrays = {member: outputs[name] for member, name in members.items()}
        # Inputs may be memory-mapped from the output file: the write goes to a new
        # file renamed over it, and the outputs never alias the inputs (Model.run copies).
        write_file(args.output, lambda file: _save_npz(file, arrays))
    print(f"{show(args.model)} -> {show(args.output)}: " + ", ".join(lines))
    return 0


# ----------------------------------------------------------------- verify

_VERIFY_EPILOG = """\
The model runs in OpenVINO (pip install openvino) with every layer OpenVINO's;
the input and output of each BatchToSpace, SpaceToBatch, SpaceToDepth and
DepthToSpace layer are exposed, and each layer is recomputed with datamove from
the input OpenVINO fed it and compared bit for bit (NaNs by their bits). Each
-i gives a Parameter's array (by its name) as a .npy file, as for 'datamove run
MODEL.xml' ('datamove inspect MODEL.xml' lists them).

exit status: 0 every such layer equals datamove's result (or the model has
none), 1 a layer differs, 2 bad input (files, names, shapes, no OpenVINO)

example:
  datamove verify model.xml -i image=image.npy
"""


def add_verify_parser(commands: Any) -> None:
    """Add ``verify`` to the subcommands of the ``datamove`` parser."""
    parser = commands.add_parser(
        "verify", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_VERIFY_EPILOG,
        help="run an OpenVINO IR model in OpenVINO and check its data-movement layers against datamove",
        description="Run MODEL.xml in OpenVINO on .npy inputs and recompute each BatchToSpace, SpaceToBatch, "
                    "SpaceToDepth and DepthToSpace layer with datamove from the input OpenVINO fed it.",
    )
    add_model_arguments(parser)
    parser.add_argument("--bin", metavar="FILE", help="the weights (default: MODEL.bin)")
    parser.add_argument("--device", default="CPU", metavar="NAME", help="the OpenVINO device (default: CPU)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=verify_command)


def verify_command(args: argparse.Namespace) -> int:
    """``datamove verify``: print the report (or its JSON); 0 when every layer is equal, else 1."""
    import json

    from ..ir.verify import verify

    inputs = load_inputs(args.input)
    try:
        report = verify(args.model, inputs, device=args.device, bin_path=args.bin)
    except (DataMoveError, TypeError) as exc:
        raise CommandError(str(exc)) from None
    except MemoryError:
        raise CommandError("not enough memory to run the model and keep its data-movement layers' tensors") \
            from None
    print(json.dumps(report.to_dict(), allow_nan=False) if args.json else report)
    return 0 if report.ok else 1
