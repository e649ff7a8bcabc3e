"""The symbols an ELF object file defines and uses, read from its symbol table: what a cached
entry's machine code will ask of the process before LLVM links it (``jit._cache_load``)."""
from __future__ import annotations

import struct

_SYMTAB = 2  # section type of a symbol table; its string table is the section it links to
_UNDEFINED = 0  # section index of a symbol the file uses but does not define
_LOCAL = 0  # binding of a symbol seen only inside the file
_DATA_OR_CODE = (0, 1, 2)  # symbol types no-type, object, function (not section, file, ...)


def symbols(obj: bytes):
    """(defined, undefined): the names of the data and code symbols an ELF64 little-endian object
    file defines (any binding, as the names of its module's definitions), and of the global and
    weak symbols it uses without defining. None for another format or a malformed file."""
    try:
        return _read(obj)
    except (struct.error, ValueError, IndexError):
        return None


def _read(obj):
    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    # section headers: name, type, flags, addr, offset, size, link, info, align, entsize
    sections = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + i * shentsize)
                for i in range(shnum)]
    defined, undefined = set(), set()
    for _, kind, _, _, offset, size, link, _, _, _ in sections:
        if kind != _SYMTAB:
            continue
        strings = sections[link][4]
        # symbols: name, info (binding << 4 | type), other, section index, value, size
        for name, info, _, section, _, _ in struct.iter_unpack("<IBBHQQ",
                                                              obj[offset:offset + size]):
            if not name or info & 0xF not in _DATA_OR_CODE:
                continue
            text = obj[strings + name:obj.index(b"\0", strings + name)].decode()
            if section != _UNDEFINED:
                defined.add(text)
            elif info >> 4 != _LOCAL:
                undefined.add(text)
    return defined, undefined
