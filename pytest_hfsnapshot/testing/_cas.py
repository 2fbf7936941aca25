"""The local Hub's Xet content store: bytes uploaded through hf_xet, read back to answer the CAS."""

from __future__ import annotations

import importlib
import os
import shutil
import struct
import tempfile
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.cache.formats import count

__all__ = ["EMPTY_XET_HASH", "XetStore", "XorbUrl", "import_hf_xet", "is_xet_hash"]

EMPTY_XET_HASH = "0" * 64
"""The xet hash hf_xet gives an empty file: it has no chunks and no shard entry."""

_RECORD = 48
_BOOKEND = b"\xff" * 32
_FLAG_VERIFICATION = 1 << 31
_FLAG_METADATA_EXT = 1 << 30
_CHUNK_HEADER = 8
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_CHECKSUM, _LZ4_CONTENT_SIZE, _LZ4_CONTENT_CHECKSUM, _LZ4_DICT_ID = 0x10, 0x08, 0x04, 0x01
_LZ4_STORED_BLOCK = 1 << 31
_HEX = frozenset("0123456789abcdef")

XorbUrl = Callable[[str, int, int], str]
"""Builds the URL of a xorb byte range: ``(xorb_hash, first_byte, last_byte) -> url``."""


def import_hf_xet() -> Any:
    """hf_xet, imported; ``ImportError`` (with what to do) when it is not installed or broken."""
    try:
        # By name: hf_xet ships no type information, and may be absent.
        return importlib.import_module("hf_xet")
    except ImportError as error:
        raise ImportError(
            "LocalHub(xet=True) needs the hf_xet package (huggingface_hub's Xet client): "
            "`pip install hf_xet`, or use LocalHub(xet=False) to serve LFS files by plain HTTP"
        ) from error


def _hash_hex(raw: bytes) -> str:
    # xet's MerkleHash prints as four little-endian u64, each as 16 hex digits.
    return "".join(f"{word:016x}" for word in struct.unpack("<4Q", raw))


def is_xet_hash(text: str) -> bool:
    """Whether ``text`` has the form of a xet hash (64 lowercase hex digits)."""
    return len(text) == 64 and set(text) <= _HEX


@dataclass(frozen=True)
class _Segment:
    xorb: str
    first_chunk: int
    end_chunk: int  # exclusive
    size: int  # uncompressed bytes


@dataclass(frozen=True)
class _Chunk:
    xorb: str
    index: int
    byte_start: int  # of its header in the xorb file
    byte_end: int  # exclusive
    size: int  # uncompressed


def _flip_in_payload(scheme: int, payload: bytes) -> int:
    """The offset of a byte of a chunk payload that decodes to exactly one byte of the chunk, or raise.

    Scheme 0 stores the chunk as is: its middle byte. Schemes 1 (LZ4) and 2 (byte-grouped, then
    LZ4) hold one LZ4 frame, as lz4_flex writes it (no block or content checksum). LZ4 ends every
    compressed block with literals (its last five input bytes are always literals, copied by no
    later match), so the last byte of the frame's last block is the block's last decoded byte; in
    a stored block, its middle byte. Byte grouping only moves that byte to another place in the
    chunk. Compressed or not, the length stays. A chunk a file uses twice (deduplicated repeats)
    shows the wrong byte at each place.
    """
    if scheme == 0:
        return len(payload) // 2
    if scheme not in (1, 2) or payload[:4] != _LZ4_MAGIC:
        raise ValueError(f"a xorb chunk of compression scheme {scheme} that is not an LZ4 frame: cannot corrupt it")
    flags = payload[4]
    if flags & (_LZ4_BLOCK_CHECKSUM | _LZ4_CONTENT_CHECKSUM):
        raise ValueError("a checksummed LZ4 frame in a xorb chunk: a flipped byte would fail the client's decoder")
    # Magic, FLG, BD, the optional content size and dictionary id, then the header checksum.
    pos = 7 + (8 if flags & _LZ4_CONTENT_SIZE else 0) + (4 if flags & _LZ4_DICT_ID else 0)
    last_block: tuple[int, int, bool] | None = None
    while True:
        (word,) = struct.unpack_from("<I", payload, pos)
        pos += 4
        if word == 0:  # the end mark
            break
        size = word & ~_LZ4_STORED_BLOCK
        last_block = (pos, size, bool(word & _LZ4_STORED_BLOCK))
        pos += size
    if last_block is None or last_block[1] == 0:
        raise ValueError("an LZ4 frame with no data in a xorb chunk: cannot corrupt it")
    start, size, stored = last_block
    return start + size // 2 if stored else start + size - 1


class XetStore:
    """A CAS filled by hf_xet's upload code, and the reconstructions of the files it holds.

    The folder is made on the first upload and removed by :meth:`close` (or when the store is
    garbage-collected). Uploads are cached by sha256: the same bytes are uploaded once, whatever
    the number of repos or commits that hold them. Thread-safe.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._cleanup: weakref.finalize[Any, Any] | None = None
        self._session: Any = None
        self._by_sha256: dict[str, str] = {}
        self._files: dict[str, tuple[_Segment, ...]] = {EMPTY_XET_HASH: ()}
        self._layouts: dict[str, list[tuple[int, int, int]]] = {}
        self._shards_read: set[str] = set()

    def upload(self, contents: Mapping[str, bytes]) -> dict[str, str]:
        """Put ``{sha256: bytes}`` in the CAS (one hf_xet commit for the new ones); their xet hashes."""
        with self._lock:
            missing = {sha: data for sha, data in contents.items() if sha not in self._by_sha256}
            if missing:
                self._upload(missing)
            return {sha: self._by_sha256[sha] for sha in contents}

    def _upload(self, contents: Mapping[str, bytes]) -> None:
        hf_xet = import_hf_xet()
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="hfsnapshot-cas-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, self._dir, True)
        if self._session is None:
            self._session = hf_xet.XetSession()
        commit = self._session.new_upload_commit(endpoint=f"local://{self._dir}")
        handles = {sha: commit.start_upload_bytes(data, sha256=hf_xet.SKIP_SHA256) for sha, data in contents.items()}
        commit.wait_to_finish()
        for sha, handle in handles.items():
            info = handle.result().xet_info
            if info.file_size != len(contents[sha]):
                raise RuntimeError(f"hf_xet stored {count(info.file_size, 'byte')} for a file of {len(contents[sha])}")
            self._by_sha256[sha] = info.hash
        self._read_new_shards()
        unknown = [self._by_sha256[sha] for sha in contents if self._by_sha256[sha] not in self._files]
        if unknown:
            raise RuntimeError(f"hf_xet wrote no shard entry for xet hash(es) {unknown} in {self._dir}")

    def _read_new_shards(self) -> None:
        assert self._dir is not None
        shards = self._dir / "xet" / "xorbs" / "shards"
        # Names only (no sorting, no stat): the folder grows by one shard per upload.
        for name in {entry.name for entry in os.scandir(shards) if entry.name.endswith(".mdb")} - self._shards_read:
            self._read_shard((shards / name).read_bytes())
            self._shards_read.add(name)

    def _read_shard(self, data: bytes) -> None:
        # A shard: a 48-byte header (tag, version, footer size), sections of 48-byte records each
        # closed by an all-0xFF hash, and a footer whose second and third u64 are the offsets of
        # the file-info and xorb-info sections.
        (footer_size,) = struct.unpack_from("<Q", data, 40)
        _, file_info_offset = struct.unpack_from("<QQ", data, len(data) - footer_size)
        pos = file_info_offset
        while True:
            file_hash = data[pos : pos + 32]
            flags, count = struct.unpack_from("<II", data, pos + 32)
            pos += _RECORD
            if file_hash == _BOOKEND:
                return
            segments = []
            for _ in range(count):
                xorb = _hash_hex(data[pos : pos + 32])
                _, size, first, end = struct.unpack_from("<IIII", data, pos + 32)
                segments.append(_Segment(xorb, first, end, size))
                pos += _RECORD
            if flags & _FLAG_VERIFICATION:
                pos += _RECORD * count
            if flags & _FLAG_METADATA_EXT:
                pos += _RECORD
            self._files[_hash_hex(file_hash)] = tuple(segments)

    def _layout(self, xorb: str, chunks: int) -> list[tuple[int, int, int]]:
        """``(start, end, size)`` of the first ``chunks`` chunks of a xorb, walked from its headers.

        A xorb is a run of chunks, each an 8-byte header (version u8, compressed length u24,
        scheme u8, uncompressed length u24) and its bytes, then a footer.
        """
        layout = self._layouts.setdefault(xorb, [])
        if len(layout) < chunks:
            with self._xorb_path(xorb).open("rb") as xorb_file:
                pos = layout[-1][1] if layout else 0
                while len(layout) < chunks:
                    xorb_file.seek(pos)
                    header = xorb_file.read(_CHUNK_HEADER)
                    if len(header) < _CHUNK_HEADER:
                        raise RuntimeError(f"xorb {xorb} ends before chunk {len(layout)}")
                    compressed = int.from_bytes(header[1:4], "little")
                    size = int.from_bytes(header[5:8], "little")
                    layout.append((pos, pos + _CHUNK_HEADER + compressed, size))
                    pos += _CHUNK_HEADER + compressed
        return layout

    def _xorb_path(self, xorb: str) -> Path:
        assert self._dir is not None
        return self._dir / "xet" / "xorbs" / "xorbs" / f"default.{xorb}"

    def has(self, xet_hash: str) -> bool:
        """Whether the store holds a file with this xet hash."""
        with self._lock:
            return xet_hash in self._files

    def size(self, xet_hash: str) -> int:
        """Size in bytes of the file with this xet hash (``KeyError`` if unknown)."""
        with self._lock:
            return sum(s.size for s in self._files[xet_hash])

    def _chunks(self, xet_hash: str) -> list[_Chunk]:
        chunks: list[_Chunk] = []
        for segment in self._files[xet_hash]:
            layout = self._layout(segment.xorb, segment.end_chunk)
            for index in range(segment.first_chunk, segment.end_chunk):
                start, end, size = layout[index]
                chunks.append(_Chunk(segment.xorb, index, start, end, size))
        return chunks

    def reconstruction(
        self, xet_hash: str, span: tuple[int, int] | None, xorb_url: XorbUrl, version: int
    ) -> dict[str, Any]:
        """The CAS answer to ``/v{version}/reconstructions/{xet_hash}`` for bytes ``span`` (inclusive).

        ``span`` must lie in the file (the caller answers 416 otherwise); None is the whole file.
        Consecutive chunks of one xorb form one term, fetched with one ranged GET of ``xorb_url``.
        """
        with self._lock:
            chunks = self._chunks(xet_hash)
        size = sum(c.size for c in chunks)
        first, last = (0, size - 1) if span is None else span
        selected: list[_Chunk] = []
        offset = skip = 0
        for chunk in chunks:
            if offset + chunk.size > first and offset <= last:
                if not selected:
                    skip = first - offset
                selected.append(chunk)
            offset += chunk.size
        groups: list[list[_Chunk]] = []
        for chunk in selected:
            if groups and groups[-1][-1].xorb == chunk.xorb and groups[-1][-1].index + 1 == chunk.index:
                groups[-1].append(chunk)
            else:
                groups.append([chunk])
        terms: list[dict[str, Any]] = []
        spans: dict[str, list[list[int]]] = {}  # xorb -> [first chunk, end chunk) of its terms
        for group in groups:
            xorb = group[0].xorb
            chunk_range = {"start": group[0].index, "end": group[-1].index + 1}
            terms.append({"hash": xorb, "unpacked_length": sum(c.size for c in group), "range": chunk_range})
            spans.setdefault(xorb, []).append([chunk_range["start"], chunk_range["end"]])
        # As the Hub's CAS does, one fetch entry per run of chunks of a xorb: terms that overlap or
        # touch (repeated content dedupes to the same chunks) share one, so each term lies within
        # exactly one entry. hf_xet slices a term's bytes out of the entry starting at its first
        # chunk, and panics when that entry ends before the term does.
        fetch: dict[str, list[dict[str, Any]]] = {}
        for xorb, xorb_spans in spans.items():
            merged: list[list[int]] = []
            for start, end in sorted(xorb_spans):
                if merged and start <= merged[-1][1]:
                    merged[-1][1] = max(merged[-1][1], end)
                else:
                    merged.append([start, end])
            layout = self._layouts[xorb]
            for start, end in merged:
                chunk_range = {"start": start, "end": end}
                byte_range = {"start": layout[start][0], "end": layout[end - 1][1] - 1}
                url = xorb_url(xorb, byte_range["start"], byte_range["end"])
                if version == 2:
                    entry: dict[str, Any] = {"url": url, "ranges": [{"chunks": chunk_range, "bytes": byte_range}]}
                else:
                    entry = {"url": url, "range": chunk_range, "url_range": byte_range}
                fetch.setdefault(xorb, []).append(entry)
        return {"offset_into_first_range": skip, "terms": terms, ("xorbs" if version == 2 else "fetch_info"): fetch}

    def xorb_size(self, xorb: str) -> int | None:
        """Size of a xorb file in bytes, or None if the store has no such xorb."""
        if not is_xet_hash(xorb) or self._dir is None:
            return None
        try:
            return self._xorb_path(xorb).stat().st_size
        except FileNotFoundError:
            return None

    def flip_offset(self, xorb: str, first: int, last: int) -> int:
        """Where to flip one byte of xorb bytes ``first..last`` so that the file they decode to changes in one byte.

        The offset (from ``first``) of a byte in the payload of the middle chunk wholly inside the
        range: hf_xet decodes it to one wrong byte of the same length (see :func:`_flip_in_payload`);
        a flipped header byte or LZ4 control byte would make it fail instead. A range holding no
        whole chunk known to the store (none a reconstruction handed out): its middle byte.
        """
        with self._lock:
            inside = [
                (start, end) for start, end, _ in self._layouts.get(xorb, ()) if first <= start and end - 1 <= last
            ]
        if not inside:
            return (last - first) // 2
        start, end = inside[len(inside) // 2]
        chunk = self.read_xorb(xorb, start, end - 1)
        return start - first + _CHUNK_HEADER + _flip_in_payload(chunk[4], chunk[_CHUNK_HEADER:])

    def read_xorb(self, xorb: str, first: int, last: int) -> bytes:
        """Bytes ``first..last`` (inclusive) of a xorb file (check :meth:`xorb_size` first)."""
        with self._xorb_path(xorb).open("rb") as xorb_file:
            xorb_file.seek(first)
            return xorb_file.read(last - first + 1)

    def close(self) -> None:
        """Remove the CAS folder and forget every upload (the next upload starts a new folder)."""
        with self._lock:
            if self._cleanup is not None:
                self._cleanup()
            self._dir = self._cleanup = None
            self._by_sha256.clear()
            self._files = {EMPTY_XET_HASH: ()}
            self._layouts.clear()
            self._shards_read.clear()
