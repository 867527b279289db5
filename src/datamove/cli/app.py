"""The ``datamove`` command: shape inference and the operations on ``.npy`` files.

Each command is one form with its own ``--help``; the operations' commands
take the operation's name and its parameters as options:

- ``datamove shape OP --shape DIMS [params]`` prints the output shape
  inferred by :mod:`datamove.shapes` (dims may be unknown or intervals);
- ``datamove run OP INPUT.npy OUTPUT.npy [params]`` applies the operation to
  an array saved with :func:`numpy.save` and saves the result;
- ``datamove check MODEL.xml``, ``datamove inspect MODEL.xml`` and ``datamove
  run-model MODEL.xml -i NAME=FILE.npy -o OUT.npz`` check, describe and run an
  OpenVINO IR (:mod:`datamove.cli.models`); ``datamove run MODEL.xml ...``,
  the former spelling of ``run-model``, still works and says so.

Every error prints one line, ``datamove: error: ...``, on stderr and exits
with status 2. This module is not imported by ``import datamove``.

>>> parse_shape("?,4..8,6,..6")
(None, Dim(4, 8), 6, Dim(0, 6))
>>> format_shape((None, dims.Dim(16, 32), 3, dims.Dim(4, None)))
'[?, 16..32, 3, 4..]'
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple

from .. import __version__, ops, opset
from ..rules import dims, shapes
from ..rules.dims import DimLike, format_shape
from .common import CommandError, add_engine_option, check_target, load_npy, save_npy
from ..errors import DataMoveError, quote, show

__all__ = ["main", "build_parser", "parse_shape", "parse_vector", "format_shape"]

PROG = "datamove"

#: Each operation's parameters, in the order of its positional arguments (from :mod:`datamove.opset`).
OPERATIONS: Dict[str, Tuple[str, ...]] = {op.name: op.params for op in opset.OPS.values()}

#: OpenVINO's names of the operations (opset types), accepted for OP too.
OPENVINO_NAMES = {op.openvino_type: op.name for op in opset.OPS.values()}

_VECTORS = ("block_shape", "crops_begin", "crops_end", "pads_begin", "pads_end")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_UNKNOWN_RANK = ("*", "...", "[...]")

Shape = Optional[Tuple[DimLike, ...]]


def _option(param: str) -> str:
    return "--" + param.replace("_", "-")


# ----------------------------------------------------------------- notation


def _strip_brackets(text: str, what: str) -> str:
    """``text`` without surrounding whitespace and an optional ``[...]`` pair."""
    text = text.strip()
    if text.startswith("[") != text.endswith("]"):
        raise CommandError(f"{what}: unbalanced brackets in {text!r}")
    if text.startswith("["):
        text = text[1:-1].strip()
    return text


def _integer(text: str, what: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise CommandError(f"{what}: {quote(text, 40)} is not an integer")
    sign = "-" if text.startswith("-") else ""
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:  # past int64 (and int() refuses more than 4,300 digits)
        raise CommandError(f"{what}: an integer of {len(digits)} digits does not fit in int64")
    return int(sign + digits)


def parse_dim(text: str, what: str = "dim") -> DimLike:
    """One dim of the command-line notation (:func:`datamove.rules.dims.parse_dim`), errors as CommandError.

    >>> parse_dim("3"), parse_dim("?"), parse_dim("2..8")
    (3, None, Dim(2, 8))
    """
    try:
        return dims.parse_dim(text, what)
    except DataMoveError as exc:
        raise CommandError(str(exc)) from None


def parse_shape(text: str, what: str = "--shape") -> Shape:
    """A shape of the command-line notation: comma-separated dims, or ``*`` for an unknown rank.

    Parameters
    ----------
    text : str
        Dims separated by commas, optionally inside ``[ ]`` (so a printed
        shape can be pasted back); ``*``, ``...`` or ``[...]`` for a shape of
        unknown rank; an empty string (or ``[]``) for rank 0.
    what : str
        Where it comes from, for error messages.

    Returns
    -------
    tuple of dims, or None for an unknown rank.

    Raises
    ------
    CommandError
        A dim is not in the notation (see :func:`parse_dim`).

    Examples
    --------
    >>> parse_shape("48,3,3,1,3")
    (48, 3, 3, 1, 3)
    >>> parse_shape("[?, 16..32, 3, 3]")
    (None, Dim(16, 32), 3, 3)
    >>> parse_shape("*") is None, parse_shape("")
    (True, ())
    """
    if text.strip() in _UNKNOWN_RANK:
        return None
    body = _strip_brackets(text, what)
    if not body:
        return ()
    return tuple(parse_dim(item, f"{what} dim {i}") for i, item in enumerate(body.split(",")))


def parse_vector(text: str, what: str) -> Optional[Tuple[int, ...]]:
    """An integer vector parameter: ``1,2,2`` (optionally in ``[ ]``); ``?`` is unknown (None).

    Values are not checked here: the operations' own rules do that, with
    their messages.

    Examples
    --------
    >>> parse_vector("1,2,2", "--block-shape"), parse_vector("[0, -1]", "--pads-end"), parse_vector("?", "--crops-end")
    ((1, 2, 2), (0, -1), None)
    """
    if text.strip() == "?":
        return None
    body = _strip_brackets(text, what)
    if not body:
        return ()
    return tuple(_integer(item.strip(), f"{what}[{i}]") for i, item in enumerate(body.split(",")))


def _operation(text: str) -> str:
    """OP's argparse type: a datamove name or an OpenVINO name, as the datamove name."""
    name = OPENVINO_NAMES.get(text, text)
    if name not in OPERATIONS:
        names = ", ".join([*OPERATIONS, *OPENVINO_NAMES])
        raise argparse.ArgumentTypeError(f"unknown operation {text!r}; choose from {names}")
    return name


# ----------------------------------------------------------------- parser

_DIMS_HELP = """\
dims (DIMS: comma-separated, optionally inside [ ]):
  3          a static dim
  ? or -1    unknown (any size)
  2..8       an interval, both ends included
  4..        at least 4, no upper bound
  ..8        at most 8 (the same as 0..8)
  *          the whole shape unknown, rank included (also ... or [...]);
             printed as [...]
A value starting with "-" needs the "=" form: --shape=-1,4, --pads-end=-1,0.
"""

_TOP_EPILOG = """\
examples:
  datamove shape batch_to_space --shape 10,2 --block-shape 1,5 --crops-begin 0,2 --crops-end 0,0
  datamove run depth_to_space input.npy output.npy --mode depth_first --block-size 2
  datamove check examples/ir/batch_to_space_2d.xml
  datamove inspect examples/ir/space_to_depth.xml
  datamove run-model examples/ir/space_to_depth.xml -i data=image.npy -o out.npz
  datamove verify model.xml -i image=image.npy

Each command has its own help: datamove COMMAND --help. Errors print one
line, "datamove: error: ...", and exit with status 2.
"""

_SHAPE_EPILOG = f"""\
{_DIMS_HELP}
parameters: a vector parameter left out (or given as ?) is not known until
run time, and the dims it decides become ?. --mode left out is unknown (it
never changes the shape). --block-size defaults to 1, as in the spec; ?
makes it unknown.

examples:
  datamove shape BatchToSpace --shape 10,2 --block-shape 1,5 --crops-begin 0,2 --crops-end 0,0
    [2, 8]
  datamove shape space_to_depth --shape '?,4..8,6,6' --mode blocks_first --block-size 2
    [?, 16..32, 3, 3]
  datamove shape space_to_batch --shape '2,3..' --block-shape 1,4 --pads-begin 0,1 --pads-end 0,0
    [8, 1..]
  datamove shape depth_to_space --shape '*' --mode depth_first --block-size 2
    [...]
"""

_RUN_EPILOG = """\
Every parameter of OP is required, except --block-size (default 1, as in the
spec). The input is loaded with allow_pickle=False (memory-mapped), so object
arrays are refused; every other dtype (bool, numbers, strings, datetimes,
structured) is moved bit for bit and saved with numpy.save to exactly
OUTPUT.npy (it may be the input file).

examples:
  datamove run BatchToSpace in.npy out.npy --block-shape 1,5 --crops-begin 0,2 --crops-end 0,0
    batch_to_space: in.npy [10, 2] int64 -> out.npy [2, 8] int64
  datamove run space_to_depth image.npy packed.npy --mode blocks_first --block-size 2
"""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are one line, like every other error, and point to the --help
    of the command they are about."""

    commands: Optional[Any] = None

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{PROG}: error: {one_line(message)} (see '{self.prog} --help')\n")

    def add_subparsers(self, **kwargs: Any) -> Any:
        self.commands = super().add_subparsers(**kwargs)
        return self.commands

    def parse_args(self, args: Optional[Sequence[str]] = None, namespace: Any = None) -> Any:  # type: ignore[override]
        # argparse reports a command's unknown option against the top-level parser: report it against the command's
        parsed, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = self.commands.choices.get(getattr(parsed, "command", None)) if self.commands else None
            (command or self).error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed


class _CommandsFormatter(argparse.RawDescriptionHelpFormatter):
    """The top-level help's formatter: argparse measures the commands' names without the indent it prints them
    with, which put a long name's help (run-model's) on a line of its own."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if isinstance(action, argparse._SubParsersAction):
            self._action_max_length += 2


def _params_parser() -> argparse.ArgumentParser:
    """The options for the operations' parameters, shared by ``shape`` and ``run``."""
    parent = _Parser(add_help=False)
    space_batch = parent.add_argument_group("batch_to_space / space_to_batch parameters")
    space_batch.add_argument("--block-shape", metavar="B0,B1,...",
                             help="block size per axis, one per data axis; index 0 (batch) is 1")
    space_batch.add_argument("--crops-begin", metavar="C0,C1,...",
                             help="batch_to_space: elements cropped from the start of each axis (0 for batch)")
    space_batch.add_argument("--crops-end", metavar="C0,C1,...",
                             help="batch_to_space: elements cropped from the end of each axis (0 for batch)")
    space_batch.add_argument("--pads-begin", metavar="P0,P1,...",
                             help="space_to_batch: zeros added at the start of each axis (0 for batch)")
    space_batch.add_argument("--pads-end", metavar="P0,P1,...",
                             help="space_to_batch: zeros added at the end of each axis (0 for batch)")
    depth = parent.add_argument_group("space_to_depth / depth_to_space parameters")
    depth.add_argument("--mode", metavar="{blocks_first,depth_first}",
                       help="order of the depth axis: blocks_first (ONNX DCR, TensorFlow) "
                            "or depth_first (ONNX CRD, PyTorch pixel_shuffle)")
    depth.add_argument("--block-size", metavar="N", help="block size of every spatial axis (default: 1)")
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The ``datamove`` argument parser, with its ``shape`` and ``run`` commands.

    Returns
    -------
    argparse.ArgumentParser
    """
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog=PROG,
        description="BatchToSpace, SpaceToBatch, SpaceToDepth and DepthToSpace, exact to the OpenVINO specs.",
        epilog=_TOP_EPILOG,
        formatter_class=_CommandsFormatter,
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    params = _params_parser()
    op_help = ("the operation: batch_to_space, space_to_batch, space_to_depth, depth_to_space "
               "(or OpenVINO's BatchToSpace, SpaceToBatch, SpaceToDepth, DepthToSpace)")

    shape = commands.add_parser(
        "shape", parents=[params], formatter_class=formatter, epilog=_SHAPE_EPILOG,
        help="infer the output shape of an operation (dims may be unknown or intervals)",
        description="Print the output shape of OP for an input of shape DIMS, as datamove.shapes infers it.",
    )
    shape.add_argument("operation", metavar="OP", type=_operation, help=op_help)
    shape.add_argument("--shape", required=True, metavar="DIMS",
                       help="the input shape, e.g. 10,2 or '?,4..8,6,6' or '*' (see below)")
    shape.set_defaults(handler=_shape_command)

    run = commands.add_parser(
        "run", parents=[params], formatter_class=formatter, epilog=_RUN_EPILOG,
        help="apply an operation to an array in a .npy file",
        description="Apply OP to the array in INPUT.npy and save the result to OUTPUT.npy. "
                    "(An OpenVINO IR model runs with 'datamove run-model'.)",
    )
    run.add_argument("operation", metavar="OP", type=_operation, help=op_help)
    run.add_argument("input", metavar="INPUT.npy", help="the data, saved with numpy.save")
    run.add_argument("output", metavar="OUTPUT.npy", help="where to save the result (overwritten)")
    add_engine_option(run, "the engine executing the operation")
    run.set_defaults(handler=_run_command)

    from . import models  # datamove run-model, check, inspect and verify (OpenVINO imported only when verify runs)

    models.add_run_model_parser(commands)
    models.add_check_parser(commands, _Parser)
    models.add_verify_parser(commands)
    # Listed here for --help; main() hands "bench ..." to datamove.benchmarks.suite, which has its own options.
    commands.add_parser("bench", add_help=False, help="run the benchmark suite (datamove bench --help)")
    about = commands.add_parser(
        "info", help="this install: version, compiled core (loaded or why not), instruction set, threads, libraries",
        description="Print datamove's version, whether its compiled core is loaded (and why not), the instruction "
                    "set it runs at, its threads, and the optional libraries installed (found, not imported).",
    )
    about.add_argument("--json", action="store_true", help="print the same as one JSON object")
    about.set_defaults(handler=_info_command)
    return parser


# ----------------------------------------------------------------- commands


def _parameters(args: argparse.Namespace, *, required: bool) -> List[Any]:
    """OP's parameters from ``args``, in the order of its arguments, parsed."""
    operation = args.operation
    takes = OPERATIONS[operation]
    foreign = [p for p in ("mode", "block_size", *_VECTORS) if p not in takes and getattr(args, p) is not None]
    if foreign:
        names = ", ".join(_option(p) for p in foreign)
        verb = "does" if len(foreign) == 1 else "do"
        raise CommandError(f"{names} {verb} not apply to {operation}, which takes {', '.join(map(_option, takes))}")
    missing = [p for p in takes if p != "block_size" and (getattr(args, p) or "?").strip() == "?"]
    if required and missing:
        raise CommandError(f"{args.command} {operation} needs {', '.join(map(_option, missing))}")
    values: List[Any] = []
    for param in takes:
        text = getattr(args, param)
        if param == "mode":
            # validated by the operation, whose message has hints (DCR -> blocks_first)
            values.append(None if text is None or text.strip() == "?" else text)
        elif param == "block_size":
            if text is None:
                values.append(1)
            elif text.strip() == "?" and not required:
                values.append(None)
            else:
                values.append(_integer(text.strip(), "--block-size"))
        else:
            values.append(parse_vector(text, _option(param)) if text is not None else None)
    return values


def _call(function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)`` with datamove's errors turned into CommandError."""
    try:
        return function(*args, **kwargs)
    except (DataMoveError, TypeError) as exc:
        raise CommandError(str(exc)) from None


def _shape_command(args: argparse.Namespace) -> int:
    data_shape = parse_shape(args.shape)
    params = _parameters(args, required=False)
    result = _call(getattr(shapes, args.operation), data_shape, *params)
    print(format_shape(result))
    return 0


def _run_command(args: argparse.Namespace) -> int:
    params = _parameters(args, required=True)
    check_target(args.output)
    data = load_npy(args.input)
    operation = getattr(ops, args.operation)
    try:
        result = _call(operation, data, *params, engine=args.engine)
    except MemoryError:
        raise CommandError(f"not enough memory for the output of {args.operation}") from None
    summary = (f"{args.operation}: {show(args.input)} {format_shape(data.shape)} {data.dtype} -> "
               f"{show(args.output)} {format_shape(result.shape)} {result.dtype}")
    # The input may be memory-mapped from the output file: the write goes to a new
    # file renamed over it, so the mapping keeps reading the old one.
    save_npy(args.output, result)
    print(summary)
    return 0


def _info_command(args: argparse.Namespace) -> int:
    from . import info

    facts = info.info()
    if args.json:
        import json

        print(json.dumps(facts, indent=2))
    else:
        print(info.report(facts))
    return 0


# ----------------------------------------------------------------- entry point


def _check_option_values(args: argparse.Namespace) -> None:
    """Every option value is a string (argparse gives ``--mode=--`` as an empty list)."""
    for name, value in vars(args).items():
        values = value if name == "input" and isinstance(value, list) else [value]
        for item in values:
            if isinstance(item, list):
                raise CommandError(f"{_option(name)}: a value is needed, got {' '.join(item) or '--'!r}")


#: The longest error message printed whole; a longer one is cut in the middle.
MAX_MESSAGE = 1000


def one_line(message: str) -> str:
    """``message`` as one printable line: control characters (line breaks too) escaped, cut past
    :data:`MAX_MESSAGE` characters (a hostile name or token can be megabytes).

    >>> print(one_line("unrecognized arguments: a\\nb\\x1b[31m"))
    unrecognized arguments: a\\nb\\x1b[31m
    """
    text = message.strip()
    if not text.isprintable():
        text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > MAX_MESSAGE:
        half = MAX_MESSAGE // 2 - 10
        text = f"{text[:half]} ... {text[-half:]} ({len(text)} characters)"
    return text


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the ``datamove`` command.

    Parameters
    ----------
    argv : sequence of str, optional
        The arguments after the program name; ``sys.argv[1:]`` when None.

    Returns
    -------
    int
        The exit status: 0 on success, 2 on any error (one line on stderr);
        ``check`` exits 1 when the model's recorded shapes disagree, ``verify``
        when a data-movement layer's output differs from datamove's.

    Examples
    --------
    >>> main(["shape", "SpaceToDepth", "--shape", "5,7,4,6", "--mode", "blocks_first", "--block-size", "2"])
    [5, 28, 2, 3]
    0
    """
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    from . import models

    if argv[:1] == ["bench"]:
        from ..benchmarks.suite import main as bench

        try:
            return bench(argv[1:], parser_class=_Parser)
        except SystemExit as exc:  # --help and usage errors: already printed
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    # the former spelling, kept for scripts written before run-model existed; its errors name run-model
    former = models.is_model_run(argv)
    if former:
        argv = ["run-model", *argv[1:]]
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version and usage errors: argparse already printed
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        _check_option_values(args)
        status: int = args.handler(args)
        if former:  # after the work, so that an error stays one line
            print(f"{PROG}: warning: 'datamove run MODEL.xml' is now 'datamove run-model MODEL.xml'; "
                  "the old spelling will be removed", file=sys.stderr)
        return status
    except CommandError as exc:
        print(f"{PROG}: error: {one_line(str(exc))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
