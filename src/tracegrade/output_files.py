"""Writing output files: the one writer behind every command and reporter that writes a file.

A file is written whole or not at all: into a temporary file beside it, flushed to the disk (``fsync``), then
renamed over it (``os.replace``) and the directory's new entry flushed too, so a crash, a power cut or a full disk
never leaves half a report, nor an empty one (without the first ``fsync``, some filesystems, ext4 with
``data=writeback`` or XFS, can commit the rename before the data). What it writes over is checked first:

* a symlink is written through: its target is replaced, the link stays a link;
* anything but a regular file (a directory, a FIFO, a device such as ``/dev/full``, a socket) is refused,
  since replacing it would destroy it (as root, a device node) rather than write to it;
* a path that is one of the command's input files is refused, so ``convert a.json a.json`` cannot lose ``a.json``.

Every failure, the system's refusals included (no such directory, permission denied), is an
:class:`~tracegrade.errors.OutputFileError` whose message names the path and the reason.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO

from tracegrade.errors import OutputFileError

__all__ = ["replacing", "special_file_kind", "well_formed_text", "write_text_file"]

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def write_text_file(path: str | Path, text: str, *, inputs: Iterable[str | Path] = ()) -> Path:
    """Write UTF-8 ``text`` to ``path`` (parent directories created; ``inputs``: the files it must not be);
    returns ``path`` made absolute.

    The file gets the mode a plain ``open(path, "w")`` would give it: an existing file keeps its mode, a
    new one gets 0666 minus the umask (``tempfile.mkstemp`` would make it 0600, unreadable to a CI
    artifact step or a teammate).
    """
    with replacing(path, inputs=inputs) as fh:
        fh.write(text.encode("utf-8"))
    return Path(path).expanduser().absolute()


@contextlib.contextmanager
def replacing(path: str | Path, *, inputs: Iterable[str | Path] = ()) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into; it replaces ``path`` when the block ends without
    an error, and is removed otherwise (``path`` then untouched). For writers that stream (Parquet, rich)."""
    shown = Path(path).expanduser().absolute()
    target = _destination(shown, inputs)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _create_sibling(target)
    except OSError as exc:
        raise _refused(shown, exc) from None
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())  # the data is on the disk before the name points at it
        if target.exists():  # a new file already has its mode: the umask applied at creation
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
        _sync_directory(target.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise exc if isinstance(exc, OutputFileError) else _refused(shown, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _sync_directory(directory: Path) -> None:
    """Flush ``directory``'s entries (the rename just made) to the disk. Where a directory cannot be opened or
    synced (Windows; some network filesystems refuse with EINVAL) the rename stands as the filesystem keeps it."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def well_formed_text(text: str) -> str:
    """``text`` made encodable as UTF-8: surrogate halves that pair up become the character they stand for,
    a lone one becomes U+FFFD. Python strings may hold lone surrogates (``json.loads`` of ``"\\ud800"``, a
    broken decode); UTF-8 cannot, and strict JSON parsers (jq, RFC 8259 / I-JSON) refuse their escapes too."""
    if _SURROGATE.search(text) is None:  # the common case: one scan, no copy
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _destination(shown: Path, inputs: Iterable[str | Path]) -> Path:
    """The file to replace: ``shown`` with its symlinks resolved, once it is checked to be safe to replace."""
    target = Path(os.path.realpath(shown))
    try:
        # ``shown`` itself, through its links: /proc's links to open files (/dev/stdout) are followed by the
        # system, while realpath gives a pipe's or socket's name (/proc/self/fd/pipe:[N]), a file that is not there
        mode = os.stat(shown).st_mode
    except FileNotFoundError:
        return target  # a new file (or a dangling link's target, created through it)
    except OSError as exc:  # a loop of links, a regular file used as a directory, no permission
        raise _refused(shown, exc) from None
    kind = special_file_kind(mode)
    if kind is not None:
        raise OutputFileError(shown, f"it is {kind}, not a regular file; give the path of a file to write")
    for given in inputs:
        if os.path.exists(given) and os.path.samefile(given, target):
            raise OutputFileError(shown, f"it is the input file {given}; write the output to another path")
    return target


def special_file_kind(mode: int) -> str | None:
    """What a file of ``mode`` (``st_mode``) is when it is not a regular file (``"a directory"``...), else None."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for is_kind, kind in _KINDS if is_kind(mode)), "a special file")


def _refused(shown: Path, exc: OSError) -> OutputFileError:
    """The system's refusal as an OutputFileError, naming the path it was about when that is another one."""
    reason = exc.strerror or str(exc)
    if exc.filename and Path(exc.filename) != shown:
        reason += f" ({exc.filename})"
    return OutputFileError(shown, reason)


def _create_sibling(target: Path) -> tuple[int, Path]:
    """A new, uniquely named temporary file next to ``target``, opened for writing with mode 0666 & ~umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
