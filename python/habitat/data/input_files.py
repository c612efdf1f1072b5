"""Reading files that come from users, within bounds (issue 34).

A trace, a price file or a step history may be damaged or hostile: a FIFO blocks forever, a
device such as ``/dev/zero`` never ends, a 2 MB gzip inflates to gigabytes. Every input is
read here: regular files only (or standard input, named explicitly as ``-``), never more
decompressed bytes than the engine's cap (``habitat._engine.input_limits()``: a share of the
memory available, ``HABITAT_MAX_INPUT_BYTES`` overrides it), and the error names the cap and
the override. A compressed file is inflated in chunks into one buffer sized from the gzip
trailer, so reading holds the decompressed bytes once (plus one chunk): the peak is about the
decompressed size, and a bomb stops at the cap.
"""
from __future__ import annotations

import json
import os
import re
import stat
import sys
import zlib
from typing import Any, BinaryIO, Iterator, Union

from habitat import _engine

PathLike = Union[str, "os.PathLike[str]"]
#: A trace (or any input) read from standard input instead of a file.
STDIN = "-"
GZIP_MAGIC = b"\x1f\x8b"
CHUNK = 1 << 20

InputLimitError = _engine.InputLimitError

_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def max_input_bytes() -> tuple[int, str]:
    """The cap on one input's (decompressed) bytes now, and what set it."""
    limits = _engine.input_limits()
    return int(limits["max_bytes"]), str(limits["bytes_basis"])


def too_large(path: PathLike, what: str, cap: int, basis: str) -> InputLimitError:
    gib = cap // (1 << 30) * 2 + 1  # a value that reads it, if the memory is there
    return InputLimitError(
        f"{what} '{os.fspath(path)}' holds more than {_format_bytes(cap)} once decompressed, more "
        f"than the cap on input files ({basis}): if the memory is there, set "
        f"HABITAT_MAX_INPUT_BYTES={gib}G to read it")


def _format_bytes(n: int) -> str:
    value, unit = float(n), "bytes"
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if value < 1000 or unit == "TB":
            break
        value /= 1000
    return f"{value:.0f} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"


def open_input(path: PathLike, what: str = "file") -> BinaryIO:
    """Opens `path` for reading if it is a regular file (``-``: standard input). Raises
    OSError (FileNotFoundError, PermissionError, IsADirectoryError, ELOOP for a symlink
    loop) naming the file, or InputLimitError for a FIFO, device or socket."""
    if os.fspath(path) == STDIN:
        return sys.stdin.buffer
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not block before it is refused.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise type(exc)(exc.errno, f"cannot read {what} '{os.fspath(path)}': {exc.strerror}",
                        os.fspath(path)) from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, f"cannot read {what} '{os.fspath(path)}': it is a directory",
                                    os.fspath(path))
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
            raise InputLimitError(f"cannot read {what} '{os.fspath(path)}': it is {kind}, not a "
                                  f"regular file; save its contents to a file and give that, "
                                  f"or pipe it in as '{STDIN}'")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _gzip_size_hint(f: BinaryIO) -> int | None:
    """The gzip trailer's size of the last member (mod 2^32): a hint, never trusted."""
    try:
        here = f.tell()
        f.seek(-4, os.SEEK_END)
        tail = f.read(4)
        f.seek(here)
    except (OSError, ValueError):
        return None
    return int.from_bytes(tail, "little") if len(tail) == 4 else None


def _damaged(path: PathLike, why: object) -> ValueError:
    return ValueError(f"'{os.fspath(path)}' is a damaged gzip file ({why}): decompress it or record "
                      "the trace again")


def _inflated(f: BinaryIO, head: bytes, path: PathLike, what: str, cap: int,
              basis: str) -> Iterator[bytes]:
    """The decompressed chunks of the gzip stream `head` + the rest of `f` (every member, zero
    padding between them allowed); InputLimitError once they pass `cap` bytes."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    started = False  # whether the current member has begun
    pending, total = head, 0
    try:
        while True:
            if not pending:
                pending = f.read(CHUNK)
                if not pending:
                    break
            if not started:
                pending = pending.lstrip(b"\0")
                if not pending:
                    continue
                started = True
            data = d.decompress(pending, CHUNK)
            pending = d.unconsumed_tail
            total += len(data)
            if total > cap:
                raise too_large(path, what, cap, basis)
            yield data
            if d.eof:  # a member ended; another may follow
                # unused_data holds all the input after the member; unconsumed_tail may still
                # hold a copy of it (CPython 3.11 when the output limit was reached), so the
                # two are not added: that inflated the next member again and again.
                pending = d.unused_data
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                started = False
    except zlib.error as exc:
        raise _damaged(path, exc) from None
    if started:
        raise _damaged(path, "it ends before its end marker: truncated")


def _inflate(f: BinaryIO, head: bytes, path: PathLike, what: str, cap: int, basis: str) -> bytearray:
    """The decompressed bytes, into one buffer sized from the gzip trailer."""
    hint = _gzip_size_hint(f)
    out = bytearray(min(hint, cap) if hint else 0)
    size = 0
    for data in _inflated(f, head, path, what, cap, basis):
        end = size + len(data)
        if end > len(out):  # more than the trailer said: grow by a quarter at least
            out.extend(bytes(max(end - len(out), len(out) // 4)))
        out[size:end] = data
        size = end
    del out[size:]
    return out


def read_input_bytes(path: PathLike, what: str = "habitat trace") -> bytes | bytearray:
    """The bytes of an input file, decompressed when gzip-compressed (by its first bytes,
    whatever its name), within the input cap (see the module's docstring)."""
    cap, basis = max_input_bytes()
    with open_input(path, what) as f:
        stdin = os.fspath(path) == STDIN
        head = f.read(2)
        if head == GZIP_MAGIC:
            return _inflate(f, head, path, what, cap, basis)
        if not stdin:
            size = os.fstat(f.fileno()).st_size
            if size > cap:
                raise too_large(path, what, cap, basis)
            f.seek(0)
            data = f.read(size + 1)  # one buffer of the file's size: no second copy
            if len(data) <= size:
                return data
            head, data = data, b""  # it grew while read: read on, within the cap
        out = bytearray(head)
        while chunk := f.read(CHUNK):
            out += chunk
            if len(out) > cap:
                raise too_large(path, what, cap, basis)
        return out


def is_gzip(path: PathLike) -> bool:
    """Whether the file at `path` is gzip-compressed (by its first bytes, whatever its name);
    False when it cannot be read or is not a regular file (the reader that follows names
    that problem)."""
    if os.fspath(path) == STDIN:
        return False
    try:
        with open_input(path) as f:
            return f.read(2) == GZIP_MAGIC
    except (OSError, ValueError):
        return False


def read_trace_text(path: PathLike) -> str:
    """A trace file's text, plain or gzip-compressed (`trace.json.gz`, as the GPU benchmark
    writes them), within the input cap."""
    data = read_input_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"'{os.fspath(path)}' is not a habitat trace (not UTF-8 JSON text nor gzip: "
                         f"{e})") from None


def read_tail(path: PathLike, n: int) -> tuple[bytes, bool]:
    """The last `n` bytes of a trace file's text (decompressed when it is gzip-compressed)
    and whether that is the whole text. A compressed file is decompressed in chunks, holding
    only the tail, and no further than the input cap: a saved forecast's targets (at the end)
    cost no second copy of the trace."""
    cap, basis = max_input_bytes()
    with open_input(path, "habitat trace") as f:
        head = f.read(2)
        if head != GZIP_MAGIC:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read(n), size <= n
        tail, whole = b"", True
        for data in _inflated(f, head, path, "habitat trace", cap, basis):
            tail += data
            if len(tail) > n:
                tail, whole = tail[-n:], False
        return tail, whole


#: JSON nesting deeper than any file Habitat reads or writes: every JSON reader refuses more
#: (the engine's kMaxJsonDepth, habitat/input_limits.h), so none recurses without bound.
MAX_JSON_DEPTH: int = _engine.MAX_JSON_DEPTH
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def json_depth(text: str) -> int:
    """How deep `text`'s arrays and objects nest (strings skipped)."""
    depth = deepest = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in "]}":
            depth -= 1
    return deepest


def loads_json(text: str | bytes | bytearray, where: str) -> Any:
    """json.loads with the engine's nesting cap: ValueError naming `where` (not a
    RecursionError) for a document nested deeper than MAX_JSON_DEPTH, or one that is not JSON."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if json_depth(text) > MAX_JSON_DEPTH:
        raise ValueError(f"{where}: not valid JSON (a damaged file?): nested more than "
                         f"{MAX_JSON_DEPTH} levels deep")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not valid JSON ({exc})") from None
