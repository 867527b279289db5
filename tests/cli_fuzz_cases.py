"""Random command lines and hostile files for ``tests/test_cli_fuzz.py``.

Everything here is driven by a ``random.Random(seed)``, so a seed names one
reproducible run: :func:`build_pool` writes a folder of files (valid ``.npy``
seeds of many dtypes, corrupt ``.npy`` files, the shipped IRs and mutations of
them, odd names, folders, links), :func:`random_command` draws a command line
over that pool, :func:`invoke` runs ``datamove.cli.app.main`` in-process (or
:func:`invoke_subprocess` runs ``python -m datamove``) and
:func:`violations` lists every way the outcome breaks the command line's
contract:

- a failing command prints exactly one line on stderr, ``datamove: error: ...``,
  shorter than :data:`MAX_ERROR_CHARS`, with no control character but the final
  newline, no traceback and no Python warning, nothing on stdout, and exits
  with 2 (``check`` also with 1: a disagreeing or invalid model, report on
  stdout);
- no existing file is changed, removed or added, except the named output of a
  command that succeeded;
- a command that succeeded wrote its output whole: a readable ``.npy``
  (``run OP``, equal to what the library computes) or ``.npz`` (``run MODEL.xml``).

Each violation has a class (``Violation.key``) so that one cause seen a
hundred times is reported once, with its first, shortest example.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import pathlib
import random
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import traceback
import unicodedata
import warnings
import zipfile
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples" / "ir"

#: The longest error line accepted (characters, the prefix included).
MAX_ERROR_CHARS = 2000
PREFIX = "datamove: error: "

OPS = ["batch_to_space", "space_to_batch", "space_to_depth", "depth_to_space"]
OPENVINO = {"batch_to_space": "BatchToSpace", "space_to_batch": "SpaceToBatch",
            "space_to_depth": "SpaceToDepth", "depth_to_space": "DepthToSpace"}
VECTOR_OPTIONS = {
    "batch_to_space": ("--block-shape", "--crops-begin", "--crops-end"),
    "space_to_batch": ("--block-shape", "--pads-begin", "--pads-end"),
}
ALL_PARAM_OPTIONS = ["--block-shape", "--crops-begin", "--crops-end", "--pads-begin", "--pads-end", "--mode",
                     "--block-size"]
ENGINES = ["auto", "numpy", "native", "array_api", "triton", "cuda", "", "NUMPY", "auto ", "x" * 300]

# Values for any slot. NUL is left out: a real argv cannot hold it. "\udcff" is what Python makes of
# a byte that is not UTF-8 in argv (surrogateescape).
HUGE_INTEGERS = [str(2**31), str(2**32 + 1), str(2**62), str(2**63 - 1), str(2**63), str(2**64), str(-(2**63)),
                 str(-(2**63) - 1), "9" * 25, "9" * 4000, "9" * 4301, "9" * 5000, "-" + "9" * 5000,
                 "0" * 5000 + "2", "+" + "1" * 30]
WEIRD = [
    "", " ", "?", " ? ", "*", "...", "[...]", "[", "]", "[]", "[1,2", "1,2]", "[[1,2]]", ",", "1,", ",1", "1,,2",
    "1.5", "1e3", "0x10", "0b1", "+3", "-0", "- 3", "3 4", "1_000", "\uff11", "\u0663", "\u00b2", "inf", "nan",
    "2..8", "8..2", "..", "?..3", "1..?", "..8", "4..", "-1", "-5", "-1,-1", "1;2", "1 , 2", "\t1\t", "1\n2",
    "\n", "\r", "\x1b[31mred", "a\x07b", "\x7f", "\x85", "\u2028", "\u200b", "\udcff", "\udc80x",
    "\u00e9", "\u65e5\u672c", "\U0001f600", "a" * 3000, "-", "--", "-x", "=", "==",
    "blocks_first", "depth_first", "DCR", "CRD", "BLOCKS_FIRST", "blocks_first\n", "blocks_first ",
    "None", "null", "true", "()", "{}",
    *HUGE_INTEGERS,
]
BAD_OPS = ["", "batch_to_Space", "batchtospace", "Reshape", "space_to_depth\n", "\u015dpace_to_depth",
           "batch_to_space ", "x" * 3000, "../x", "\x1b[31m", "\udcff", "SpaceToDepth-1", "space-to-depth",
           "-", "--", "bench", "shape", "run", "run-model", "check"]
COMMANDS = ["shape", "run", "run-model", "check", "", "Shape", "runn", "chek", "x" * 3000, "\n", "-v", "--versio"]

# ----------------------------------------------------------------- small helpers


def clip(text: str, limit: int = 70) -> str:
    """``repr(text)`` cut to about ``limit`` characters, with the length when cut."""
    shown = repr(text)
    if len(shown) <= limit:
        return shown
    return f"{shown[:limit // 2]}...{shown[-limit // 4:]}<{len(text)} chars>"


def show_argv(argv: Sequence[str]) -> str:
    return "datamove " + " ".join(clip(a, 60) if (not a.isprintable() or " " in a or not a or len(a) > 60)
                                  else a for a in argv)


def _pick(rng: random.Random, items: Sequence[Any]) -> Any:
    return items[rng.randrange(len(items))]


def _vector(values: Sequence[int]) -> str:
    return ",".join(map(str, values))


def _divisors(n: int) -> List[int]:
    return [d for d in range(1, max(n, 1) + 1) if n % d == 0] if n > 0 else [1]


# ----------------------------------------------------------------- .npy files


def npy_bytes(header: str, data: bytes, version: Tuple[int, int] = (1, 0), pad: bool = True) -> bytes:
    """A ``.npy`` file from a header dict's text (any text) and data bytes."""
    encoding = "utf-8" if version[0] >= 3 else "latin-1"
    text = header.encode(encoding, "surrogatepass" if encoding == "utf-8" else "replace")
    length_size = 2 if version[0] == 1 else 4
    if pad:
        total = 6 + 2 + length_size + len(text) + 1
        text = text + b" " * ((-total) % 64) + b"\n"
    length = len(text).to_bytes(length_size, "little", signed=False) if len(text) < 256 ** length_size \
        else b"\xff" * length_size
    return b"\x93NUMPY" + bytes(version) + length + text + data


def _header(descr: str, fortran: str, shape: str) -> str:
    return "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)


def npy_seeds(rng: random.Random) -> Dict[str, np.ndarray]:
    """Valid arrays, saved with numpy.save into the pool (name -> array)."""
    seeds: Dict[str, np.ndarray] = {
        "f32_4d.npy": np.arange(2 * 8 * 4 * 4, dtype=np.float32).reshape(2, 8, 4, 4),
        "i64_2d.npy": np.arange(8, dtype=np.int64).reshape(4, 2),
        "bool_4d.npy": np.array([rng.random() < 0.5 for _ in range(32)]).reshape(8, 1, 2, 2),
        "f16_4d.npy": np.array([rng.uniform(-9, 9) for _ in range(32)], np.float16).reshape(1, 8, 2, 2),
        "c128_3d.npy": (np.arange(16) + 1j * np.arange(16)).reshape(4, 2, 2),
        "struct_3d.npy": np.zeros((4, 2, 2), [("a", "<i4"), ("b", "<f8")]),
        "str_2d.npy": np.array([["ab", "c"], ["d", "e"], ["f", "g"], ["h", "ij"]]),
        "bytes_3d.npy": np.array([b"ab", b"c", b"", b"z"] * 4, "S2").reshape(4, 2, 2),
        "dt64_2d.npy": np.arange(8).astype("datetime64[s]").reshape(4, 2),
        "be_f8_3d.npy": np.arange(16, dtype=">f8").reshape(4, 2, 2),
        "fortran_3d.npy": np.asfortranarray(np.arange(2 * 4 * 4, dtype=np.int16).reshape(2, 4, 4)),
        "scalar.npy": np.array(3.5),
        "empty_4d.npy": np.zeros((0, 4, 2, 2), np.float32),
        "empty_mid.npy": np.zeros((2, 0, 4), np.int8),
        "vec_1d.npy": np.arange(4, dtype=np.uint16),
        "void_2d.npy": np.zeros((4, 2), "V3"),
        "u8_5d.npy": np.arange(48 * 3 * 3 * 1 * 3, dtype=np.uint32).astype(np.uint8).reshape(48, 3, 3, 1, 3),
        "big_f64_4d.npy": np.arange(4 * 8 * 32 * 32, dtype=np.float64).reshape(4, 8, 32, 32),  # > 128 KiB: native
        "many_dims.npy": np.zeros((1,) * 30 + (4, 2), np.int32),
    }
    return seeds


def _data_of(array: np.ndarray) -> bytes:
    return np.ascontiguousarray(array).tobytes()


def corrupt_npy(rng: random.Random, seeds: Dict[str, np.ndarray]) -> Tuple[bytes, str]:
    """One corrupt (or odd but maybe valid) .npy file: (bytes, description)."""
    name = _pick(rng, sorted(seeds))
    array = seeds[name]
    buffer = io.BytesIO()
    np.save(buffer, array)
    good = buffer.getvalue()
    header_end = good.index(b"\n") + 1
    kind = rng.randrange(9)
    if kind == 0:
        cut = rng.choice([0, 1, 5, 6, 8, 9, 10, rng.randrange(10, header_end), header_end,
                          rng.randrange(header_end, len(good)) if len(good) > header_end else header_end])
        return good[:cut], f"{name} truncated to {cut} of {len(good)} bytes"
    if kind == 1:
        data = bytearray(good)
        flips = []
        for _ in range(rng.randint(1, 3)):
            i = rng.randrange(0, header_end) if rng.random() < 0.8 else rng.randrange(len(data))
            data[i] = rng.randrange(256)
            flips.append(i)
        return bytes(data), f"{name} with bytes {flips} replaced"
    if kind == 2:
        data = bytearray(good)
        data[rng.randrange(6)] ^= 0xFF
        return bytes(data), f"{name} with a bad magic string"
    if kind == 3:
        version = rng.choice([(0, 0), (2, 0), (3, 0), (9, 9), (1, 1), (255, 255)])
        data = bytearray(good)
        data[6:8] = bytes(version)
        return bytes(data), f"{name} with format version {version} in a 1.0 header"
    if kind == 4:
        data = bytearray(good)
        length = rng.choice([0, 1, 2, 63, 65535, rng.randrange(65536)])
        data[8:10] = length.to_bytes(2, "little")
        return bytes(data), f"{name} with header length {length}"
    if kind == 5:
        # a well-formed file with a hostile header
        descr = repr(np.lib.format.dtype_to_descr(array.dtype))
        fortran = "True" if array.flags.f_contiguous and not array.flags.c_contiguous else "False"
        shape = repr(array.shape)
        data = _data_of(array)
        field = rng.randrange(3)
        if field == 0:
            shape = rng.choice([
                "(1152921504606846976,)", "(1152921504606846976, 16)", "(4611686018427387904, 4611686018427387904)",
                "(9223372036854775807,)", "(9223372036854775808,)", "(2**60,)", "(-1,)", "(-5, 2)", "(1.5,)",
                "('a',)", "(2, 3, 4, 5)", "(1,)", "()", "(" + "1, " * 70 + ")", "(0, 0, 0)", "[4, 2]", "None",
                "(True,)", "(10**9, 10**9)", "(1000000000, 1000000000, 1000000000)", "(3037000500, 3037000500)",
                "(65536, 65536, 65536, 65536)", "(" + "(" * 300 + ")" * 300 + ",)",
            ])
        elif field == 1:
            descr = rng.choice([
                "'|O'", "'O'", "'zz'", "'<U0'", "'V0'", "'<M8[xyz]'", "'|S0'", "[('a', '<i4'), ('a', '<i4')]",
                "[('', '<i4')]", "'<f4' * 1000", repr("<f4" * 1000), "{'names': ['a'], 'formats': ['<i4']}",
                "[('a', '<i4', (1099511627776,))]", "[('a', '<i4', (-1,))]", "'>c32'", "'<f2'", "'<i8'", "7",
                "None", "'<U1099511627776'", "'|V1099511627776'", "'\u00e9'", "[('a', '|O')]",
                "[('a', [('b', [('c', '<i4')])])]",
            ])
        else:
            fortran = rng.choice(["'garbage'", "1", "None", "'True'", "True", "2", "[]"])
        header = _header(descr, fortran, shape)
        if rng.random() < 0.1:
            data = data[: rng.randrange(len(data) + 1)] if data else b"\x00" * 8
        return npy_bytes(header, data), f"{name} with header {clip(header, 120)}"
    if kind == 6:
        header = rng.choice([
            "[1, 2]", "1/0", "__import__('os').system('true')", "{'descr': '<f4'}",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "{", "",
            "(" * 1000 + ")" * 1000, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,)}" + " " * 70000,
            "{'descr': '\u00e9', 'fortran_order': False, 'shape': (1,), }",
            "{b'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'shape': (2,), }",
        ])
        version = rng.choice([(1, 0), (2, 0), (3, 0)])
        return npy_bytes(header, b"\x00" * 16, version=version), f"header {clip(header, 80)} (version {version})"
    if kind == 7:
        body = rng.choice([
            b"", b"\x93NUMPY", b"\x93NUMPY\x01\x00", b"hello\n", b"PK\x03\x04", b"PK\x05\x06" + b"\x00" * 18,
            b"\x80\x04K\x01.", b"\x00" * 64, bytes(range(256)),
        ])
        return body, f"raw bytes {clip(body.decode('latin-1'), 40)}"
    # appended garbage: still a valid file for NumPy
    return good + bytes(rng.randrange(256) for _ in range(rng.randint(1, 100))), f"{name} with bytes appended"


# ----------------------------------------------------------------- IR files


@dataclasses.dataclass
class Port:
    id: int
    dims: Sequence[Any]
    names: Optional[str] = None
    precision: str = "FP32"


def _layer(layer_id: int, name: str, kind: str, version: str, data: Dict[str, str], inputs: Sequence[Port],
           outputs: Sequence[Port], extra: str = "") -> str:
    def port(p: Port) -> str:
        names = f' names="{p.names}"' if p.names is not None else ""
        dims = "".join(f"\n\t\t\t\t\t<dim>{d}</dim>" for d in p.dims)
        return f'\t\t\t\t<port id="{p.id}" precision="{p.precision}"{names}>{dims}\n\t\t\t\t</port>\n'

    text = f'\t\t<layer id="{layer_id}" name="{name}" type="{kind}" version="{version}"{extra}>\n'
    if data:
        text += "\t\t\t<data " + " ".join(f'{k}="{v}"' for k, v in data.items()) + " />\n"
    if inputs:
        text += "\t\t\t<input>\n" + "".join(map(port, inputs)) + "\t\t\t</input>\n"
    if outputs:
        text += "\t\t\t<output>\n" + "".join(map(port, outputs)) + "\t\t\t</output>\n"
    return text + "\t\t</layer>\n"


def _net(name: str, layers: Sequence[str], edges: Sequence[Tuple[int, int, int, int]]) -> str:
    edge_text = "".join(f'\t\t<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}" />\n'
                        for a, b, c, d in edges)
    return (f'<?xml version="1.0"?>\n<net name="{name}" version="11">\n\t<layers>\n{"".join(layers)}\t</layers>\n'
            f"\t<edges>\n{edge_text}\t</edges>\n</net>\n")


def extra_ir_seeds() -> Dict[str, Tuple[str, Optional[bytes], Dict[str, np.ndarray]]]:
    """Hand-written IRs beside the shipped ones: name -> (xml, bin or None, fitting inputs)."""
    seeds: Dict[str, Tuple[str, Optional[bytes], Dict[str, np.ndarray]]] = {}
    # Const(i32) -> Convert(i64) -> BatchToSpace's block_shape
    layers = [
        _layer(0, "data", "Parameter", "opset1", {"shape": "8,2,3", "element_type": "f32"}, [],
               [Port(0, [8, 2, 3], "data")]),
        _layer(1, "block_i32", "Const", "opset1", {"element_type": "i32", "shape": "3", "offset": "0", "size": "12"},
               [], [Port(0, [3], precision="I32")]),
        _layer(2, "to_i64", "Convert", "opset1", {"destination_type": "i64"}, [Port(0, [3], precision="I32")],
               [Port(1, [3], precision="I64")]),
        _layer(3, "crops", "Const", "opset1", {"element_type": "i64", "shape": "3", "offset": "12", "size": "24"},
               [], [Port(0, [3], precision="I64")]),
        _layer(4, "crops2", "Const", "opset1", {"element_type": "i64", "shape": "3", "offset": "12", "size": "24"},
               [], [Port(0, [3], precision="I64")]),
        _layer(5, "b2s", "BatchToSpace", "opset2", {}, [Port(0, [8, 2, 3]), Port(1, [3], precision="I64"),
                                                       Port(2, [3], precision="I64"), Port(3, [3], precision="I64")],
               [Port(4, [4, 4, 3], "y")]),
        _layer(6, "out", "Result", "opset1", {}, [Port(0, [4, 4, 3])], [], ' output_names="y"'),
    ]
    binary = np.array([1, 2, 1], "<i4").tobytes() + np.zeros(3, "<i8").tobytes()
    seeds["convert"] = (_net("convert", layers, [(0, 0, 5, 0), (1, 0, 2, 0), (2, 1, 5, 1), (3, 0, 5, 2),
                                                  (4, 0, 5, 3), (5, 4, 6, 0)]),
                        binary, {"data": np.arange(48, dtype=np.float32).reshape(8, 2, 3)})
    # a dynamic Parameter (intervals), no Const, no .bin
    layers = [
        _layer(0, "x", "Parameter", "opset1", {"shape": "1..4,8,2..6", "element_type": "f16"}, [],
               [Port(0, [-1, 8, -1], "x", "FP16")]),
        _layer(1, "d2s", "DepthToSpace", "opset1", {"block_size": "2", "mode": "depth_first"},
               [Port(0, [-1, 8, -1], precision="FP16")], [Port(1, [-1, 4, -1], "z", "FP16")]),
        _layer(2, "r", "Result", "opset1", {}, [Port(0, [-1, 4, -1], precision="FP16")], []),
    ]
    seeds["dynamic"] = (_net("dynamic", layers, [(0, 0, 1, 0), (1, 1, 2, 0)]), None,
                        {"x": np.arange(48, dtype=np.float16).reshape(2, 8, 3)})
    # two Results, one fed straight from the Parameter (an output that is an input)
    layers = [
        _layer(0, "p", "Parameter", "opset1", {"shape": "4,2,2,2", "element_type": "i32"}, [],
               [Port(0, [4, 2, 2, 2], "p,p_alias", "I32")]),
        _layer(1, "s2d", "SpaceToDepth", "opset1", {"block_size": "2", "mode": "blocks_first"},
               [Port(0, [4, 2, 2, 2], precision="I32")], [Port(1, [4, 8, 1, 1], "packed", "I32")]),
        _layer(2, "r1", "Result", "opset1", {}, [Port(0, [4, 8, 1, 1], precision="I32")], [],
               ' output_names="packed"'),
        _layer(3, "r2", "Result", "opset1", {}, [Port(0, [4, 2, 2, 2], precision="I32")], [],
               ' output_names="same"'),
    ]
    seeds["two_outputs"] = (_net("two_outputs", layers, [(0, 0, 1, 0), (1, 1, 2, 0), (0, 0, 3, 0)]), None,
                            {"p": np.arange(32, dtype=np.int32).reshape(4, 2, 2, 2)})
    # an opaque layer: check trusts it, run refuses it
    layers = [
        _layer(0, "q", "Parameter", "opset1", {"shape": "1,4,2,2", "element_type": "f32"}, [],
               [Port(0, [1, 4, 2, 2], "q")]),
        _layer(1, "relu", "Relu", "opset1", {}, [Port(0, [1, 4, 2, 2])], [Port(1, [1, 4, 2, 2])]),
        _layer(2, "s2d", "SpaceToDepth", "opset1", {"block_size": "2", "mode": "depth_first"},
               [Port(0, [1, 4, 2, 2])], [Port(1, [1, 16, 1, 1], "o")]),
        _layer(3, "r", "Result", "opset1", {}, [Port(0, [1, 16, 1, 1])], []),
    ]
    seeds["opaque"] = (_net("opaque", layers, [(0, 0, 1, 0), (1, 1, 2, 0), (2, 1, 3, 0)]), None,
                       {"q": np.zeros((1, 4, 2, 2), np.float32)})
    return seeds


def ir_seeds() -> Dict[str, Tuple[str, Optional[bytes], Dict[str, np.ndarray]]]:
    """The shipped IRs (examples/ir) and the hand-written ones, with inputs that fit their Parameters."""
    seeds: Dict[str, Tuple[str, Optional[bytes], Dict[str, np.ndarray]]] = {}
    for xml_path in sorted(EXAMPLES.glob("*.xml")):
        text = xml_path.read_text()
        inputs: Dict[str, np.ndarray] = {}
        for match in re.finditer(r'name="([^"]*)" type="Parameter"[^>]*>\s*<data shape="([^"]*)" '
                                 r'element_type="f32"', text):
            shape = tuple(int(d) for d in match[2].split(","))
            inputs[match[1]] = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        bin_path = xml_path.with_suffix(".bin")
        seeds[xml_path.stem] = (text, bin_path.read_bytes() if bin_path.exists() else None, inputs)
    seeds.update(extra_ir_seeds())
    return seeds


IR_VALUES = ["", "-1", "0", "1", "2", "-5", "?", "...", "1..3", "..4", "2..", "5..2", str(2**63 - 1), str(2**63),
             str(2**64), "9" * 400, "9" * 5000, "abc", "f32", "i64", "i32", "u4", "bf16", "f16", "boolean", "string",
             "dynamic", "blocks_first", "depth_first", "DCR", "1,2", "0,0,0", "4294967296,4294967296", "BatchToSpace",
             "SpaceToDepth", "Convert", "Result", "Parameter", "Const", "Frobnicate", "opset1", "&amp;", "\\,",
             "a,b", "&#10;", "a&#10;b", "a&#13;b", "&#9;", "x&#x85;y", "x&#x2028;y", "../../etc/passwd", "../x",
             "/abs", "a/b", "a\\b", ".", "..", "x" * 5000, "\u65e5\u672c", "\u00e9", "&#x1b;", "&lt;&gt;",
             "1000000000", "1152921504606846976", "10", "11", "12"]
_ATTRIBUTE = re.compile(r'([\w-]+)="([^"]*)"')
_DIM = re.compile(r"<dim>([^<]*)</dim>")


def mutate_ir(rng: random.Random, xml: str, binary: Optional[bytes]) -> Tuple[bytes, Optional[bytes], List[str]]:
    """1-3 mutations of an IR: (xml bytes, bin bytes or None, descriptions)."""
    text = xml
    data: Optional[bytes] = binary
    raw: Optional[bytes] = None  # set when the XML is corrupted at the byte level
    notes: List[str] = []
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["attribute", "attribute", "attribute", "dim", "dim", "line", "edge", "flip", "truncate",
                           "encoding", "hostile", "bin", "bin", "ports", "duplicate_layer"])
        if raw is not None and kind not in ("bin",):
            kind = "bin"
        if kind == "attribute":
            matches = list(_ATTRIBUTE.finditer(text))
            match = _pick(rng, matches)
            value = rng.choice(IR_VALUES + [str(rng.randint(-(2**70), 2**70))])
            text = text[:match.start(2)] + value + text[match.end(2):]
            notes.append(f"{match[1]}={clip(value, 40)}")
        elif kind == "dim":
            matches = list(_DIM.finditer(text))
            if matches:
                match = _pick(rng, matches)
                value = rng.choice(["-1", "0", "1", "3", "1000000", str(2**63), "9" * 40, "?", "1..8", "x", "",
                                    "-7", "4..2", " 2 "])
                text = text[:match.start(1)] + value + text[match.end(1):]
                notes.append(f"<dim>{clip(value, 30)}</dim>")
        elif kind == "line":
            lines = text.split("\n")
            i = rng.randrange(len(lines))
            how = rng.choice(["remove", "duplicate"])
            notes.append(f"line {i} ({clip(lines[i].strip(), 40)}) {how}d")
            lines[i:i + 1] = [] if how == "remove" else [lines[i], lines[i]]
            text = "\n".join(lines)
        elif kind == "edge":
            edges = re.findall(r"\t\t<edge [^\n]*\n", text)
            if edges:
                edge = _pick(rng, edges)
                how = rng.choice(["remove", "duplicate", "reverse", "self"])
                if how == "remove":
                    text = text.replace(edge, "", 1)
                elif how == "duplicate":
                    text = text.replace(edge, edge + edge, 1)
                elif how == "reverse":
                    a, b, c, d = re.findall(r'"(\d+)"', edge)
                    text = text.replace(edge, f'\t\t<edge from-layer="{c}" from-port="{d}" to-layer="{a}" '
                                              f'to-port="{b}" />\n', 1)
                else:
                    a, b, c, d = re.findall(r'"(\d+)"', edge)
                    text = text.replace(edge, edge + f'\t\t<edge from-layer="{c}" from-port="{b}" to-layer="{c}" '
                                                      f'to-port="{d}" />\n', 1)
                notes.append(f"edge {clip(edge.strip(), 60)} {how}")
        elif kind == "ports":
            ids = list(re.finditer(r'<port id="(\d+)"', text))
            if ids:
                match = _pick(rng, ids)
                value = rng.choice(["0", "1", "4", "99", "-1", str(2**63), ""])
                text = text[:match.start(1)] + value + text[match.end(1):]
                notes.append(f"a port id set to {value!r}")
        elif kind == "duplicate_layer":
            layers = re.findall(r"\t\t<layer .*?</layer>\n", text, re.S)
            if layers:
                layer = _pick(rng, layers)
                text = text.replace(layer, layer + layer, 1)
                notes.append("a layer duplicated")
        elif kind == "flip":
            body = bytearray(text.encode())
            i = rng.randrange(len(body))
            body[i] = rng.randrange(256)
            raw = bytes(body)
            notes.append(f"xml byte {i} set to {body[i]:#x}")
        elif kind == "truncate":
            body = text.encode()
            cut = rng.randrange(len(body))
            raw = body[:cut]
            notes.append(f"xml truncated to {cut} bytes")
        elif kind == "encoding":
            how = rng.choice(["bogus", "latin-1", "utf-16", "utf-16-file", "bom", "ebcdic", "utf-32"])
            if how == "bogus":
                text = text.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="no-such-codec"?>', 1)
            elif how == "latin-1":
                text = text.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="latin-1"?>', 1)
            elif how == "utf-16":
                text = text.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="utf-16"?>', 1)
            elif how == "utf-16-file":
                raw = text.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="utf-16"?>', 1) \
                    .encode("utf-16")
            elif how == "bom":
                raw = b"\xef\xbb\xbf" + text.encode()
            elif how == "ebcdic":
                text = text.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="cp500"?>', 1)
            else:
                text = text.replace('<?xml version="1.0"?>', '<?xml version="1.0" encoding="utf-32"?>', 1)
            notes.append(f"encoding {how}")
        elif kind == "hostile":
            how = rng.choice(["doctype", "entity", "external", "deep", "pi", "cdata", "ns", "comment", "xinclude"])
            head, sep, rest = text.partition("\n")
            if how == "doctype":
                text = head + sep + "<!DOCTYPE net>\n" + rest
            elif how == "entity":
                text = head + sep + '<!DOCTYPE net [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;">]>\n' + rest
            elif how == "external":
                text = head + sep + '<!DOCTYPE net [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n' + rest
            elif how == "deep":
                text = text.replace("</net>", "<a>" * 100 + "</a>" * 100 + "</net>")
            elif how == "pi":
                text = text.replace("<layers>", "<?evil data?><layers>", 1)
            elif how == "cdata":
                text = text.replace("<layers>", "<layers><![CDATA[<layer id='9'/>]]>", 1)
            elif how == "ns":
                text = text.replace("<net ", '<net xmlns="urn:x" ', 1)
            elif how == "comment":
                text = text.replace("<layers>", "<layers><!-- " + "-" * 0 + "x" * 1000 + " -->", 1)
            else:
                text = text.replace("<layers>", '<layers><xi:include xmlns:xi="http://www.w3.org/2001/XInclude" '
                                                'href="/etc/passwd" parse="text"/>', 1)
            notes.append(f"hostile {how}")
        else:  # the .bin
            how = rng.choice(["truncate", "flip", "empty", "remove", "random", "extend", "i64max"])
            if how == "remove" or data is None:
                data = None if how == "remove" else bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
            elif how == "truncate":
                data = data[:rng.randrange(len(data) + 1)]
            elif how == "flip" and data:
                i = rng.randrange(len(data))
                data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
            elif how == "empty":
                data = b""
            elif how == "random":
                data = bytes(rng.randrange(256) for _ in range(len(data)))
            elif how == "extend":
                data = data + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
            else:  # every value a huge int64 (block sizes, crops, pads)
                data = np.full(len(data) // 8, rng.choice([2**62, -(2**63), 2**31, 3]), "<i8").tobytes()
            notes.append(f"bin {how}")
    return (raw if raw is not None else text.encode("utf-8", "surrogatepass")), data, notes


# ----------------------------------------------------------------- the pool of files


@dataclasses.dataclass
class Model:
    xml: str
    bin: Optional[str]
    inputs: Dict[str, str]  # Parameter name -> a fitting .npy in the pool
    description: str


@dataclasses.dataclass
class Pool:
    root: pathlib.Path  # everything the commands may touch lies below it
    cwd: pathlib.Path  # root / "w": where the commands run
    arrays: Dict[str, np.ndarray]  # valid .npy files (relative to cwd) -> their array
    files: Dict[str, str]  # every pool path (relative to cwd) -> what it is
    models: List[Model]

    def describe(self, argv: Sequence[str]) -> List[str]:
        """What the pool files named in ``argv`` are (``NAME=FILE`` included)."""
        notes = []
        for arg in argv:
            for candidate in (arg, arg.partition("=")[2]):
                if candidate in self.files:
                    notes.append(f"{clip(candidate, 40)}: {self.files[candidate]}")
        return notes


def _write(path: pathlib.Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def build_pool(rng: random.Random, root: pathlib.Path, corrupt_npys: int = 14, mutated_irs: int = 10) -> Pool:
    cwd = root / "w"
    (cwd / "sub").mkdir(parents=True)
    (cwd / "dir.npy").mkdir()
    (cwd / "dir.xml").mkdir()
    files: Dict[str, str] = {"sub": "a directory", "dir.npy": "a directory", "dir.xml": "a directory",
                             "nonexistent.npy": "does not exist", "nodir/x.npy": "in a missing folder",
                             "../up.npy": "an existing file one folder up"}
    arrays: Dict[str, np.ndarray] = {}
    seeds = npy_seeds(rng)
    for name, array in seeds.items():
        np.save(cwd / name, array)
        arrays[name] = array
        files[name] = f"valid .npy {array.dtype} {array.shape}"
    np.save(root / "up.npy", seeds["i64_2d.npy"])
    arrays["../up.npy"] = seeds["i64_2d.npy"]
    # hostile .npy files
    for i in range(corrupt_npys):
        data, note = corrupt_npy(rng, seeds)
        _write(cwd / f"bad{i}.npy", data)
        files[f"bad{i}.npy"] = note
    np.save(cwd / "object.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    files["object.npy"] = "pickled object array (allow_pickle=True)"
    np.savez(cwd / "arch.npz", a=np.zeros(3))
    (cwd / "arch.npz").rename(cwd / "arch.npy")
    files["arch.npy"] = "an .npz archive named .npy"
    with zipfile.ZipFile(cwd / "zip.npy", "w") as archive:
        archive.writestr("x.txt", "not an array")
    files["zip.npy"] = "a zip archive holding a text file"
    _write(cwd / "empty.npy", b"")
    files["empty.npy"] = "an empty file"
    # odd names and links
    odd = {"sp ace.npy": "f32_4d.npy", "-dash.npy": "i64_2d.npy", "\u00e9t\u00e9.npy": "f32_4d.npy",
           "line\nbreak.npy": "i64_2d.npy", "tab\tname.npy": "i64_2d.npy", "esc\x1b[31m.npy": "i64_2d.npy",
           "\udcff.npy": "f32_4d.npy", "x" * 200 + ".npy": "i64_2d.npy"}
    for name, source in odd.items():
        shutil.copyfile(cwd / source, cwd / name)
        arrays[name] = seeds[source]
        files[name] = f"valid .npy named {clip(name, 30)}"
    os.symlink("f32_4d.npy", cwd / "link.npy")
    arrays["link.npy"] = seeds["f32_4d.npy"]
    files["link.npy"] = "a symbolic link to f32_4d.npy"
    os.symlink("missing_target.npy", cwd / "dangling.npy")
    files["dangling.npy"] = "a dangling symbolic link"
    os.symlink("loop.npy", cwd / "loop.npy")
    files["loop.npy"] = "a symbolic link to itself"
    os.symlink("sub", cwd / "dirlink")
    files["dirlink"] = "a symbolic link to a directory"
    # IR models: the seeds as they are, then mutations
    models: List[Model] = []
    all_seeds = ir_seeds()
    for stem, (xml, binary, inputs) in all_seeds.items():
        model_inputs = {}
        for param, array in inputs.items():
            npy = f"in_{stem}_{param}.npy"
            np.save(cwd / npy, array)
            arrays[npy] = array
            files[npy] = f"valid .npy {array.dtype} {array.shape} (input {param!r} of {stem})"
            model_inputs[param] = npy
        _write(cwd / f"{stem}.xml", xml.encode())
        files[f"{stem}.xml"] = f"IR {stem} (unchanged)"
        if binary is not None:
            _write(cwd / f"{stem}.bin", binary)
            files[f"{stem}.bin"] = f"weights of {stem} (unchanged)"
        models.append(Model(f"{stem}.xml", f"{stem}.bin" if binary is not None else None, model_inputs,
                            f"IR {stem} (unchanged)"))
    base = next(m for m in models if m.xml == "space_to_depth.xml")
    for odd_name in ("line\nbreak.xml", "esc\x1b[31m.xml", "\udcff.xml", "-dash.xml", "sp ace.xml"):
        shutil.copyfile(cwd / base.xml, cwd / odd_name)
        files[odd_name] = f"IR space_to_depth named {clip(odd_name, 30)} (no .bin needed)"
        models.append(Model(odd_name, None, dict(base.inputs), files[odd_name]))
    stems = sorted(all_seeds)
    for i in range(mutated_irs):
        stem = _pick(rng, stems)
        xml, binary, _ = all_seeds[stem]
        data, new_bin, notes = mutate_ir(rng, xml, binary)
        description = f"IR {stem} mutated: {'; '.join(notes)}"
        _write(cwd / f"m{i}.xml", data)
        files[f"m{i}.xml"] = description
        if new_bin is not None:
            _write(cwd / f"m{i}.bin", new_bin)
            files[f"m{i}.bin"] = f"weights of m{i}.xml ({description})"
        base = next(m for m in models if m.xml == f"{stem}.xml")
        models.append(Model(f"m{i}.xml", f"m{i}.bin" if new_bin is not None else None, dict(base.inputs),
                            description))
    _write(cwd / "notxml.xml", b"\x93NUMPY not xml")
    files["notxml.xml"] = "binary junk named .xml"
    models.append(Model("notxml.xml", None, {}, "binary junk named .xml"))
    return Pool(root, cwd, arrays, files, models)


# ----------------------------------------------------------------- command lines


@dataclasses.dataclass
class Command:
    argv: List[str]
    kind: str  # shape, run_op, check, run_ir, other
    output: Optional[str] = None  # the named output file, if any
    expected: Optional[Tuple[str, str, List[Any]]] = None  # (input, op, params): an unmutated valid run
    fsize_limit: Optional[int] = None  # RLIMIT_FSIZE during the call (a failing write)


def _option(rng: random.Random, name: str, value: str) -> List[str]:
    if value.startswith("-") or rng.random() < 0.3:
        return [f"{name}={value}"]
    return [name, value]


def _weird(rng: random.Random) -> str:
    return _pick(rng, WEIRD)


def valid_params(rng: random.Random, op: str, shape: Tuple[int, ...]) -> Optional[Tuple[Dict[str, str], List[Any]]]:
    """Options that a ``shape`` input accepts (or None): ({option: text}, the library's arguments)."""
    rank = len(shape)
    if op in ("batch_to_space", "space_to_batch"):
        if rank < 2:
            return None
        blocks = [1]
        batch = shape[0]
        for d in shape[1:]:
            if op == "batch_to_space":
                b = _pick(rng, _divisors(batch)) if batch > 0 and rng.random() < 0.6 else 1
                batch //= b
            else:
                b = rng.choice([1, 1, 2, 3])
            blocks.append(b)
        begin, end = [0], [0]
        for d, b in zip(shape[1:], blocks[1:]):
            if op == "batch_to_space":
                total = d * b
                cb = rng.randint(0, total) if rng.random() < 0.4 else 0
                ce = rng.randint(0, total - cb) if rng.random() < 0.4 else 0
            else:
                cb = rng.choice([0, 0, 1, 2])
                ce = (-(d + cb)) % b + b * rng.choice([0, 0, 1])
            begin.append(cb)
            end.append(ce)
        a, c, e = VECTOR_OPTIONS[op]
        return {a: _vector(blocks), c: _vector(begin), e: _vector(end)}, [blocks, begin, end]
    if rank < 3:
        return None
    mode = rng.choice(["blocks_first", "depth_first"])
    spatial = shape[2:]
    if op == "space_to_depth":
        sizes = [bs for bs in range(1, 5) if all(d % bs == 0 for d in spatial)]
    else:
        sizes = [bs for bs in range(1, 5) if shape[1] % bs ** len(spatial) == 0]
    bs = _pick(rng, sizes)
    options = {"--mode": mode}
    if bs != 1 or rng.random() < 0.5:
        options["--block-size"] = str(bs)
    return options, [mode, bs]


def random_shape_text(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.05:
        return ",".join(["2"] * rng.choice([20000, 5000, 100, 65]))
    if r < 0.12:
        return _pick(rng, ["*", "...", "[...]", "", "[]", "[", "2,3]", "[2,3", " ", ",", "2,,3", "2;3", "-",
                           "\n", "2,3\n", "[[2,3]]", "\udcff", "2 3"])
    rank = rng.choice([0, 1, 2, 3, 4, 4, 5, 6])
    dims = []
    for _ in range(rank):
        if rng.random() < 0.75:
            dims.append(str(rng.choice([0, 1, 2, 3, 4, 6, 8, 12, 48])))
        else:
            dims.append(rng.choice(["?", "-1", "2..8", "4..", "..8", "8..2", "0..0", "1..1", "-5", "x", "",
                                    "1.5", str(2**63), str(2**63 - 1), "9" * 25, "9" * 5000, "..", "?..", "2..?",
                                    "4611686018427387904", "3037000500..", "1..9223372036854775807"]))
    text = ",".join(dims)
    if rng.random() < 0.2:
        text = f"[{text}]"
    return text


def _random_vector_text(rng: random.Random, length: int) -> str:
    r = rng.random()
    if r < 0.5:
        return _vector([rng.choice([0, 1, 1, 2, 3, -1, 4]) for _ in range(length + rng.choice([0, 0, 0, -1, 1]))])
    if r < 0.7:
        values = [rng.choice([0, 1, 2]) for _ in range(length)]
        if values:
            values[rng.randrange(len(values))] = rng.choice([2**62, 2**63, -(2**63), 2**32, 10**30, -1])
        return _vector(values)
    if r < 0.8:
        return ",".join(["1"] * rng.choice([70, 1000, 20000]))
    return _weird(rng)


def _param_options(rng: random.Random, op: str, rank: int) -> List[str]:
    argv: List[str] = []
    if op in VECTOR_OPTIONS:
        for name in VECTOR_OPTIONS[op]:
            if rng.random() < 0.9:
                argv += _option(rng, name, _random_vector_text(rng, rank))
    else:
        if rng.random() < 0.85:
            argv += _option(rng, "--mode", rng.choice(["blocks_first", "depth_first", "blocks_first", "?",
                                                       _weird(rng)]))
        if rng.random() < 0.8:
            argv += _option(rng, "--block-size", rng.choice(["1", "2", "3", "4", "?", "0", "-2", str(2**62),
                                                             str(2**63), "9" * 5000, _weird(rng)]))
    if rng.random() < 0.1:  # an option of the other family
        argv += _option(rng, _pick(rng, ALL_PARAM_OPTIONS), rng.choice(["1,2", "2", "blocks_first", _weird(rng)]))
    return argv


def _op_name(rng: random.Random, op: str) -> str:
    r = rng.random()
    if r < 0.08:
        return _pick(rng, BAD_OPS)
    return OPENVINO[op] if r < 0.3 else op


def _shape_command(rng: random.Random) -> Command:
    op = _pick(rng, OPS)
    argv = ["shape", _op_name(rng, op)]
    near_valid = rng.random() < 0.5
    if near_valid:
        rank = rng.choice([2, 3, 4, 5])
        shape = tuple(rng.choice([1, 2, 4, 6, 8, 12, 48]) for _ in range(rank))
        found = valid_params(rng, op, shape)
        text = ",".join(map(str, shape))
        if found is not None and rng.random() < 0.7:
            options = found[0]
            if rng.random() < 0.5:  # one mutation
                key = _pick(rng, sorted(options))
                options[key] = rng.choice([_weird(rng), "?", _random_vector_text(rng, rank)])
            params = [t for k, v in options.items() for t in _option(rng, k, v)]
        else:
            params = _param_options(rng, op, rank)
        if rng.random() < 0.2:  # unknown and interval dims
            dims = text.split(",")
            dims[rng.randrange(len(dims))] = rng.choice(["?", "2..8", "4..", "..8", "-1"])
            text = ",".join(dims)
    else:
        text = random_shape_text(rng)
        params = _param_options(rng, op, text.count(",") + 1 if text else 0)
    argv += _option(rng, "--shape", text) if rng.random() < 0.97 else []
    argv += params
    return Command(argv, "shape")


def _output_name(rng: random.Random, pool: Pool, input_name: Optional[str]) -> str:
    r = rng.random()
    if r < 0.45:
        return rng.choice(["out.npy", "out2.npy", "sub/out.npy", "o"])
    if r < 0.55 and input_name is not None and not input_name.startswith("/"):
        return input_name  # overwrite the input
    if r < 0.75:
        return _pick(rng, sorted(pool.files))  # overwrite something else
    return rng.choice(["", ".", "..", "sub", "sub/", "dir.npy", "nodir/out.npy", "out\nname.npy", "tab\tout.npy",
                       "esc\x1b[0mout.npy", "\udcffout.npy", "\u00e9out.npy", "x" * 300 + ".npy",
                       "/".join(["d" * 200] * 25) + ".npy", "../out_up.npy", "dangling.npy", "link.npy", "dirlink",
                       "loop.npy", "-out.npy", "out.npz", "out", "sub/../out3.npy", "./out4.npy"])


def _run_op_command(rng: random.Random, pool: Pool) -> Command:
    op = _pick(rng, OPS)
    names = sorted(pool.files)
    valid_names = sorted(pool.arrays)
    r = rng.random()
    input_name = _pick(rng, valid_names) if r < 0.65 else _pick(rng, names) if r < 0.97 else \
        rng.choice(["/dev/null", "/dev/zero", "", "-"])
    output = _output_name(rng, pool, input_name)
    expected = None
    if input_name in pool.arrays and rng.random() < 0.75:
        found = valid_params(rng, op, pool.arrays[input_name].shape)
        if found is not None:
            options, arguments = found
            if rng.random() < 0.3:
                key = _pick(rng, sorted(options))
                options[key] = rng.choice([_weird(rng), "?", _random_vector_text(rng, pool.arrays[input_name].ndim)])
            else:
                expected = (input_name, op, arguments)
            params = [t for k, v in options.items() for t in _option(rng, k, v)]
        else:
            params = _param_options(rng, op, pool.arrays[input_name].ndim)
    else:
        params = _param_options(rng, op, rng.randint(0, 5))
    op_name = _op_name(rng, op)
    if op_name != op:
        expected = None if op_name not in OPENVINO.values() else expected
    argv = ["run", op_name, input_name, output] + params
    if rng.random() < 0.25:
        engine = _pick(rng, ENGINES)
        argv += _option(rng, "--engine", engine)
        if engine not in ("auto", "numpy", "native", "array_api"):
            expected = None
    if rng.random() < 0.05:  # positional order shuffled / an extra argument
        argv.insert(rng.randrange(1, len(argv) + 1), _weird(rng))
        expected = None
    fsize = rng.choice([0, 10, 100, 128, 200, 1000, 4096]) if rng.random() < 0.12 else None
    if output.startswith("-"):
        expected = None
    return Command(argv, "run_op", output, expected, fsize)


def _bin_option(rng: random.Random, pool: Pool, model: Model) -> List[str]:
    r = rng.random()
    if r < 0.8:
        return []
    choice = rng.choice([model.bin or "missing.bin", _pick(rng, sorted(pool.files)), "nonexistent.bin", "sub",
                         "/dev/null", "/dev/zero", "", model.xml])
    return _option(rng, "--bin", choice)


def _model_inputs(model: Model) -> set:
    used = {model.xml, *model.inputs.values()}
    used.add(model.bin if model.bin else os.path.splitext(model.xml)[0] + ".bin")
    return used


def _check_command(rng: random.Random, pool: Pool) -> Command:
    model = _pick(rng, pool.models)
    xml = model.xml if rng.random() < 0.9 else rng.choice([_pick(rng, sorted(pool.files)), "nonexistent.xml",
                                                            "dir.xml", "", "\udcff.xml"])
    argv = ["check", xml] + _bin_option(rng, pool, model)
    if rng.random() < 0.05:
        argv.append(_weird(rng))
    return Command(argv, "check")


def _run_ir_command(rng: random.Random, pool: Pool, in_process: bool = True) -> Command:
    model = _pick(rng, pool.models)
    argv = ["run-model", model.xml]
    for name, npy in model.inputs.items():
        r = rng.random()
        if r < 0.75:
            argv += [rng.choice(["-i", "--input"]), f"{name}={npy}"]
        elif r < 0.85:
            argv += ["-i", f"{name}={_pick(rng, sorted(pool.files))}"]
        elif r < 0.9:
            argv += ["-i", rng.choice([name, f"={npy}", f"{name}=", "=", f"{name}={npy}={npy}"])]
        elif r < 0.95:
            argv += ["-i", f"{_weird(rng)}={npy}"]
        # else: left out
    if rng.random() < 0.05 and model.inputs:  # the same input twice
        argv += ["-i", f"{next(iter(model.inputs))}={next(iter(model.inputs.values()))}"]
    output = rng.choice(["out.npz", "out.npz", "res.npz", "sub/r.npz", "o", _output_name(rng, pool, None)])
    if in_process and output in _model_inputs(model):
        output = "out.npz"  # an output that is an input of this very run is tried in a subprocess only
    if rng.random() < 0.95:
        argv += _option(rng, rng.choice(["-o", "--output"]), output)
    else:
        output = None
    argv += _bin_option(rng, pool, model)
    if rng.random() < 0.15:
        argv += _option(rng, "--engine", _pick(rng, ENGINES))
    if rng.random() < 0.1:
        argv += _option(rng, "--max-bytes", rng.choice(["0", "1", "1K", "64M", "none", "-1", "9" * 30, "1.5G",
                                                        _weird(rng)]))
    fsize = rng.choice([0, 10, 100, 300, 1000]) if rng.random() < 0.12 else None
    return Command(argv, "run_ir", output, None, fsize)


def _soup_command(rng: random.Random, pool: Pool) -> Command:
    first = rng.choice(COMMANDS)
    argv = [first] if first else []
    names = sorted(pool.files)
    for _ in range(rng.randint(0, 6)):
        r = rng.random()
        if r < 0.3:
            argv.append(_weird(rng))
        elif r < 0.5:
            argv.append(_pick(rng, ALL_PARAM_OPTIONS + ["--shape", "--engine", "-i", "-o", "--bin", "--input",
                                                        "--output", "--max-bytes", "--bl", "--crops", "--p"]))
        elif r < 0.7:
            argv.append(_pick(rng, names))
        else:
            argv.append(_pick(rng, OPS + BAD_OPS + list(OPENVINO.values())))
    if rng.random() < 0.05:
        argv = ["bench", rng.choice(["--no-such-option", "--device", "--json", "extra", "--budget"])]
    return Command(argv, "other")


def random_command(rng: random.Random, pool: Pool, in_process: bool = True) -> Command:
    r = rng.random()
    if r < 0.2:
        return _shape_command(rng)
    if r < 0.55:
        return _run_op_command(rng, pool)
    if r < 0.7:
        return _check_command(rng, pool)
    if r < 0.92:
        return _run_ir_command(rng, pool, in_process)
    return _soup_command(rng, pool)


# ----------------------------------------------------------------- running a command


@dataclasses.dataclass
class Outcome:
    status: Any
    out: str
    err: str
    exception: Optional[str] = None  # "Type: message" of an exception that escaped main()
    where: str = ""  # the innermost datamove frame of that exception
    warnings: List[str] = dataclasses.field(default_factory=list)
    in_process: bool = True


Snapshot = Dict[str, Tuple[Any, ...]]


def snapshot(root: pathlib.Path) -> Snapshot:
    """Every file, link and folder below ``root``: content, mtime and mode of files."""
    state: Snapshot = {}
    prefix = len(os.path.join(str(root), ""))
    for folder, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(folder, name)
            rel = path[prefix:]
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                state[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(info.st_mode):
                state[rel] = ("dir",)
            else:
                with open(path, "rb") as file:
                    state[rel] = ("file", file.read(), info.st_mtime_ns, stat.S_IMODE(info.st_mode))
    return state


def _limits(memory: bool, fsize: Optional[int]) -> Callable[[], None]:
    """Apply an address-space bound (a safety net against huge allocations) and a file-size limit; return undo."""
    undo: List[Callable[[], None]] = []
    if memory:
        old = resource.getrlimit(resource.RLIMIT_AS)
        try:
            with open("/proc/self/statm") as statm:
                size = int(statm.read().split()[0]) * resource.getpagesize()
            soft = size + 6 * 2**30
            if old[0] == resource.RLIM_INFINITY or old[0] > soft:
                resource.setrlimit(resource.RLIMIT_AS, (soft, old[1]))
                undo.append(lambda: resource.setrlimit(resource.RLIMIT_AS, old))
        except (OSError, ValueError):
            pass
    if fsize is not None:
        old_fsize = resource.getrlimit(resource.RLIMIT_FSIZE)
        old_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, old_fsize[1]))
        undo.append(lambda: resource.setrlimit(resource.RLIMIT_FSIZE, old_fsize))
        undo.append(lambda: signal.signal(signal.SIGXFSZ, old_handler))

    def restore() -> None:
        for step in undo:
            step()

    return restore


def _innermost_datamove_frame(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    inner = [f for f in frames if "datamove" in f.filename and "tests" not in f.filename]
    frame = (inner or frames or [None])[-1]
    if frame is None:
        return "?"
    return f"{os.path.basename(frame.filename)}:{frame.name}"


def invoke(argv: Sequence[str], cwd: pathlib.Path, fsize_limit: Optional[int] = None) -> Outcome:
    """``datamove.cli.app.main(argv)`` in this process, in ``cwd``: status, stdout, stderr, escaped exception, warnings.

    stdout is strict UTF-8 and stderr backslash-escapes, as Python sets them up under a UTF-8 locale.
    """
    from datamove.cli.app import main

    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict", newline="\n", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace", newline="\n", write_through=True)
    exception = None
    where = ""
    old_cwd = os.getcwd()
    os.chdir(cwd)
    restore = _limits(memory=True, fsize=fsize_limit)
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                status: Any = main(list(argv))
            except SystemExit as exc:  # what the console script would exit with
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if not isinstance(exc.code, int) and exc.code is not None:
                    print(exc.code, file=sys.stderr)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - everything that escapes is the finding
                status = 1  # Python's exit status for an uncaught exception
                exception = f"{type(exc).__name__}: {exc}"
                where = _innermost_datamove_frame(exc)
                try:
                    traceback.print_exc()  # what a real process would print
                except Exception:  # noqa: BLE001
                    pass
    finally:
        restore()
        os.chdir(old_cwd)
    out.flush()
    err.flush()
    texts = []
    for raw in (out_bytes.getvalue(), err_bytes.getvalue()):
        texts.append(raw.decode("utf-8", "surrogateescape"))
    return Outcome(status, texts[0], texts[1], exception, where,
                   [f"{w.category.__name__}: {w.message}" for w in caught])


def _limited_command(argv: Sequence[str], limit: Optional[int]) -> List[str]:
    """``python -m datamove ARGV`` with the limits set by the child itself (no preexec_fn: after a fork in a
    process with threads, such as JAX's, only exec is safe): a file-size limit, SIGXFSZ ignored (a write past
    it fails with EFBIG), and an address-space bound so a hostile file cannot take the machine's memory."""
    fsize = "" if limit is None else f"R.setrlimit(R.RLIMIT_FSIZE, ({limit}, R.getrlimit(R.RLIMIT_FSIZE)[1])); "
    code = ("import resource as R, runpy, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); " + fsize
            + "R.setrlimit(R.RLIMIT_AS, (8 * 2**30, R.getrlimit(R.RLIMIT_AS)[1])); sys.argv[0] = 'datamove'; "
            "runpy.run_module('datamove', run_name='__main__', alter_sys=True)")
    return [sys.executable, "-c", code, *argv]


def invoke_subprocess(argv: Sequence[str], cwd: pathlib.Path, fsize_limit: Optional[int] = None,
                      env: Optional[Dict[str, str]] = None, timeout: float = 60) -> Outcome:
    """``python -m datamove ARGV`` in ``cwd``: the real exit status and streams."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHONWARNINGS")}
    environment.setdefault("LC_ALL", "C.UTF-8")
    environment.update(env or {})
    result = subprocess.run(_limited_command(argv, fsize_limit), cwd=cwd, capture_output=True,
                            env=environment, timeout=timeout)
    err = result.stderr.decode("utf-8", "surrogateescape")
    exception = None
    if "Traceback (most recent call last)" in err:
        last = [line for line in err.splitlines() if line and not line.startswith(" ")][-1]
        exception = last
    return Outcome(result.returncode, result.stdout.decode("utf-8", "surrogateescape"), err, exception,
                   in_process=False)


# ----------------------------------------------------------------- the contract


@dataclasses.dataclass
class Violation:
    key: str  # the failure class
    detail: str
    argv: List[str]
    files: List[str]

    def __str__(self) -> str:
        text = f"[{self.key}] {show_argv(self.argv)}\n      {self.detail}"
        for note in self.files:
            text += f"\n      file {note}"
        return text


def _generalise(text: str) -> str:
    """A message with numbers, quoted names and file names blurred, to group one cause."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", text)
    text = re.sub(r"\d+", "N", text)
    text = re.sub(r"\S{25,}", "…", text)  # a long file name or token
    return text[:60]


def _bad_characters(text: str) -> List[str]:
    return sorted({f"U+{ord(c):04X}" for c in text
                   if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in "\u2028\u2029\x85"})


def _resolve(cwd: pathlib.Path, path: str) -> Optional[str]:
    if not path:
        return None
    return os.path.realpath(os.path.join(cwd, path))


def _check_output_npy(path: str, expected: Optional[np.ndarray]) -> Optional[str]:
    try:
        with open(path, "rb") as file:
            array = np.load(file, allow_pickle=False)
            rest = file.read()
    except Exception as exc:  # noqa: BLE001
        return f"the output {clip(path, 60)} is not a readable .npy: {type(exc).__name__}: {str(exc)[:120]}"
    if rest:
        return f"the output .npy has {len(rest)} bytes after its data"
    if expected is not None:
        same = (array.shape == expected.shape and array.dtype == expected.dtype
                and np.ascontiguousarray(array).tobytes() == np.ascontiguousarray(expected).tobytes())
        if not same:
            return (f"the output differs from the library's result: {array.dtype} {array.shape} vs "
                    f"{expected.dtype} {expected.shape}")
    return None


def _check_output_npz(path: str) -> Optional[str]:
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
            if bad is not None:
                return f"the output .npz member {bad!r} is corrupt"
            names = archive.namelist()
        with np.load(path, allow_pickle=False) as archive:
            for name in archive.files:
                archive[name]
    except Exception as exc:  # noqa: BLE001
        return f"the output {clip(path, 60)} is not a readable .npz: {type(exc).__name__}: {str(exc)[:120]}"
    if not names:
        return "the output .npz holds no array"
    return None


def expected_result(command: Command, before: Snapshot, pool: Pool) -> Optional[np.ndarray]:
    """What the library computes for an unmutated valid ``run OP`` (from the input's bytes before the call)."""
    import datamove

    if command.expected is None:
        return None
    input_name, op, params = command.expected
    rel = os.path.relpath(os.path.realpath(os.path.join(pool.cwd, input_name)), pool.root)
    entry = before.get(rel)
    if entry is None or entry[0] != "file":
        return None
    try:
        data = np.load(io.BytesIO(entry[1]), allow_pickle=False)
        return getattr(datamove, op)(data, *params)
    except Exception:  # noqa: BLE001 - a valid-looking run the library refuses: nothing to compare
        return None


def violations(command: Command, outcome: Outcome, before: Snapshot, after: Snapshot, pool: Pool,
               expected: Optional[np.ndarray] = None) -> List[Violation]:
    """Every way ``outcome`` breaks the contract (see the module's docstring)."""
    found: List[Violation] = []
    files = pool.describe(command.argv)
    if command.fsize_limit is not None:
        files = files + [f"(run under RLIMIT_FSIZE = {command.fsize_limit} bytes: writes past it fail, EFBIG)"]

    def add(key: str, detail: str) -> None:
        found.append(Violation(key, detail, list(command.argv), files))

    status = outcome.status
    allowed = (0, 1, 2) if command.argv[:1] == ["check"] else (0, 2)
    if outcome.exception is not None:
        kind = outcome.exception.split(":")[0]
        add(f"traceback {kind} at {outcome.where}", f"uncaught {clip(outcome.exception, 300)}")
    elif status not in allowed:
        add(f"exit status {status}", f"exit status {status}; stderr {clip(outcome.err, 200)}")
    for message in outcome.warnings:
        add(f"warning {_generalise(message)}", message[:300])
    if status != 0:
        err = outcome.err
        lines = err.split("\n")
        if command.argv[:1] == ["check"] and status == 1 and _bad_characters(outcome.out.replace("\n", "")):
            add("check report holds control characters", f"stdout {clip(outcome.out, 200)}")
        if status == 1 and command.argv[:1] == ["check"] and outcome.exception is None:
            if err:
                add("check exit 1 with stderr", f"stderr {clip(err, 200)}")
            if "FAILED" not in outcome.out:
                add("check exit 1 without a FAILED report", f"stdout {clip(outcome.out, 200)}")
        elif outcome.exception is None:
            if not err.startswith(PREFIX):
                add("stderr does not start with 'datamove: error: '", f"stderr {clip(err, 300)}")
            if not err.endswith("\n") or len(lines) != 2:
                add("stderr is not exactly one line", f"{len(lines) - 1} newlines; stderr {clip(err, 300)}")
            source = _generalise(err[len(PREFIX):] if err.startswith(PREFIX) else err)[:24]
            bad = _bad_characters(err[:-1] if err.endswith("\n") else err)
            if bad:
                add(f"control character in the error line ({source})", f"{', '.join(bad)} in {clip(err, 200)}")
            if len(err) > MAX_ERROR_CHARS:
                add(f"error line too long ({source})", f"{len(err)} characters: {clip(err, 160)}")
            if outcome.out:
                add("stdout written by a failing command", f"stdout {clip(outcome.out, 200)}")
    else:
        if outcome.err:
            add("stderr written by a successful command", f"stderr {clip(outcome.err, 200)}")
        if command.argv[:1] == ["check"] and _bad_characters(outcome.out.replace("\n", "")):
            add("check report holds control characters", f"stdout {clip(outcome.out, 200)}")
        if command.kind in ("shape", "run_op", "run_ir") and outcome.exception is None:
            out = outcome.out
            if out.count("\n") != 1 or not out.endswith("\n") or _bad_characters(out[:-1]):
                add("the success line on stdout is not one clean line", f"stdout {clip(out, 200)}")
    # files
    output_real = None
    if status == 0 and command.output is not None and command.kind in ("run_op", "run_ir"):
        output_real = _resolve(pool.cwd, command.output)
    output_rel = os.path.relpath(output_real, pool.root) if output_real else None
    # a random token soup that succeeded may have written any file it names
    soup_outputs = {os.path.relpath(_resolve(pool.cwd, a), pool.root) for a in command.argv if a} \
        if command.kind == "other" and status == 0 else set()
    for rel, entry in before.items():
        now = after.get(rel)
        if now == entry or rel in soup_outputs:
            continue
        if rel == output_rel:
            if now is not None and now[0] == "file" and entry[0] == "file" and now[3] != entry[3]:
                add("the overwritten output's permissions changed",
                    f"{clip(rel, 60)}: mode {oct(entry[3])} -> {oct(now[3])}")
            continue
        what = "removed" if now is None else ("content changed" if now[0] != entry[0] or now[1] != entry[1]
                                               else "mtime/mode changed")
        key = "an existing file was changed" if status == 0 else "a failing command changed an existing file"
        add(f"{key} ({what})", f"{clip(rel, 80)}: {what} (exit status {status})")
    for rel in sorted(set(after) - set(before)):
        if rel == output_rel or rel in soup_outputs or (output_rel and output_rel.startswith(rel + os.sep)):
            continue
        key = "a failing command left a new file" if status != 0 else "a successful command created another file"
        size = len(after[rel][1]) if after[rel][0] == "file" else 0
        add(key, f"{clip(rel, 80)} ({after[rel][0]}, {size} bytes; exit status {status})")
    # a success wrote its output whole
    if status == 0 and command.output is not None and output_real is not None and command.kind in ("run_op",
                                                                                                    "run_ir"):
        if output_real.startswith(os.path.realpath(pool.root) + os.sep):
            if not os.path.isfile(output_real):
                add("success without an output file", f"{clip(command.output, 60)} is missing")
            elif command.kind == "run_op":
                problem = _check_output_npy(output_real, expected)
                if problem:
                    add("output of a successful run is wrong", problem)
            else:
                problem = _check_output_npz(output_real)
                if problem:
                    add("output of a successful model run is wrong", problem)
    return found


def run_one(command: Command, pool: Pool) -> Tuple[Outcome, List[Violation]]:
    before = snapshot(pool.root)
    expected = expected_result(command, before, pool)
    outcome = invoke(command.argv, pool.cwd, command.fsize_limit)
    after = snapshot(pool.root)
    return outcome, violations(command, outcome, before, after, pool, expected)


def fuzz_seed(seed: int, root: pathlib.Path, commands: int) -> Tuple[List[Violation], Dict[str, int]]:
    """Build a pool for ``seed`` under ``root`` and run ``commands`` random commands in-process."""
    rng = random.Random(seed)
    pool = build_pool(rng, root)
    found: List[Violation] = []
    stats: Dict[str, int] = {}
    for _ in range(commands):
        command = random_command(rng, pool)
        outcome, problems = run_one(command, pool)
        stats[f"{command.kind}:{outcome.status}"] = stats.get(f"{command.kind}:{outcome.status}", 0) + 1
        found += problems
    return found, stats


def summarise(found: Sequence[Violation], limit: int = 40) -> str:
    """One entry per failure class: how often, and its shortest example."""
    classes: Dict[str, List[Violation]] = {}
    for violation in found:
        classes.setdefault(violation.key, []).append(violation)
    parts = [f"{len(found)} contract violation(s) in {len(classes)} class(es):"]
    for key, items in sorted(classes.items(), key=lambda kv: -len(kv[1]))[:limit]:
        example = min(items, key=lambda v: len(show_argv(v.argv)))
        parts.append(f"- {len(items)}x {example}")
    return "\n".join(parts)
