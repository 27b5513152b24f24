"""The event files `kcsim replay` reads, read as the Spark job reads them.

A file, a directory of files (hidden names and unfinished copies skipped, as Spark's file
source skips them), or stdin; each line's `source` is "<file name>:<line>", the same in
both engines (the job splits its files through `split_lines` too).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from controller.simulator import RawEvent

STDIN = Path("-")
# Hadoop/Spark treat names starting with "." or "_" as hidden (checksums, _SUCCESS,
# _delta_log) and "._COPYING_" as a file still being written; the file source skips them.
_HIDDEN_PREFIXES = (".", "_")
_SKIPPED_SUFFIXES = (".crc", "_SUCCESS", "._COPYING_")
# what Spark and Hadoop leave beside data files: skipped without a word
_MARKER_SUFFIXES = (".crc", "_SUCCESS")
_NAMES_SHOWN = 5  # of the files skipped, in the warning
# JSON's own whitespace; a line of only these holds no event.
_JSON_BLANKS = " \t\r"


def read_events(path: Path) -> Iterator[RawEvent]:
    """The events of a file, or of a directory's files in name order, in line order.

    The directory is listed when this is called; the files are read as it is iterated.

    `source` is "<file name>:<line>" (1-based, counting every line). A line's text is taken
    without its newline ("\\n" or "\\r\\n"). Lines that are empty or only JSON whitespace
    are skipped, not rejected: JSON-lines writers often end a file with one, and Spark's
    JSON source skips them too. Undecodable bytes are kept (as surrogate escapes) so the
    parser can reject the line and say which byte was wrong."""
    if path == STDIN:
        return _stdin_lines()
    return _read_lines(event_files(path))


def _stdin_lines() -> Iterator[RawEvent]:
    """Standard input, line by line as it arrives (`kcsim import ... | kcsim replay -`)."""
    for number, raw in enumerate(sys.stdin.buffer, start=1):
        line = raw.decode("utf-8", "surrogateescape").removesuffix("\n").removesuffix("\r")
        if line.strip(_JSON_BLANKS):
            yield RawEvent(line, f"-:{number}")


def _read_lines(files: Iterable[Path]) -> Iterator[RawEvent]:
    for file in files:
        yield from split_lines(file.read_bytes(), file.name)


def split_lines(content: bytes, name: str) -> Iterator[RawEvent]:
    """One file's events; both engines read files through this, so `source` is the same:
    "<file name>:<line>", the name relative to the events directory."""
    # decoded whole: "\n" is never part of a UTF-8 sequence, so a line decodes alike
    # either way (undecodable bytes escaped one by one), and one call is 10x faster
    text = content.decode("utf-8", "surrogateescape")
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if line.strip(_JSON_BLANKS):
            yield RawEvent(line, f"{name}:{number}")


class EventFileNameError(ValueError):
    """An event file whose name is not UTF-8: Spark's file source does not list it, so
    neither engine reads it (replay would, and its rows would differ from the job's)."""


def event_files(path: Path) -> list[Path]:
    """`path` itself, or the visible files directly in the directory `path`, by name."""
    if not path.is_dir():
        return [path]
    files = sorted(
        (p for p in path.iterdir() if p.is_file() and is_event_file(p.name)),
        key=lambda p: p.name,
    )
    for file in files:
        check_file_name(file.name)
    return files


def check_file_name(name: str) -> None:
    """Refuse a file name that is not UTF-8 (`os` decodes such bytes as surrogates)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        shown = name.encode("utf-8", "surrogateescape")
        raise EventFileNameError(
            f"event file name {shown!r} is not UTF-8: Spark's file source cannot list it, "
            "so neither engine reads it; rename the file"
        ) from None


def is_event_file(name: str) -> bool:
    return not name.startswith(_HIDDEN_PREFIXES) and not name.endswith(_SKIPPED_SUFFIXES)


def skipped_files_warning(path: Path) -> str | None:
    """What to tell of the files directly in the directory `path` that neither engine
    reads although they may hold events: hidden names (`.x`, `_x`) and files still being
    copied (`._COPYING_`); checksums and `_SUCCESS` markers go unmentioned. None if there
    are none (or `path` is a file)."""
    if not path.is_dir():
        return None
    names = sorted(
        _printable_name(p.name)
        for p in path.iterdir()
        if p.is_file() and not is_event_file(p.name) and not p.name.endswith(_MARKER_SUFFIXES)
    )
    if not names:
        return None
    shown = ", ".join(names[:_NAMES_SHOWN]) + (", ..." if len(names) > _NAMES_SHOWN else "")
    where = _printable_name(str(path))
    return (
        f"skipped {len(names)} file(s) in {where} that neither replay nor the Spark job "
        f"reads (a name starting with '.' or '_', or a copy not finished): {shown}"
    )


def _printable_name(name: str) -> str:
    """A file name or path whose bytes are not all UTF-8 with each such byte as `\\xNN` (`os`
    decodes them as surrogates, which a strict stream cannot encode)."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
