"""Files that never lose data: every file Habitat writes is replaced atomically.

``atomic_write_text(path, text)`` writes to a temporary file in the same directory, flushes and
fsyncs it, then ``os.replace``-s it over `path` (and fsyncs the directory where the platform
allows). A reader, a crash or a full disk therefore leave either the previous file or the new
one, never half of one. ``append_line`` adds one line to an append-only file (a step history)
in a single write, so a killed process leaves every line it finished.
"""
from __future__ import annotations

import gzip
import os
import tempfile
from pathlib import Path
from typing import Union

PathLike = Union[str, "os.PathLike[str]"]


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return  # not supported here (e.g. Windows): the rename itself is still atomic
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: PathLike, data: bytes) -> Path:
    """Replaces `path` with `data` atomically (temp file + fsync + rename); returns the path."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:  # name the file asked for, not the temporary one
        raise type(exc)(exc.errno, f"cannot write '{path}' ({exc.strerror}): check that its folder exists "
                                   "and is writable") from exc
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():  # keep the permissions a user gave the file being replaced
            try:
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            except OSError:
                pass
        else:  # mkstemp makes 0600 files; a new file gets the usual umask-based mode
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
    return path


def atomic_write_text(path: PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Replaces `path` with `text` atomically (see :func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode(encoding))


class LineLog:
    """An append-only file of text lines (JSON lines of step totals, for example).

    Each :meth:`append` is one ``write`` of a whole line to a file opened for appending, so a
    process killed at any point leaves every line it had appended; :meth:`sync` fsyncs (for a
    power loss, not needed for a killed process). Readers skip a last line without its newline.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        # Unbuffered: each line reaches the kernel in one write() at once.
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115  (closed in close())

    def append(self, line: str) -> None:
        data = (line.rstrip("\n") + "\n").encode("utf-8")
        self._file.write(data)

    def sync(self) -> None:
        if not self._file.closed:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            try:
                self.sync()
            finally:
                self._file.close()


def read_lines(path: PathLike) -> list[str]:
    """The complete lines of a :class:`LineLog` file (a last line cut by a crash is left out)."""
    data = Path(path).read_bytes()
    if not data:
        return []
    lines = data.split(b"\n")
    # The piece after the last newline is either empty or a line a crash cut short.
    return [line.decode("utf-8") for line in lines[:-1] if line]


GZIP_MAGIC = b"\x1f\x8b"


def is_gzip(path: PathLike) -> bool:
    """Whether the file at `path` is gzip-compressed (by its first bytes, whatever its name);
    False when it cannot be read (the reader that follows names that problem)."""
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


def read_trace_text(path: PathLike) -> str:
    """A trace file's text, plain or gzip-compressed (`trace.json.gz`, as the GPU benchmark
    writes them)."""
    data = Path(path).read_bytes()
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise ValueError(f"'{path}' is a damaged gzip file ({e}): decompress it or record the trace again") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"'{path}' is not a habitat trace (not UTF-8 JSON text nor gzip: {e})") from None



def read_tail(path: PathLike, n: int) -> tuple[bytes, bool]:
    """The last `n` bytes of a trace file's text (decompressed when it is gzip-compressed)
    and whether that is the whole text. A compressed file is decompressed in chunks, holding
    only the tail: a saved forecast's targets (at the end) cost no second copy of the trace."""
    if is_gzip(path):
        tail = b""
        whole = True
        try:
            with gzip.open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    tail += chunk
                    if len(tail) > n:
                        tail, whole = tail[-n:], False
        except (OSError, EOFError) as e:
            raise ValueError(f"'{path}' is a damaged gzip file ({e}): decompress it or record the trace again") from None
        return tail, whole
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        f.seek(max(0, size - n))
        return f.read(), size <= n
