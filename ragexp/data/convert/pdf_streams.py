"""How many bytes a PDF's streams decode to, counted before PDFium reads the file.

A PDF's content, font and object streams are compressed; PDFium inflates the ones a page needs
while it extracts text, so a small file whose stream inflates a thousandfold (a "PDF bomb") grows
memory by gigabytes before anything could refuse it. :func:`check_decoded_size` finds every
stream (``stream`` after its dictionary, up to ``endstream``), applies the filters its dictionary
names (``/FlateDecode``, ``/ASCIIHexDecode``, ``/ASCII85Decode``, ``/RunLengthDecode``,
``/LZWDecode``; image codecs end the chain: text extraction does not decode images), and counts
the bytes they produce, never holding more than the bound, and refuses the file once the total
passes :data:`MAX_DECODED_BYTES`.

Not counted: the streams of an encrypted PDF (opened by PDFium when only an owner password is set),
which cannot be decoded without decrypting them; their size is bounded by the file's byte cap only.
"""

from __future__ import annotations

import base64
import re
import zlib

from ragexp.data.convert.base import Unconvertible

#: What one PDF's streams may decode to in total (a 1,000-page manual's text and fonts: ~50 MiB).
MAX_DECODED_BYTES = 256 * 1024 * 1024
_STREAM = re.compile(rb"(?<![A-Za-z])stream(?:\r\n|\n|\r)")
_FILTER = re.compile(rb"/Filter\s*(\[[^\]]*\]|/[^\s/\[\]<>()]+)")
_NAME = re.compile(rb"/([^\s/\[\]<>()]+)")
_DICT_LOOKBACK = 4096
_CHUNK = 1 << 20


class _Over(Exception):
    pass


def check_decoded_size(data: bytes, limit: int = MAX_DECODED_BYTES) -> int:
    """The decoded size of ``data``'s streams; :class:`Unconvertible` once it passes ``limit``."""
    total = 0
    for match in _STREAM.finditer(data):
        head = data[max(0, match.start() - _DICT_LOOKBACK):match.start()]
        head = head[head.rfind(b"obj") + 1:] if b"obj" in head else head
        found = _FILTER.findall(head)
        names = _NAME.findall(found[-1]) if found else []
        end = data.find(b"endstream", match.end())
        raw = data[match.end():end if end >= 0 else len(data)]
        try:
            total += _decoded_size(raw, [n.decode("latin-1") for n in names], limit - total)
        except _Over:
            total = limit + 1
        if total > limit:
            raise Unconvertible(f"its streams decode to more than {limit // 2**20} MiB (refused before PDFium "
                                "reads it, as a possible PDF bomb)")
    return total


def _decoded_size(raw: bytes, filters: list[str], budget: int) -> int:
    """Bytes ``raw`` decodes to through ``filters``; :class:`_Over` past ``budget``."""
    data = raw
    for position, name in enumerate(filters):
        last = position == len(filters) - 1
        if name in ("FlateDecode", "Fl"):
            if last:
                return _inflated_size(data, budget)
            data = _inflate(data, budget)
        elif name in ("ASCIIHexDecode", "AHx"):
            data = _hex(data)
        elif name in ("ASCII85Decode", "A85"):
            data = _a85(data, budget)
        elif name in ("RunLengthDecode", "RL"):
            data = _run_length(data, budget)
        elif name in ("LZWDecode", "LZW"):
            data = _lzw(data, budget)
        else:  # an image codec or crypt filter: what reaches it is what counts
            break
    if len(data) > budget:
        raise _Over
    return len(data)


def _inflated_size(data: bytes, budget: int) -> int:
    inflater, size, pending = zlib.decompressobj(), 0, data
    try:
        while pending and not inflater.eof:  # past the end, zlib keeps what follows as a tail that never shrinks
            size += len(inflater.decompress(pending, _CHUNK))
            if size > budget:
                raise _Over
            pending = inflater.unconsumed_tail
    except zlib.error:
        pass  # damaged: PDFium stops where the data does too
    return size


def _inflate(data: bytes, budget: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, budget + 1)
    except zlib.error:
        return b""
    if len(out) > budget:
        raise _Over
    return out


def _hex(data: bytes) -> bytes:
    digits = re.sub(rb"[^0-9A-Fa-f]", b"", data.split(b">", 1)[0])
    return bytes.fromhex((digits + b"0" if len(digits) % 2 else digits).decode("ascii"))


def _a85(data: bytes, budget: int) -> bytes:
    text = data.split(b"~>", 1)[0].strip()
    if text.count(b"z") * 4 > budget:
        raise _Over
    try:
        return base64.a85decode(text, ignorechars=b" \t\n\r\f\v")
    except ValueError:
        return b""


def _run_length(data: bytes, budget: int) -> bytes:
    out, i = bytearray(), 0
    while i < len(data) and data[i] != 128:
        length = data[i]
        if length < 128:
            out += data[i + 1:i + 2 + length]
            i += length + 2
        else:
            out += data[i + 1:i + 2] * (257 - length)
            i += 2
        if len(out) > budget:
            raise _Over
    return bytes(out)


def _lzw(data: bytes, budget: int) -> bytes:
    """PDF's LZW (early change 1), MSB-first codes of 9 to 12 bits."""
    table = [bytes([i]) for i in range(256)] + [b"", b""]
    out, previous, bits, value, width = bytearray(), b"", 0, 0, 9
    for byte in data:
        value, bits = (value << 8) | byte, bits + 8
        while bits >= width:
            bits -= width
            code = (value >> bits) & ((1 << width) - 1)
            if code == 256:
                table, previous, width = table[:258], b"", 9
                continue
            if code == 257:
                return bytes(out)
            entry = table[code] if code < len(table) else previous + previous[:1]
            if previous:
                table.append(previous + entry[:1])
            out += entry
            if len(out) > budget:
                raise _Over
            previous = entry
            width = min(12, 9 + (len(table) + 1 >= 512) + (len(table) + 1 >= 1024) + (len(table) + 1 >= 2048))
    return bytes(out)
