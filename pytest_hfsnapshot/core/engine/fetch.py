"""The fetch step: one ``hf_hub_download`` per missing file, hashed as it arrives, fetched again until verified."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from huggingface_hub import hf_hub_download

from ...errors import HfSnapshotError, LockLostError
from .._hf_compat import xet_in_use
from ..cache.formats import count
from ..cache.hashing import ArrivalHasher
from ..cache.locking import HeldCheck, wait_for_client_lock
from ..cache.repair import blob_names
from ..cache.verify import ExpectedFile, ProblemKind, check_file, hash_problem
from ..hub import retry, xet
from ..own_work import own_thread
from . import error_builders, listing, record, resume, space
from .call import Call
from .resolve import known_commit, resolve

log = logging.getLogger("pytest_hfsnapshot")

#: Files transferred at once (what ``snapshot_download`` runs by default).
TRANSFER_WORKERS = 8


@dataclass(frozen=True)
class Fetched:
    """What :func:`download` did besides fetching."""

    #: The files found right under another blob name than the listing's, by path (see Repairer.adopted).
    adopted: dict[str, ExpectedFile] = field(default_factory=dict)
    #: Bytes of downloaded files hashed after their transfer (not while they arrived).
    rehashed: int = 0


def download(call: Call, retrier: retry.Retrier, held: HeldCheck, commit: str, needed: list[ExpectedFile]) -> Fetched:
    """Fetch ``needed`` until each is verified, checking ``held`` before each write step."""
    if call.settings.space_check:
        check_space(call, needed)
    adopted: dict[str, ExpectedFile] = {}
    rehashed = 0
    while True:
        blobs_before = blob_names(call.repo.blobs)
        # How the files left go: what hf_xet reports is read as its own only when it carries some.
        through_xet = xet_in_use() and any(f.xet for f in needed)
        failure: BaseException | None = None
        arrivals = ArrivalHasher(call.repo.blobs, needed)
        try:
            with xet.transfer_settings():
                arrivals.run(_transfer, call, held, commit, needed)
        except HfSnapshotError:
            raise
        except Exception as error:
            failure = error
        still, found = _settle(call, held, commit, needed, blobs_before, arrivals)
        adopted.update(found)
        rehashed += arrivals.rehashed
        if not still:
            return Fetched(adopted, rehashed)
        if failure is None:
            failure = retry.ContentMismatch(
                f"{count(len(still), 'file')} arrived with the wrong size or hash: "
                + ", ".join(sorted(f.path for f in still)[:5])
            )
        kind = retry.classify(failure, through_xet=through_xet)
        if kind.kind == "disk" and kind.errno is not None:
            held()
            call.repair.remove_orphans()
            raise error_builders.disk(
                call.request, failure, kind.errno, cache_dir=call.repo.cache_dir, blobs=call.repo.blobs, still=still
            ) from failure
        filename = error_builders.failed_file(failure) or sorted(f.path for f in still)[0]
        retrier.after(failure, kind, what="the download", filename=filename, hub_call=False)
        log.info(
            "hfsnapshot: retrying the download of %s (%d file(s) left) after %s",
            call.request.label,
            len(still),
            error_builders.cause(kind),
        )
        needed = still


def _settle(
    call: Call,
    held: HeldCheck,
    commit: str,
    needed: list[ExpectedFile],
    blobs_before: set[str],
    arrivals: ArrivalHasher,
) -> tuple[list[ExpectedFile], dict[str, ExpectedFile]]:
    """After a round of transfers: the files still to fetch (what arrived damaged removed first),
    and those adopted under the blob name the server's ETag gave them."""
    repo, repair = call.repo, call.repair
    snapshot_dir = str(repo.snapshot_dir(commit))
    still: list[ExpectedFile] = []
    adopted: dict[str, ExpectedFile] = {}
    fresh: list[ExpectedFile] = []
    for f in needed:
        problem = check_file(repo, snapshot_dir, f, call.layers.roots)
        if problem is None:
            fresh.append(f)
        elif problem.kind is ProblemKind.OTHER_BLOB and (candidate := repair.adopted(commit, f)):
            adopted[f.path] = candidate  # hashed and found right under the name the server's ETag gave it
        elif problem.kind is not ProblemKind.MISSING:
            held()
            repair.remove(commit, f, problem)
            still.append(f)
        else:
            still.append(f)
    new = [f for f in fresh if f.blob_name not in blobs_before or call.hash_all]
    corrupt = set(arrivals.mismatches(repair.blob_pairs(commit, new)))
    for f in fresh:
        if f.path in corrupt:
            held()
            repair.remove(commit, f, hash_problem(f))
            still.append(f)
    return still, adopted


def _transfer(call: Call, held: HeldCheck, commit: str, files: list[ExpectedFile]) -> None:
    """Fetch ``files`` at ``commit``, one ``hf_hub_download`` each, as ``snapshot_download`` does
    (the listing is cached and the revision a commit, so none asks the Hub for either again),
    checking before each that the repo lock is still this process's, after waiting (within the
    lock timeout) for the client's own lock of that file.

    Every file is tried (a failure stops no other); then the first failure in listing order
    is raised, a lost lock before any other.
    """
    request = call.request

    def one(f: ExpectedFile) -> None:
        held()
        wait_for_client_lock(call.repo, f.blob_name, f.path, call.settings.lock_timeout)
        # Said under the check: a loss another thread learns of is said after it (see ensure_held).
        held(lambda: log.debug("hfsnapshot: fetching %s of %s", f.path, request.label))
        with resume.transfers(f.path, request.label):
            hf_hub_download(
                request.repo_id,
                f.path,
                repo_type=request.repo_type,
                revision=commit,
                cache_dir=str(call.repo.cache_dir),
                token=call.settings.token,
            )

    with ThreadPoolExecutor(
        max_workers=TRANSFER_WORKERS, thread_name_prefix="hfsnapshot-fetch", initializer=own_thread
    ) as pool:
        futures = [pool.submit(one, f) for f in files]
    errors = [error for future in futures if (error := future.exception()) is not None]
    lost = [error for error in errors if isinstance(error, LockLostError)]
    if lost or errors:
        raise (lost or errors)[0]


def check_space(call: Call, needed: list[ExpectedFile]) -> None:
    """Refuse, before the first byte, a download the cache's filesystem cannot take."""
    want = [space.need(call.repo, call.request.label, needed)]
    short = space.shortfall(want)
    if short is not None and call.repo.incomplete.found():
        call.repair.remove_orphans()  # debris of killed downloads holds space the check counts as taken
        short = space.shortfall(want)
    if short is not None:
        raise space.not_enough_space(want, short, repo_id=call.request.repo_id, revision=call.request.revision)


def plan(call: Call) -> space.Need:
    """What :func:`download` would fetch for ``call`` now (see
    :func:`~pytest_hfsnapshot.core.engine.engine.plan_request`)."""
    nothing = space.Need(call.request.label, call.repo.cache_dir, ())
    call.layers.probe()
    commit = known_commit(call)
    if record.recorded(call, commit) is not None:
        return nothing
    retrier = call.retrier()
    if commit is None:
        resolved = resolve(call, retrier)
        if resolved.unverified:
            return nothing  # the cache is all the call can use
        commit = resolved.commit
    files = listing.select(call.request, listing.load(call, retrier, commit), commit)
    snapshot_dir = str(call.repo.snapshot_dir(commit))
    if call.repair.folders(commit, files)[0]:
        files = [f for f in files if check_file(call.repo, snapshot_dir, f, call.layers.roots) is not None]
    held = call.layers.find(call.repo, commit, files, hash_all=False, contents=False)
    return space.need(call.repo, call.request.label, [f for f in files if f.path not in held])


__all__ = ["TRANSFER_WORKERS", "Fetched", "check_space", "download", "plan"]
