"""Files that never lose data: every file Habitat writes is replaced atomically.

``atomic_write_text(path, text)`` writes to a temporary file in the same directory, flushes and
fsyncs it, then ``os.replace``-s it over `path` (and fsyncs the directory where the platform
allows). A reader, a crash or a full disk therefore leave either the previous file or the new
one, never half of one. ``append_line`` adds one line to an append-only file (a step history)
in a single write, so a killed process leaves every line it finished.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Iterator, Union

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

# Inputs are read within bounds by input_files; these names stay importable from here.
from habitat.data.input_files import GZIP_MAGIC, is_gzip, read_input_bytes, read_tail, read_trace_text

__all__ = ["GZIP_MAGIC", "LineLog", "atomic_write_bytes", "atomic_write_text", "is_gzip",
           "read_input_bytes", "read_lines", "read_tail", "read_trace_text"]

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
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):  # a full disk, a quota: name the file, not the temporary one
            raise type(exc)(exc.errno, f"cannot write '{path}' ({exc.strerror or exc}); the previous "
                                       "file, if any, is intact: free some space or choose another "
                                       "path") from None
        raise
    _fsync_dir(directory)
    return path


def atomic_write_text(path: PathLike, text: str, encoding: str = "utf-8") -> Path:
    """Replaces `path` with `text` atomically (see :func:`atomic_write_bytes`)."""
    return atomic_write_bytes(path, text.encode(encoding))


class LineLog:
    """An append-only file of text lines (JSON lines of step totals, for example).

    Each :meth:`append` writes a whole line to a file opened for appending, so a process
    killed at any point leaves every line it had appended; a write that fails part-way (a
    full disk) is cut back off the file, so no torn line stays between good ones and the next
    append starts on a line of its own. Appends hold an exclusive lock on the file while they
    write, so runs sharing the file never interleave. :meth:`sync` fsyncs (for a power loss,
    not needed for a killed process). Readers skip a last line without its newline.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        # Unbuffered: each line reaches the kernel at once.
        self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115  (closed in close())

    def append(self, line: str) -> None:
        data = memoryview((line.rstrip("\n") + "\n").encode("utf-8"))
        fd = self._file.fileno()
        with _locked(fd):
            start = os.fstat(fd).st_size
            try:
                while data:
                    data = data[os.write(fd, data):]
            except OSError:
                try:
                    os.ftruncate(fd, start)  # no torn line: the next append starts clean
                except OSError:
                    pass
                raise

    def sync(self) -> None:
        if not self._file.closed:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        if not self._file.closed:
            try:
                self.sync()
            finally:
                self._file.close()


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    """An exclusive advisory lock on the open file `fd` (none where fcntl is missing)."""
    if fcntl is None:
        yield
        return
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def read_lines(path: PathLike) -> list[str]:
    """The complete lines of a :class:`LineLog` file (a last line cut by a crash is left out),
    read within the input cap."""
    data = read_input_bytes(path, "step history")
    if not data:
        return []
    lines = data.split(b"\n")
    # The piece after the last newline is either empty or a line a crash cut short.
    return [line.decode("utf-8", errors="replace") for line in lines[:-1] if line]
