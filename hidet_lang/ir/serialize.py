"""IR modules as JSON text and back: `to_json(module)` and `from_json(text)`, a faithful round trip.

The encoding is generic over the dataclass fields of the IR's classes (nodes, types, attributes, layouts, task
mappings, spans), so a new node class in one of the IR's modules is serialized with no code here. What it
promises:

- `from_json(to_json(m)) == m` (structural equality) and prints the same text; every node keeps its span, and
  `CudaAttrs` keep theirs;
- `Var` identity is kept: each variable is one object wherever it appears, as in the original (a `Var` is
  written in full where it first appears, and as a reference after that);
- constants are exact: ints of any size, floats bit for bit (nan, infinities and -0.0 included), bools stay
  bools; data types are the singletons of `hidet_lang.ir.types`, enums their members;
- anything else (a class outside the IR, a list, a dict, a data type not in the table) is refused with a
  `SerializationError` that names it and where it was found. Reading constructs only the IR's own classes from
  data (no pickle, no eval), and each class's own checks run on what it builds.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from enum import Enum
from functools import cache
from typing import Any

from hidet_lang.ir import expr, func, layout, mapping, span, stmt, types
from hidet_lang.ir.expr import Var
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import DTYPE_BY_NAME, DataType

FORMAT = "hidet_lang-ir"
FORMAT_VERSION = 2  # 2: ForStmt.factor, void pointers
_IR_MODULES = (expr, stmt, func, types, span, layout, mapping)  # the modules whose classes make up a module's IR


class SerializationError(ValueError):
    """An IR module (or a text) that cannot be serialized (or deserialized): what and where."""


def to_json(module: IRModule) -> str:
    """The JSON text of `module`; `from_json` reads it back."""
    if not isinstance(module, IRModule):
        raise SerializationError(f"to_json takes an IRModule, got {type(module).__name__}")
    body = _Encoder().encode(module, "module")
    return json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "module": body}, separators=(",", ":"),
                      allow_nan=False)


def from_json(text: str | bytes) -> IRModule:
    """The IR module `to_json` wrote as `text`; SerializationError for a text that is not one."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise SerializationError(f"not the JSON text of an IR module: {exc}") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise SerializationError("not the JSON text of an IR module (no 'format': 'hidet_lang-ir' header)")
    if document.get("version") != FORMAT_VERSION:
        raise SerializationError(f"IR text of format version {document.get('version')!r}; this version of "
                                 f"hidet_lang reads version {FORMAT_VERSION}")
    module = _Decoder().decode(document.get("module"), "module")
    if not isinstance(module, IRModule):
        raise SerializationError(f"the text holds a {type(module).__name__}, not an IRModule")
    return module


@cache
def ir_classes() -> dict[str, type]:
    """The classes the encoding knows, by name: every dataclass and enum defined in the IR's modules."""
    found: dict[str, type] = {}
    for module in _IR_MODULES:
        for value in vars(module).values():
            if not isinstance(value, type) or value.__module__ != module.__name__:
                continue
            if "__dataclass_fields__" in vars(value) or issubclass(value, Enum):
                if value.__name__ in found:
                    raise RuntimeError(f"two IR classes are called {value.__name__}")
                found[value.__name__] = value
    return found


class _Encoder:
    """Turns IR values into JSON data; numbers the variables in the order they first appear."""

    def __init__(self) -> None:
        self._var_ids: dict[int, int] = {}
        self._vars: list[Var] = []  # kept alive, so that their ids stay theirs

    def encode(self, value: Any, where: str) -> Any:
        if isinstance(value, Enum):  # before str: the IR's enums are strings too
            return self._enum(value, where)
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, float):
            return {"$float": float.hex(value)}
        if hasattr(value, "__index__"):  # ints, and integer scalars of numpy that host code computed
            return operator.index(value)
        if isinstance(value, tuple):
            return [self.encode(item, f"{where}[{k}]") for k, item in enumerate(value)]
        if isinstance(value, Span):
            return {"$span": [value.file, value.line, value.col]}
        if isinstance(value, DataType):
            if DTYPE_BY_NAME.get(value.name) != value:
                raise SerializationError(f"{where}: the data type {value!r} is not one of hidet_lang's")
            return {"$dtype": value.name}
        cls = type(value)
        if ir_classes().get(cls.__name__) is not cls:
            raise SerializationError(f"{where}: cannot serialize a {cls.__module__}.{cls.__qualname__} "
                                     f"({_short(value)}): not a class of the IR")
        if isinstance(value, Var):
            return self._var(value, where)
        return {"$": cls.__name__, **self._fields(value, f"{where}.{cls.__name__}")}

    def _enum(self, value: Enum, where: str) -> dict[str, Any]:
        cls = type(value)
        if ir_classes().get(cls.__name__) is not cls:
            raise SerializationError(f"{where}: cannot serialize the enum member {value!r}: not an enum of the IR")
        return {"$enum": cls.__name__, "value": value.value}

    def _var(self, var: Var, where: str) -> dict[str, Any]:
        known = self._var_ids.get(id(var))
        if known is not None:
            return {"$ref": known}
        number = self._var_ids[id(var)] = len(self._vars)
        self._vars.append(var)
        return {"$": "Var", "$id": number, **self._fields(var, f"{where}.Var({var.name})")}

    def _fields(self, value: Any, where: str) -> dict[str, Any]:
        return {f.name: self.encode(getattr(value, f.name), f"{where}.{f.name}")
                for f in dataclasses.fields(value) if f.init}


class _Decoder:
    """Builds IR values from the JSON data `_Encoder` wrote."""

    def __init__(self) -> None:
        self._vars: dict[int, Var] = {}

    def decode(self, data: Any, where: str) -> Any:
        if data is None or isinstance(data, (bool, int, str)):
            return data
        if isinstance(data, list):
            return tuple(self.decode(item, f"{where}[{k}]") for k, item in enumerate(data))
        if not isinstance(data, dict):
            raise SerializationError(f"{where}: unexpected {type(data).__name__} {_short(data)}")
        try:
            return self._tagged(data, where)
        except SerializationError:
            raise
        except (TypeError, ValueError, KeyError, OverflowError) as exc:
            raise SerializationError(f"{where}: malformed IR data ({type(exc).__name__}: {exc})") from None

    def _tagged(self, data: dict[str, Any], where: str) -> Any:
        if "$float" in data:
            return float.fromhex(data["$float"])
        if "$span" in data:
            file, line, col = data["$span"]
            return Span(_typed(file, str, where), _typed(line, int, where), _typed(col, int, where))
        if "$dtype" in data:
            name = data["$dtype"]
            if name not in DTYPE_BY_NAME:
                raise SerializationError(f"{where}: unknown data type {name!r}")
            return DTYPE_BY_NAME[name]
        if "$ref" in data:
            number = data["$ref"]
            if number not in self._vars:
                raise SerializationError(f"{where}: a reference to variable #{number}, which is not defined before")
            return self._vars[number]
        if "$enum" in data:
            cls = self._class(data["$enum"], where)
            if not issubclass(cls, Enum):
                raise SerializationError(f"{where}: {cls.__name__} is not an enum")
            return cls(data["value"])
        if "$" not in data:
            raise SerializationError(f"{where}: an object with no type tag ({_short(data)})")
        cls = self._class(data["$"], where)
        if not dataclasses.is_dataclass(cls):
            raise SerializationError(f"{where}: {cls.__name__} is not an IR node")
        inner = f"{where}.{cls.__name__}"
        fields = {f.name for f in dataclasses.fields(cls) if f.init}
        given = {k: v for k, v in data.items() if not k.startswith("$")}
        if set(given) != fields:
            raise SerializationError(f"{inner}: fields {sorted(given)}, expected {sorted(fields)}")
        values = {name: self.decode(value, f"{inner}.{name}") for name, value in given.items()}
        built = cls(**values)
        if cls is Var:
            number = data.get("$id")
            if not isinstance(number, int) or number in self._vars:
                raise SerializationError(f"{inner}: a variable without a new number ({number!r})")
            self._vars[number] = built
        return built

    @staticmethod
    def _class(name: Any, where: str) -> type:
        cls = ir_classes().get(name) if isinstance(name, str) else None
        if cls is None:
            raise SerializationError(f"{where}: unknown IR class {name!r}")
        return cls


def _typed(value: Any, kind: type, where: str) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise SerializationError(f"{where}: expected a {kind.__name__}, got {_short(value)}")
    return value


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
