"""``cut`` and ``corrupt`` aimed at a repo file reach that file's bytes, whichever way the client fetches it.

Over plain HTTP a file's bytes are the body of its CDN (or ``/resolve``) answer. Over Xet they are
the xorb ranges hf_xet fetches once it has the file's reconstruction (JSON), which these faults
leave alone: a flipped byte there only made hf_xet fetch the reconstruction again.
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
from pathlib import Path

import pytest
from conftest import file_fetches, xet_in_use
from huggingface_hub import get_session, snapshot_download

from pytest_hfsnapshot import materialize
from pytest_hfsnapshot.testing.hub import LocalHub

EVERY_TRANSPORT = pytest.mark.transports("xet", "xet-noshare", "http")
REPO = "org/faults"
PATTERN = "*model.safetensors"
CHUNK_HEADER = 8  # xet's chunk header: version, compressed length (u24), scheme, length (u24)

_floats = random.Random(5)
# hf_xet stores each chunk as it is, LZ4-compressed or byte-grouped then LZ4-compressed, as it
# measures the chunk: one content of each (test_the_contents_cover_every_chunk_scheme).
CONTENTS = {
    "stored": random.Random(7).randbytes(300_000),
    "lz4": b"".join(b"line %d of a text that compresses\n" % i for i in range(10_000)),
    "bg4-lz4": struct.pack("<60000f", *(_floats.gauss(0, 1) for _ in range(60_000))),
}
SCHEMES = {"stored": 0, "lz4": 1, "bg4-lz4": 2}


def _files(content: str) -> dict[str, bytes]:
    return {"config.json": b'{"model_type": "bert"}', "model.safetensors": CONTENTS[content]}


def _wrong_bytes(got: bytes, want: bytes) -> int:
    assert len(got) == len(want), f"{len(got)} bytes, the Hub's file has {len(want)}"
    return sum(a != b for a, b in zip(got, want, strict=True))


def _byte_fetches(hub: LocalHub) -> list[tuple[str, int, int]]:
    """``(origin, status, body bytes)`` of each GET that carried some of a file's bytes: xorb ranges, CDN bodies."""
    return [
        (r.origin, r.status, r.body_bytes)
        for r in hub.counters().records
        if r.method == "GET" and (r.origin == "cdn" or r.path.startswith("/xorbs/"))
    ]


def _reconstruction(hub: LocalHub, commit: str) -> bytes:
    """The CAS's answer (JSON) to ``/v2/reconstructions/`` for the repo's one Xet file."""
    session = get_session()
    (entry,) = (e for e in session.get(f"{hub.url}/api/models/{REPO}/tree/main").json() if "xetHash" in e)
    token = session.get(f"{hub.url}/api/models/{REPO}/xet-read-token/{commit}").json()["accessToken"]
    url = f"{hub.cas_url}/v2/reconstructions/{entry['xetHash']}"
    return session.get(url, headers={"Authorization": f"Bearer {token}"}).content


def _xorb_ranges(reconstruction: bytes) -> list[bytes]:
    """The xorb ranges a reconstruction names, fetched as hf_xet fetches them."""
    ranges = []
    for fetches in json.loads(reconstruction)["xorbs"].values():
        for fetch in fetches:
            span = fetch["ranges"][0]["bytes"]
            wanted = {"Range": f"bytes={span['start']}-{span['end']}"}
            ranges.append(get_session().get(fetch["url"], headers=wanted).content)
    return ranges


def _chunk_headers(xorb_range: bytes) -> list[tuple[int, bytes]]:
    """``(offset, header)`` of each chunk of a xorb range."""
    chunks, offset = [], 0
    while offset < len(xorb_range):
        header = xorb_range[offset : offset + CHUNK_HEADER]
        chunks.append((offset, header))
        offset += CHUNK_HEADER + int.from_bytes(header[1:4], "little")
    return chunks


@pytest.mark.transports("xet")
@pytest.mark.parametrize("content", sorted(CONTENTS))
def test_the_contents_cover_every_chunk_scheme(local_hub: LocalHub, content: str) -> None:
    commit = local_hub.add_repo(REPO, _files(content))

    ranges = _xorb_ranges(_reconstruction(local_hub, commit))

    assert {header[4] for xorb_range in ranges for _, header in _chunk_headers(xorb_range)} == {SCHEMES[content]}


@pytest.mark.transports("xet")
def test_corrupt_passes_the_reconstruction_over_and_flips_a_chunk_payload_byte(local_hub: LocalHub) -> None:
    commit = local_hub.add_repo(REPO, _files("stored"))
    clean = _reconstruction(local_hub, commit)
    (before,) = _xorb_ranges(clean)
    local_hub.corrupt(PATTERN)

    reconstruction = _reconstruction(local_hub, commit)
    (after,) = _xorb_ranges(reconstruction)

    assert reconstruction == clean
    assert local_hub.pending_faults() == []
    (flipped,) = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    headers = [start for start, _ in _chunk_headers(before)]
    assert len(headers) > 1 and not any(start <= flipped < start + CHUNK_HEADER for start in headers)


@EVERY_TRANSPORT
@pytest.mark.parametrize("content", sorted(CONTENTS))
def test_corrupt_leaves_the_client_a_file_of_the_right_length_with_one_byte_wrong(
    local_hub: LocalHub, content: str
) -> None:
    files = _files(content)
    local_hub.add_repo(REPO, files)
    local_hub.corrupt(PATTERN)

    path = Path(snapshot_download(REPO))

    assert _wrong_bytes((path / "model.safetensors").read_bytes(), files["model.safetensors"]) == 1
    assert (path / "config.json").read_bytes() == files["config.json"]
    assert local_hub.pending_faults() == []
    # The file's bytes were fetched once: nothing told the client they were wrong.
    assert file_fetches(local_hub, PATTERN) == 1
    if xet_in_use(local_hub):
        assert local_hub.request_count("*/reconstructions/*") == 1


@EVERY_TRANSPORT
def test_materialize_catches_a_corrupted_file_and_fetches_it_again(local_hub: LocalHub) -> None:
    files = _files("stored")
    local_hub.add_repo(REPO, files)
    local_hub.corrupt(PATTERN)

    snap = materialize(REPO, retries=2)

    assert snap.source in ("download", "repair")
    got = (snap / "model.safetensors").read_bytes()
    assert hashlib.sha256(got).digest() == hashlib.sha256(files["model.safetensors"]).digest()
    assert local_hub.pending_faults() == []
    assert file_fetches(local_hub, PATTERN) == 2
    # Each fetch carried the whole file's bytes: one xorb range, or one CDN body.
    fetches = _byte_fetches(local_hub)
    if xet_in_use(local_hub):
        assert [(o, s) for o, s, _ in fetches] == [("cas", 206)] * 2 and fetches[0][2] == fetches[1][2], fetches
    else:
        assert fetches == [("cdn", 200, len(got))] * 2


@EVERY_TRANSPORT
def test_cut_makes_the_client_fetch_the_file_bytes_again(local_hub: LocalHub) -> None:
    files = _files("stored")
    local_hub.add_repo(REPO, files)
    local_hub.cut(PATTERN, 1000)

    path = Path(snapshot_download(REPO))

    assert (path / "model.safetensors").read_bytes() == files["model.safetensors"]
    assert local_hub.pending_faults() == []
    fetches = _byte_fetches(local_hub)
    assert len(fetches) == 2 and fetches[0][2] == 1000, fetches
    if xet_in_use(local_hub):
        # hf_xet fetched the cut xorb range again itself; the reconstruction was whole, fetched once.
        assert [(origin, status) for origin, status, _ in fetches] == [("cas", 206)] * 2
        assert local_hub.request_count("*/reconstructions/*") == 1
        assert fetches[1][2] > len(files["model.safetensors"])  # the range holds every chunk, headers included
    else:
        assert fetches == [("cdn", 200, 1000), ("cdn", 200, len(files["model.safetensors"]))]
