"""Small OpenVINO IRs written by the tests: the shapes and names each test needs."""

from __future__ import annotations

import pathlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

_TYPES = {np.dtype(np.float32): ("f32", "FP32"), np.dtype(np.int64): ("i64", "I64"),
          np.dtype(np.uint8): ("u8", "U8")}


def _dims(shape: Sequence[int]) -> str:
    return "".join(f"<dim>{d}</dim>" for d in shape)


class IR:
    """A model built layer by layer; ``write`` saves the .xml and .bin."""

    def __init__(self) -> None:
        self.layers: List[str] = []
        self.edges: List[Tuple[int, int, int, int]] = []
        self.weights = bytearray()

    def _add(self, text: str) -> int:
        self.layers.append(text)
        return len(self.layers) - 1

    def parameter(self, name: str, shape: Sequence[int], dtype=np.float32) -> Tuple[int, int]:
        element, precision = _TYPES[np.dtype(dtype)]
        shape_text = ",".join(map(str, shape))
        lid = len(self.layers)
        self._add(f'<layer id="{lid}" name="{name}" type="Parameter" version="opset1">'
                  f'<data shape="{shape_text}" element_type="{element}"/>'
                  f'<output><port id="0" precision="{precision}" names="{name}">{_dims(shape)}</port></output></layer>')
        return lid, 0

    def const(self, values: np.ndarray, name: Optional[str] = None) -> Tuple[int, int]:
        values = np.ascontiguousarray(values)
        element, precision = _TYPES[values.dtype]
        lid = len(self.layers)
        offset = len(self.weights)
        self.weights += values.tobytes()
        self._add(f'<layer id="{lid}" name="{name or f"const{lid}"}" type="Const" version="opset1">'
                  f'<data element_type="{element}" shape="{",".join(map(str, values.shape))}" offset="{offset}" '
                  f'size="{values.nbytes}"/><output><port id="0" precision="{precision}">{_dims(values.shape)}'
                  f'</port></output></layer>')
        return lid, 0

    def op(self, kind: str, inputs: Sequence[Tuple[int, int]], attributes: Dict[str, str] = {},
           name: Optional[str] = None, output_name: Optional[str] = None) -> Tuple[int, int]:
        lid = len(self.layers)
        data = " ".join(f'{key}="{value}"' for key, value in attributes.items())
        ports = "".join(f'<port id="{i}"/>' for i in range(len(inputs)))
        names = f' names="{output_name}"' if output_name is not None else ""
        self._add(f'<layer id="{lid}" name="{name or f"{kind}{lid}"}" type="{kind}" version="opset2">'
                  f'<data {data}/><input>{ports}</input><output><port id="{len(inputs)}"{names}/></output></layer>')
        for i, (source, port) in enumerate(inputs):
            self.edges.append((source, port, lid, i))
        return lid, len(inputs)

    def result(self, source: Tuple[int, int], name: Optional[str] = None,
               output_name: Optional[str] = None) -> None:
        lid = len(self.layers)
        extra = f' output_names="{output_name}"' if output_name is not None else ""
        self._add(f'<layer id="{lid}" name="{name or f"result{lid}"}" type="Result" version="opset1"{extra}>'
                  f'<input><port id="0"/></input></layer>')
        self.edges.append((source[0], source[1], lid, 0))

    def write(self, folder: pathlib.Path, name: str = "model") -> pathlib.Path:
        edges = "".join(f'<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>'
                        for a, b, c, d in self.edges)
        xml = folder / f"{name}.xml"
        xml.write_text(f'<?xml version="1.0"?>\n<net name="{name}" version="11"><layers>{"".join(self.layers)}'
                       f'</layers><edges>{edges}</edges></net>\n')
        (folder / f"{name}.bin").write_bytes(bytes(self.weights))
        return xml
