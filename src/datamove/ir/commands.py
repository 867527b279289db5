"""The IR commands of ``datamove``: ``check MODEL.xml`` and ``run MODEL.xml -i NAME=FILE.npy -o OUT.npz``.

:mod:`datamove.cli` wires them in; the logic is here. Exit statuses of
``check``: 0 when every recorded shape agrees, 1 when any disagrees (or a layer
breaks its operation's rules), 2 when the files cannot be read or are refused.

>>> main = __import__("datamove.cli", fromlist=["main"]).main
>>> main(["check", "examples/ir/space_to_depth.xml"])
model 'space_to_depth' (examples/ir/space_to_depth.xml): 3 layers, 3 inferred, 0 opaque
OK: every recorded shape agrees with the inferred one
0
"""

from __future__ import annotations

import argparse
import os
from typing import Any, Dict, List, Sequence

from ..cli import CommandError, _load, format_shape
from ..errors import DataMoveError

__all__ = ["add_check_parser", "build_run_parser", "is_model_run", "check_command", "run_command"]

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
shape must fit the Parameter. The outputs are saved to OUT.npz, one array per
Result, named by the Result's tensor name (OpenVINO's output name). The model
may contain only Parameter, Const, Convert, BatchToSpace, SpaceToBatch,
SpaceToDepth, DepthToSpace and Result layers.

example:
  datamove run examples/ir/space_to_depth.xml -i data=image.npy -o out.npz
"""

_OPTIONS_WITH_VALUES = {"-i", "--input", "-o", "--output", "--bin", "--engine", "--block-shape", "--crops-begin",
                        "--crops-end", "--pads-begin", "--pads-end", "--mode", "--block-size"}
_OPERATION_NAMES = {"batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space",
                    "BatchToSpace", "SpaceToBatch", "SpaceToDepth", "DepthToSpace"}


def is_model_run(argv: Sequence[str]) -> bool:
    """Is ``argv`` the ``run MODEL.xml ...`` form (not ``run OP IN.npy OUT.npy``)?

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


def build_run_parser(prog: str, parser_class: Any) -> argparse.ArgumentParser:
    """The parser of ``datamove run MODEL.xml -i NAME=FILE.npy ... -o OUT.npz``."""
    run = parser_class(
        prog=f"{prog} run", formatter_class=argparse.RawDescriptionHelpFormatter, epilog=_RUN_EPILOG,
        description="Run an OpenVINO IR model made of the four operations on .npy inputs; save the outputs as .npz.",
    )
    run.add_argument("model", metavar="MODEL.xml", help="the IR's .xml file")
    run.add_argument("-i", "--input", action="append", default=[], metavar="NAME=FILE.npy",
                     help="a Parameter's input (repeat for each Parameter)")
    run.add_argument("-o", "--output", required=True, metavar="OUT.npz", help="where to save the outputs")
    run.add_argument("--bin", metavar="FILE", help="the weights (default: MODEL.bin)")
    run.add_argument("--engine", default="auto", metavar="NAME", help="engine executing the operations")
    run.set_defaults(handler=run_command, command="run")
    return run


def _read(args: argparse.Namespace) -> Any:
    from . import read_model

    try:
        return read_model(args.model, args.bin)
    except DataMoveError as exc:
        raise CommandError(str(exc)) from None


def check_command(args: argparse.Namespace) -> int:
    """``datamove check``: print the report; 0 when it is OK, else 1."""
    report = _read(args).check()
    print(report)
    return 0 if report.ok else 1


def _save_npz(file: Any, arrays: Dict[str, Any]) -> None:
    """What ``np.savez`` writes, for any names (``np.savez(file, **arrays)`` refuses the name "file")."""
    import zipfile

    import numpy as np

    with zipfile.ZipFile(file, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in arrays.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(array), allow_pickle=False)


def run_command(args: argparse.Namespace) -> int:
    """``datamove run MODEL.xml``: load the inputs, run, save an .npz, print one line per output."""
    model = _read(args)
    inputs: Dict[str, Any] = {}
    for item in args.input:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise CommandError(f"-i {item!r}: write NAME=FILE.npy")
        if name in inputs:
            raise CommandError(f"-i {name}=...: given twice")
        inputs[name] = _load(path)
    try:
        outputs = model.run(inputs, engine=args.engine)
    except (DataMoveError, TypeError) as exc:
        raise CommandError(str(exc)) from None
    except MemoryError:
        raise CommandError("not enough memory for the model's outputs") from None
    lines: List[str] = [f"{name}: {format_shape(array.shape)} {array.dtype}" for name, array in outputs.items()]
    inputs.clear()  # unmaps the inputs, one of which may be about to be overwritten
    try:
        with open(args.output, "wb") as file:  # np.savez(path) would append ".npz" to other names
            try:
                _save_npz(file, outputs)
            except BaseException:
                file.close()
                os.remove(args.output)
                raise
    except OSError as exc:
        raise CommandError(f"cannot write {args.output}: {exc.strerror or exc}") from None
    print(f"{args.model} -> {args.output}: " + ", ".join(lines))
    return 0
