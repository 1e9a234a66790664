"""A minimal reader of ELF64 symbol tables and sections, enough to list the kernels of a cubin (an ELF image) and
read the sections that describe them.

Used by the tests to check that NVRTC's output is an ELF holding each kernel's symbol, available to the runtime
to check a cubin holds a kernel before asking the driver for it, by `vector_math` to list what the C
library's vector math library exports, and by `cubin_info` to read a cubin's `.nv.info` and `.nv.shared` sections.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

__all__ = ["ElfSection", "ElfSymbol", "STT_FUNC", "is_elf64", "read_sections", "read_symbols"]

STT_FUNC = 2
"""The symbol type of a function (a kernel, in a cubin)."""

_SHT_SYMTAB = 2
_SHT_NOBITS = 8
_SHT_DYNSYM = 11
_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # ELF64 file header (little-endian)
_SECTION = struct.Struct("<IIQQQQIIQQ")  # ELF64 section header
_SYMBOL = struct.Struct("<IBBHQQ")  # ELF64 symbol table entry


class ElfSymbol(NamedTuple):
    """One entry of an ELF symbol table: its name, type (`STT_FUNC`, ...), binding and size in bytes."""

    name: str
    type: int
    binding: int
    size: int


def is_elf64(data: bytes) -> bool:
    """Whether `data` starts with the header of a little-endian 64-bit ELF file."""
    return len(data) >= _HEADER.size and data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1


def read_symbols(data: bytes, dynamic: bool = False) -> list[ElfSymbol]:
    """Return the entries of every `SHT_SYMTAB` section of the ELF64 image `data` (with `dynamic`, of its
    `SHT_DYNSYM` sections: what a shared library exports), names read from the string table each one links to.
    Raises ValueError for anything that is not a well-formed little-endian ELF64."""
    if not is_elf64(data):
        raise ValueError("not a little-endian 64-bit ELF image")
    wanted = _SHT_DYNSYM if dynamic else _SHT_SYMTAB
    try:
        sections = _section_headers(data)
        symbols: list[ElfSymbol] = []
        for section in sections:
            if section[1] == wanted:
                symbols.extend(_table_symbols(data, section, sections[section[6]]))
        return symbols
    except (struct.error, IndexError, ValueError) as exc:
        raise ValueError(f"truncated or malformed ELF image: {exc}") from None


def _section_headers(data: bytes) -> list[tuple[int, ...]]:
    """The unpacked section headers (sh_name, sh_type, ..., sh_entsize) of an ELF64 image."""
    header = _HEADER.unpack_from(data, 0)
    offset, entry_size, count = header[6], header[11], header[12]
    return [_SECTION.unpack_from(data, offset + i * entry_size) for i in range(count)]


def _table_symbols(data: bytes, symtab: tuple[int, ...], strtab: tuple[int, ...]) -> list[ElfSymbol]:
    """The symbols of one symbol table section, with names from its linked string table."""
    table_offset, table_size = symtab[4], symtab[5]
    entry_size = symtab[9] or _SYMBOL.size
    strings = data[strtab[4] : strtab[4] + strtab[5]]
    symbols = []
    for offset in range(table_offset, table_offset + table_size - entry_size + 1, entry_size):
        name_offset, info, _other, _shndx, _value, size = _SYMBOL.unpack_from(data, offset)
        name = strings[name_offset : strings.index(b"\0", name_offset)].decode("utf-8", "replace")
        symbols.append(ElfSymbol(name=name, type=info & 0xF, binding=info >> 4, size=size))
    return symbols


class ElfSection(NamedTuple):
    """One section of an ELF image: its name, type, size in bytes, its `info` field (in a cubin, the index of the
    symbol or section it describes) and its contents (empty for a section that occupies no file space, such as
    `.nv.shared.<kernel>`, whose `size` is the memory it reserves)."""

    name: str
    type: int
    size: int
    info: int
    data: bytes


def read_sections(data: bytes) -> list[ElfSection]:
    """Return the sections of the ELF64 image `data` in order, named from its section header string table.
    Raises ValueError for anything that is not a well-formed little-endian ELF64."""
    if not is_elf64(data):
        raise ValueError("not a little-endian 64-bit ELF image")
    try:
        headers = _section_headers(data)
        names_header = headers[_HEADER.unpack_from(data, 0)[13]]
        names = data[names_header[4] : names_header[4] + names_header[5]]
        sections = []
        for sh_name, sh_type, _flags, _addr, offset, size, _link, info, _align, _entsize in headers:
            name = names[sh_name : names.index(b"\0", sh_name)].decode("utf-8", "replace")
            contents = b"" if sh_type == _SHT_NOBITS else data[offset : offset + size]
            if len(contents) != (0 if sh_type == _SHT_NOBITS else size):
                raise ValueError(f"section {name!r} runs past the end of the image")
            sections.append(ElfSection(name=name, type=sh_type, size=size, info=info, data=contents))
        return sections
    except (struct.error, IndexError, ValueError) as exc:
        raise ValueError(f"truncated or malformed ELF image: {exc}") from None
