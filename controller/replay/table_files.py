"""The tables `kcsim replay` writes, `DIR/<table>.jsonl`, and the reader of every form.

Append-only tables are written as the batches produce them, state tables once at the
end. With `--compress` each is `DIR/<table>.jsonl.zst` instead, the same lines in
Zstandard: a new broker's UpdateMetadata names every partition (28.5 MB of JSON at 100k
partitions), so a rolling restart of a large cluster writes GBs of JSON, most of it
entries the bodies just before already held (`table_file` finds any form, gzipped
`.jsonl.gz` of earlier runs too; every reader in the repo goes through it).
"""

from __future__ import annotations

import gzip
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack
from itertools import compress, islice, repeat
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from operator import is_not
from pathlib import Path
from typing import IO, Any

import orjson

from controller.memory import cyclic_gc_paused
from controller.simulator import Row
from controller.zk.metadata_entries import FullBody
from controller.zk.request_log import PayloadRows
from schemas import TABLES, Table
from schemas.types import DOUBLE, ArrayOf, MapOf, StructOf, contains

_ROWS_PER_WRITE = 10_000  # bounds the memory of writing a large state table
_BYTES_PER_WRITE = 16 << 20  # and of a table of large rows
_ENCODE_ROWS = 256  # rows encoded in one go (their texts held at once, twice: kept few)
# json.dumps's text with these options (_encode writes the same, faster); json.dumps itself
# builds an encoder per call
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
_LIST_SLICE = 10_000  # items of a long list column encoded at a time
_LONG_LIST = 1_000  # a row with a list longer than this is written in pieces (EntryTexts)
# the longest UpdateMetadata body kept with its entries' texts for the next one (~0.25 KB
# each, the entries themselves being held by the core anyway: 50 MB at most; a larger
# cluster's bodies are encoded whole each time)
_ENTRY_TEXTS = 200_000
PLAIN_SUFFIX = ".jsonl"
COMPRESSED_SUFFIX = ".jsonl.zst"  # what --compress writes
GZIP_SUFFIX = ".jsonl.gz"  # what --compress wrote before: still read, never written
_SUFFIXES = (COMPRESSED_SUFFIX, GZIP_SUFFIX, PLAIN_SUFFIX)  # table_file's order
# One 2^23 = 8 MiB window for every table. Rows repeat within a few MiB, and a request
# body's entries repeat those of the bodies just before it. A 128 MiB window (request
# bodies, before the 8 MiB window) reached back over a whole UpdateMetadata body of up to ~400k
# partitions, which the next new broker's nearly repeats: on the 100k-partition rolling
# restart's 3.9 GB of request bodies it wrote 20.8 MB against 22.3 MB now, for 120 MiB
# more peak memory (the window is held on write, and on read as far as the file goes) and
# no less CPU (docs/performance-log.md, entry abd9ca7). Level 1, no long-distance
# matching, one thread: with the 128 MiB window, against level 1's 20.8 MB in 1.7 s of
# CPU, long-distance matching gave 54.7 MB in 17 s, level 3 20.4 MB in 2.0 s, a worker
# thread 20.9 MB in 2.8 s (docs/performance-log.md, entry bb8a4e4).
_ZSTD_WINDOW_LOG = 23
# what a reader takes: the 128 MiB windows of files written before, and the largest
# window zstd's decoders take by default (pyarrow among them)
_ZSTD_MAX_WINDOW_LOG = 27
_ZSTD_LEVEL = 1


def write_tables(
    out: Path, tables: Mapping[str, Iterable[Row]], compress: bool = False, ordered: bool = False
) -> None:
    """Write (replacing) `out/<table>.jsonl` (`.jsonl.zst` with `compress`) for each named
    table. `ordered`: the rows are the core's (see _write_rows)."""
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in tables.items():
        with _open_table(out, name, compress) as handle:
            _write_rows(handle, TABLES[name], rows, ordered=ordered)


class AppendFiles:
    """One open file per append-only table, created (empty) up front so every table has a
    file even when no row ever comes."""

    def __init__(self, out: Path, tables: Iterable[Table], compress: bool = False) -> None:
        self._tables = {t.name: t for t in tables}
        self._out = out
        self._compress = compress
        self._handles: dict[str, IO[bytes]] = {}
        # closes every file opened, whatever fails: an unclosed compressed file is left
        # without its frame's end
        self._closing = ExitStack()
        # one for the whole replay: a long body is compared with the last, across batches
        self._texts = EntryTexts()

    def __enter__(self) -> AppendFiles:
        with ExitStack() as opening:
            for name in self._tables:
                handle = _open_table(self._out, name, self._compress)
                self._handles[name] = opening.enter_context(handle)
            self._closing = opening.pop_all()  # (all open: closed on exit)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closing.close()

    def write(self, table: str, rows: Iterable[Row]) -> None:
        """Append the rows to the table's file, consuming them: the caller drops them
        after. A list is emptied (its places set to None) as it is written, and request
        payloads are drained from their log, whose request rows can no longer be read
        (`controller_requests` comes before `request_payloads` in APPEND_TABLES)."""
        if table not in self._tables:
            raise ValueError(f"the simulator appended rows to {table!r}, not an append table")
        if isinstance(rows, PayloadRows):
            rows = rows.drain()
        # (the simulator's rows: in column order)
        _write_rows(
            self._handles[table], self._tables[table], rows, self._texts, ordered=True, release=True
        )


def table_file(directory: Path, name: str) -> Path:
    """A replay output directory's file of a table: `<name>.jsonl.zst`, `<name>.jsonl.gz`
    (an earlier `--compress`) or `<name>.jsonl` (the plain name when none exists). Replay
    leaves only one of them."""
    for suffix in _SUFFIXES:
        path = directory / f"{name}{suffix}"
        if path.exists():
            return path
    return directory / f"{name}{PLAIN_SUFFIX}"


def open_table(path: Path) -> IO[str]:
    """A table file's text, decompressed by its name, streamed: read it line by line and
    memory stays flat."""
    if path.name.endswith(COMPRESSED_SUFFIX):
        import zstandard  # here: the core ships to Spark executors, which do not need it

        raw = path.open("rb")
        decompressor = zstandard.ZstdDecompressor(max_window_size=1 << _ZSTD_MAX_WINDOW_LOG)
        stream = io.BufferedReader(decompressor.stream_reader(raw, closefd=True))
        return io.TextIOWrapper(stream, encoding="utf-8")
    if path.name.endswith(GZIP_SUFFIX):
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _open_table(out: Path, name: str, compress: bool) -> IO[bytes]:
    written = out / f"{name}{COMPRESSED_SUFFIX if compress else PLAIN_SUFFIX}"
    # the other forms go: a reader must not find a previous run's file next to this one
    for suffix in _SUFFIXES:
        if out / f"{name}{suffix}" != written:
            (out / f"{name}{suffix}").unlink(missing_ok=True)
    # (bytes: the rows' JSON is encoded as UTF-8 bytes, see _encode)
    if compress:
        import zstandard  # as in open_table

        parameters = zstandard.ZstdCompressionParameters.from_level(
            _ZSTD_LEVEL, window_log=_ZSTD_WINDOW_LOG
        )
        compressor = zstandard.ZstdCompressor(compression_params=parameters)
        # (no buffer in front: gathering the small writes of a long row's pieces cost more
        # than the compressor's own calls for them)
        return compressor.stream_writer(written.open("wb"), closefd=True)
    return written.open("wb")


def _write_rows(
    handle: IO[bytes],
    table: Table,
    rows: Iterable[Row],
    texts: EntryTexts | None = None,
    ordered: bool = False,
    release: bool = False,
) -> None:
    """Rows as JSON lines in the table's column order. A column missing from a row is
    written as null, as Delta would store it. Rows of a table without request entries (1.7M
    state changes in a rolling restart of 100k partitions) are taken _ENCODE_ROWS at a
    time, encoded in one call with no Python step per row, and written a block at a time.
    A request body (up to _LONG_LIST entries) is encoded in one call and its text gathered
    with others into one write per chunk (_ROWS_PER_WRITE rows or _BYTES_PER_WRITE
    bytes); a longer one (a new broker's UpdateMetadata names every partition: ~290
    MB of JSON at 1M partitions) is written a slice at a time, through `texts` (an
    unchanged entry of the last UpdateMetadata body is not encoded again). `ordered`: the
    rows are the core's, every column in the table's order (tests/test_properties checks
    each output row), so a block of them is not checked or copied (a request body is
    still checked on its own: one check per body costs nothing)."""
    columns = table.column_names
    lists = tuple(c.name for c in table.columns if isinstance(c.type, ArrayOf))
    has_entries = any(
        isinstance(c.type, ArrayOf) and isinstance(c.type.element, StructOf) for c in table.columns
    )
    texts = texts or EntryTexts()
    encode = _encoder_of(table)
    # no object inside a row: a row's end is the only "},{" outside a string
    flat = not any(contains(c.type, _is_object) for c in table.columns) and encode is _encode
    chunk = _Chunk(handle)
    # the texts, the encoder's item lists and the kept texts' tuples are acyclic: a
    # collection they would trigger finds nothing (2% of the run's CPU at 100k partitions)
    with cyclic_gc_paused():
        for block in _blocks(rows, release):
            if not has_entries:
                # (a list there names brokers or topics: never long enough to need pieces;
                # a block's text goes straight to the file, not through a chunk)
                if not ordered:
                    block = _in_column_order(columns, block)
                handle.write(_json_lines(block, encode, flat))
                handle.write(b"\n")
                continue
            for row in block:
                if any(len(row.get(c) or ()) > _LONG_LIST for c in lists):
                    chunk.flush()
                    for piece in _json_pieces(columns, row, texts, encode):
                        handle.write(piece)
                else:  # (a request body: one call for it, its entries too)
                    chunk.add(_json_line(columns, row, encode))
        chunk.flush()


def _blocks(rows: Iterable[Row], release: bool) -> Iterator[list[Row]]:
    """The rows, _ENCODE_ROWS at a time. With `release` (a list the caller drops after),
    each block's places in the list are emptied as it is taken: its rows are freed once
    written, while still in the cache, instead of all at once when the batch ends (1.7M
    state changes in a rolling restart of 100k partitions, freed cold: 6% of its CPU)."""
    if release and isinstance(rows, list):
        for start in range(0, len(rows), _ENCODE_ROWS):
            block = rows[start : start + _ENCODE_ROWS]
            rows[start : start + _ENCODE_ROWS] = repeat(None, len(block))
            yield block
        return
    remaining = iter(rows)
    while block := list(islice(remaining, _ENCODE_ROWS)):
        yield block


class _Chunk:
    """Texts of rows gathered into one write, of up to _ROWS_PER_WRITE rows or
    _BYTES_PER_WRITE bytes."""

    __slots__ = ("_handle", "_size", "_texts")

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle
        self._texts: list[bytes] = []  # one per row
        self._size = 0

    def add(self, text: bytes) -> None:
        """One row's text."""
        self._texts.append(text)
        self._size += len(text)
        if len(self._texts) >= _ROWS_PER_WRITE or self._size >= _BYTES_PER_WRITE:
            self.flush()

    def flush(self) -> None:
        if self._texts:
            self._handle.write(b"".join(self._texts))
            self._texts, self._size = [], 0


def _in_column_order(columns: tuple[str, ...], block: list[Row]) -> list[Row]:
    """The rows with their columns in `columns`' order (the core's rows are: no copy)."""
    if all(map(columns.__eq__, map(tuple, block))):
        return block
    return [row if tuple(row) == columns else {c: row.get(c) for c in columns} for row in block]


def _json_lines(
    rows: list[Row], encode: Callable[[object], bytes], flat: bool
) -> bytes | memoryview:
    """The rows' JSON lines, each but the last ended by a newline. Rows of a `flat` table
    (scalars and lists of scalars: no object inside a row) are encoded by one orjson call
    for the whole list, whose rows are then split where one ends: a "},{" followed by a
    quote, which a string cannot hold unescaped. A list orjson refuses is encoded row by
    row."""
    if flat:
        try:
            text = orjson.dumps(rows)
        except TypeError:  # orjson.JSONEncodeError: a row for _encode_exact
            pass
        else:  # (a view without the list's brackets: no copy)
            return memoryview(text.replace(b'},{"', b'}\n{"'))[1:-1]
    return b"\n".join(map(encode, rows))


def _is_object(data_type: object) -> bool:
    return isinstance(data_type, (StructOf, MapOf))


def _json_line(columns: tuple[str, ...], row: Row, encode: Callable[[object], bytes]) -> bytes:
    if tuple(row) != columns:  # the core's rows come in column order: no copy for them
        row = {c: row.get(c) for c in columns}
    return encode(row) + b"\n"


def _json_pieces(
    columns: tuple[str, ...], row: Row, texts: EntryTexts, encode: Callable[[object], bytes]
) -> Iterator[bytes | memoryview]:
    """_json_line's text in pieces: a list is encoded _LIST_SLICE items at a time, through
    `texts` (request entries: no floats)."""
    separator = b"{"
    for column in columns:
        value = row.get(column)
        yield separator + encode(column) + b":"
        separator = b","
        if isinstance(value, list):
            yield b"["
            yield from texts.pieces(value)
            yield b"]"
        else:
            yield encode(value)
    yield b"}\n"


class EntryTexts:
    """The JSON text of request entries: a list is encoded a slice at a time in one orjson
    call (no Python step per entry), except a long UpdateMetadata body, compared with the
    last one by the identity of its entries.

    Each new broker's UpdateMetadata names every partition (10M entries in a 100-broker
    rolling restart of 100k partitions), and the core hands out the same dict for a
    partition whose entry is unchanged (controller.zk.metadata_entries; request rows are never
    changed once built). The last such body of at most _ENTRY_TEXTS entries is kept with
    its entries' texts: only the positions of the next one (of the same length) holding
    another object are encoded. A full body made right after the kept one names them
    (`FullBody.changed`); any other is compared with it item by item in C (`is_not`),
    which cost 3% of that rolling restart (70 ns per entry, its lists out of cache). Other
    lists (LeaderAndIsr and StopReplica bodies, ~3 recipients' bodies naming each entry)
    are encoded whole: a text kept per entry and found again by its identity cost more in
    Python than orjson spends encoding it again (0.89 against 0.49 µs per entry)."""

    __slots__ = ("_body", "_places")

    def __init__(self) -> None:
        # the last long UpdateMetadata body (held: its items' ids stay theirs) and the
        # texts of its items, position by position
        self._body: tuple[list[Any], list[bytes]] | None = None
        # 0, 1, 2, ... made once: the comparison with the kept body takes its positions
        # from here instead of making and freeing an int per item (10M in a 100-broker
        # rolling restart of 100k partitions)
        self._places: list[int] = []

    def pieces(self, items: list[Any]) -> Iterator[bytes | memoryview]:
        """`_encode(items)` without its brackets, in pieces of up to _LIST_SLICE items (never
        the whole text of a body at once)."""
        if (
            _LONG_LIST < len(items) <= _ENTRY_TEXTS
            and _is_update_metadata_body(items)
            and self._worth_keeping(items)
        ):
            texts = self._body_texts(items)
            for start in range(0, len(items), _LIST_SLICE):
                if start:
                    yield b","
                yield b",".join(texts[start : start + _LIST_SLICE])
            return
        for start in range(0, len(items), _LIST_SLICE):
            # (a list's text is its items' texts, joined)
            if start:
                yield b","
            # (a view without the brackets: the slice's text is not copied)
            yield memoryview(_encode(items[start : start + _LIST_SLICE]))[1:-1]

    def _worth_keeping(self, items: list[Any]) -> bool:
        """Whether a long UpdateMetadata body is to be the kept one: not if it is less than
        half as long as that. The one worth keeping is the last full body (a new broker's,
        every partition), and those sent in between (a controlled shutdown's, its broker's
        partitions) are shorter: they are encoded as any other list."""
        kept = self._body
        return kept is None or len(items) >= len(kept[0]) // 2

    def _body_texts(self, items: list[Any]) -> list[bytes]:
        """The texts of a long UpdateMetadata body's items, which becomes the kept body."""
        kept = self._body
        self._body = None  # (not left half-updated by an error)
        if kept is None or len(kept[0]) != len(items):
            texts = list(map(_kept_text, items))
        else:
            previous, texts = kept
            for position in self._changed_places(items, previous):
                texts[position] = _kept_text(items[position])
        self._body = (items, texts)
        return texts

    def _changed_places(self, items: list[Any], previous: list[Any]) -> Iterable[int]:
        """The places (of two bodies of the same length) whose entry is another object in
        `items` than in `previous`: as the core listed them when `items` is a full body
        made right after `previous` (no pass over 100k places), else found item by item."""
        if (
            type(items) is FullBody
            and type(previous) is FullBody
            and items.since is previous.token  # (a token is never None)
        ):
            return items.changed
        places = self._places
        if len(places) < len(items):
            places.extend(range(len(places), len(items)))
        return compress(places, map(is_not, items, previous))


def _kept_text(item: object) -> bytes:
    """`_encode(item)`, copied: orjson's bytes for one entry (~280 bytes) hold its whole
    first buffer (4 KiB with orjson 3.13, by tracemalloc), so a kept body's 100k of them
    would hold 400 MB (and made the replay 4% slower); the copy is its own size."""
    return bytes(memoryview(_encode(item)))


def _is_update_metadata_body(items: list[Any]) -> bool:
    """A list of UpdateMetadata entries, by its first item (the kind with offline
    replicas); only a hint: every item is still encoded as it is."""
    first = items[0] if items else None
    return type(first) is dict and first.get("offline_replicas") is not None


def _make_exact_dumps() -> Callable[[object], str]:
    """`_ENCODER.encode`, with its C encoder made once: `JSONEncoder.encode` makes one per
    call, which costs as much as encoding a request entry. Circular references are not
    checked (rows hold none); the text is the same (a test compares them)."""
    if c_make_encoder is None:  # an interpreter without the C accelerator
        return _ENCODER.encode
    encoder = c_make_encoder(
        None,  # markers: no circular-reference check
        _ENCODER.default,
        encode_basestring,  # ensure_ascii=False
        None,  # indent
        _ENCODER.key_separator,
        _ENCODER.item_separator,
        False,  # sort_keys
        False,  # skipkeys
        True,  # allow_nan
    )
    join = "".join
    return lambda value: join(encoder(value, 0))


_dumps_exact = _make_exact_dumps()


def _encode_exact(value: object) -> bytes:
    """`_dumps_exact(value)` as UTF-8. A lone surrogate (an undecodable input byte that
    reached a row) becomes a JSON "\\udcXX" escape, so the file stays valid UTF-8 JSON."""
    return _dumps_exact(value).encode("utf-8", "backslashreplace")


def _encode(value: object) -> bytes:
    """`_encode_exact(value)`'s bytes for a value holding no float, through orjson (~5x
    faster on a request entry or a state change: a 100k-partition rolling restart encodes
    ~5M of them; its bytes are written as they are, never decoded). What orjson refuses (a
    lone surrogate, an integer over 64 bits, a key that is not a string) goes through
    `_encode_exact`, which writes it as json.dumps does. A float may be written otherwise
    (1e-05 as 0.00001, NaN as null): tables with a double column are encoded by
    `_encode_exact` (`_encoder_of`)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return _encode_exact(value)


def _encoder_of(table: Table) -> Callable[[object], bytes]:
    """The encoder of a table's rows: `_encode`, or `_encode_exact` where a column holds
    floats."""
    if any(contains(c.type, lambda t: t == DOUBLE) for c in table.columns):
        return _encode_exact
    return _encode
