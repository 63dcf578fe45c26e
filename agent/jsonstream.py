"""Read one large JSON document a value at a time, with bounded memory and a nesting limit.

``JSONStream`` is a cursor over a text source (a string, an open text file, or an iterable of lines) that
holds one chunk and the value being decoded, never the whole document: the caller walks the top-level
array or object (``peek``/``take``/``expect``) and decodes each member with ``value()``, which uses
``json.JSONDecoder.raw_decode`` on the buffer and reads more chunks only while the value is cut by the
buffer's end. A value longer than ``max_value`` characters is ``JSONValueTooLong`` (the buffer would
otherwise grow to the file), nesting deeper than the limit is ``JSONTooDeep`` (the C decoder's
RecursionError included), anything else malformed a ``ValueError`` with the decoder's message.
Positions are absolute character offsets; ``line_of`` turns one into a line number in linear time overall.
No Django: the evaluation core and the importers use it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from agent.textclean import MAX_JSON_DEPTH, JSONTooDeep, check_json_depth

CHUNK_CHARS = 1 << 20
MAX_VALUE_CHARS = 1_000_000

_WS = re.compile(r"[ \t\r\n]*")
# A decode error this close to the buffer's end may only mean that the value goes on in the next chunk.
_TAIL = 8


class JSONValueTooLong(ValueError):
    """One value is longer than the stream's limit; the message names it."""


def _reader(source: Any, chunk: int) -> Callable[[], str]:
    if hasattr(source, "read"):
        return lambda: source.read(chunk)
    lines: Iterator[str] = iter(source)

    def read() -> str:
        parts, size = [], 0
        for line in lines:
            parts.append(line)
            size += len(line)
            if size >= chunk:
                break
        return "".join(parts)
    return read


class JSONStream:
    def __init__(self, source: str | Iterable[str], *, chunk: int = CHUNK_CHARS,
                 max_value: int = MAX_VALUE_CHARS, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.max_value, self.max_depth = max_value, max_depth
        self._decoder = json.JSONDecoder()
        if isinstance(source, str):  # already in memory: no copy
            self._buf, self._eof, self._read = source, True, (lambda: "")
        else:
            self._buf, self._eof, self._read = "", False, _reader(source, chunk)
        self._offset = 0  # absolute position of _buf[0]
        self.pos = 0  # absolute position of the cursor
        self._counted, self._line = 0, 1  # newlines counted up to this position, and the line there

    # --- buffer ---------------------------------------------------------------------------------------

    def _fill(self) -> bool:
        """Drop what is before the cursor, append a chunk; False at the end of the source."""
        if self._eof:
            return False
        more = self._read()
        if not more:
            self._eof = True
            return False
        if self._counted < self.pos:
            self.line_of(self.pos)
        cut = self.pos - self._offset
        self._buf = self._buf[cut:] + more
        self._offset = self.pos
        return True

    def line_of(self, pos: int) -> int:
        """The line of an absolute position at or after the start of the buffer (an earlier one counts as the
        buffer's start: what was before it is gone)."""
        buf, base = self._buf, self._offset
        pos = max(pos, base)
        if pos >= self._counted:
            self._line += buf.count("\n", self._counted - base, pos - base)
            self._counted = pos
            return self._line
        return self._line - buf.count("\n", pos - base, self._counted - base)

    # --- cursor -----------------------------------------------------------------------------------------

    def peek(self) -> str:
        """The next character after whitespace ('' at the end), without taking it."""
        while True:
            i = _WS.match(self._buf, self.pos - self._offset).end()
            self.pos = self._offset + i
            if i < len(self._buf):
                return self._buf[i]
            if not self._fill():
                return ""

    def take(self, char: str) -> bool:
        if self.peek() == char:
            self.pos += 1
            return True
        return False

    def expect(self, char: str, what: str) -> None:
        if not self.take(char):
            found = self.peek()
            raise ValueError(f"line {self.line_of(self.pos)}: expected {what}"
                             + (f", found {found!r}" if found else ", found the end of the file"))

    def skip_line(self) -> None:
        """Move past the next newline (to resynchronise after a malformed entry), reading no more than a chunk."""
        while True:
            i = self._buf.find("\n", self.pos - self._offset)
            if i >= 0:
                self.pos = self._offset + i + 1
                return
            self.pos = self._offset + len(self._buf)
            if not self._fill():
                return

    def value(self, *, depth: int = 0) -> Any:
        """Decode the value at the cursor and move past it. ``depth``: levels already open around it."""
        self.peek()
        start = self.pos
        limit = self.max_depth - depth
        while True:
            i = start - self._offset
            try:
                value, end = self._decoder.raw_decode(self._buf, i)
            except RecursionError:
                raise JSONTooDeep(f"line {self.line_of(start)}: JSON nested deeper than {self.max_depth} levels "
                                  "(the limit)") from None
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(self._buf) - _TAIL
                if not cut or self._eof:
                    raise ValueError(f"line {self.line_of(self._offset + exc.pos)}: not JSON ({exc.msg})") from None
                self._more(start)
                continue
            # A number or literal may go on in the next chunk ("0" of "0.5"): decode again with more text.
            if not isinstance(value, (dict, list, str)) and not self._eof and len(self._buf) - end < _TAIL:
                self._more(start)
                continue
            break
        if end - i > self.max_value:
            raise JSONValueTooLong(f"line {self.line_of(start)}: one entry is longer than {self.max_value:,} "
                                   "characters (the limit)")
        if isinstance(value, (dict, list)):
            try:
                check_json_depth(value, max_depth=limit)
            except JSONTooDeep:
                raise JSONTooDeep(f"line {self.line_of(start)}: JSON nested deeper than {self.max_depth} levels "
                                  "(the limit)") from None
        self.pos = self._offset + end
        return value

    def _more(self, start: int) -> None:
        if len(self._buf) - (start - self._offset) > self.max_value:
            raise JSONValueTooLong(f"line {self.line_of(start)}: one entry is longer than {self.max_value:,} "
                                   "characters (the limit)")
        self._fill()


def iter_array(stream: JSONStream, *, depth: int = 0, max_items: int | None = None,
               what: str = "entries") -> Iterator[Any]:
    """The values of the array at the cursor, one at a time (the stream is past it afterwards)."""
    stream.expect("[", "a JSON array")
    if stream.take("]"):
        return
    n = 0
    while True:
        if max_items is not None and n >= max_items:
            raise JSONValueTooLong(f"more than {max_items:,} {what} (the limit)")
        yield stream.value(depth=depth + 1)
        n += 1
        if stream.take("]"):
            return
        stream.expect(",", "',' or ']'")


def iter_members(stream: JSONStream, *, depth: int = 0) -> Iterator[tuple[str, int]]:
    """The keys of the object at the cursor with their lines; after each key the caller reads its value
    (``stream.value(depth=depth + 1)`` or ``iter_array(stream, depth=depth + 1)``) before asking for the next."""
    stream.expect("{", "a JSON object")
    if stream.take("}"):
        return
    while True:
        stream.peek()
        line = stream.line_of(stream.pos)
        key = stream.value(depth=depth + 1)
        if not isinstance(key, str):
            raise ValueError(f"line {line}: expected a key in double quotes")
        stream.expect(":", "':' after the key")
        yield key, line
        if stream.take("}"):
            return
        stream.expect(",", "',' or '}'")
