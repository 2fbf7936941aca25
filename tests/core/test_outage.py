"""One verdict per outage: once a session finds the Hub unreachable, its other snapshots do not
spend their own retry budgets on it until the recheck interval has passed."""

from __future__ import annotations

import logging
import uuid

import pytest

from pytest_hfsnapshot import TransientError, UnverifiedRevisionError, materialize
from pytest_hfsnapshot.core.hub import outage
from pytest_hfsnapshot.testing.hub import LocalHub

REPOS = ("org/a", "org/b", "org/c")
FILES = {"config.json": '{"model_type": "bert"}', "model.safetensors": b"\x03" * 4096}


def _warm(hub: LocalHub) -> None:
    for repo in REPOS:
        hub.add_repo(repo, FILES)
        materialize(repo)
    hub.reset_counters()


def _retries(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if r.getMessage().startswith("hfsnapshot: retrying the revision"))


@pytest.mark.transports("xet", "http")
def test_a_warm_run_with_the_hub_down_spends_one_retry_budget(
    local_hub: LocalHub, caplog: pytest.LogCaptureFixture
) -> None:
    _warm(local_hub)
    url = local_hub.url
    local_hub.stop()
    session = uuid.uuid4().hex
    caplog.set_level(logging.INFO, "pytest_hfsnapshot")

    snaps = [materialize(repo, retries=3, session=session) for repo in REPOS]

    assert all(s.unverified_revision and s.source == "cache" for s in snaps)
    assert _retries(caplog) == 3  # the first snapshot's budget; none for the other two
    assert outage.endpoints(local_hub.cache_dir, session) == [url]
    warnings = [r.getMessage() for r in caplog.records if "is unreachable" in r.getMessage()]
    assert len(warnings) == 3 and all(f"the Hub at {url} is unreachable" in w for w in warnings)


def test_the_give_up_names_the_endpoint(local_hub: LocalHub) -> None:
    local_hub.add_repo("org/a", FILES)
    url = local_hub.url
    local_hub.stop()

    with pytest.raises(TransientError) as caught:
        materialize("org/a", retries=1, session=uuid.uuid4().hex)

    assert str(caught.value).startswith(f"Gave up on the revision of org/a@main at {url} after 2 attempts: last cause ")


def test_strict_fails_the_others_at_once(local_hub: LocalHub, caplog: pytest.LogCaptureFixture) -> None:
    _warm(local_hub)
    url = local_hub.url
    local_hub.stop()
    session = uuid.uuid4().hex
    caplog.set_level(logging.INFO, "pytest_hfsnapshot")

    for repo in REPOS:
        with pytest.raises(UnverifiedRevisionError, match=f"The Hub at {url} could not be reached"):
            materialize(repo, retries=2, session=session, strict=True)

    assert _retries(caplog) == 2


def test_a_5xx_storm_is_remembered_and_a_hub_that_came_back_is_used_after_the_recheck(
    local_hub: LocalHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    _warm(local_hub)
    session = uuid.uuid4().hex
    local_hub.fail("*/revision/*", 503, times=100)

    first = materialize("org/a", retries=1, session=session)
    tried = local_hub.request_count("*/revision/*")
    local_hub.clear_faults()
    second = materialize("org/b", retries=1, session=session)

    assert first.unverified_revision and second.unverified_revision
    assert tried == 2 and local_hub.request_count("*/revision/*") == 2  # org/b did not ask

    monkeypatch.setattr(outage, "RECHECK_AFTER", 0.0)
    third = materialize("org/c", retries=1, session=session)

    assert not third.unverified_revision
    assert local_hub.request_count("*/revision/*", status=200) == 1
    assert outage.known(local_hub.cache_dir, session, local_hub.url) is None


def test_summary_says_it_once(pytester: pytest.Pytester, local_hub: LocalHub) -> None:
    _warm(local_hub)
    url = local_hub.url
    pytester.makeconftest(
        "from pytest_hfsnapshot import snapshot_fixture\n"
        + "".join(f"snap_{r[-1]} = snapshot_fixture({r!r})\n" for r in REPOS)
    )
    pytester.makepyfile(
        "".join(f"def test_{r[-1]}{n}(snap_{r[-1]}):\n    assert snap_{r[-1]}.files\n" for r in REPOS for n in range(2))
    )
    local_hub.stop()

    result = pytester.runpytest_subprocess(
        f"--hf-cache-dir={local_hub.cache_dir}", "-p", "no:cacheprovider", "--hf-retries=2"
    )

    result.assert_outcomes(passed=6)
    line = f"the Hub at {url} was unreachable: 3 snapshots served from the cache without confirming their revision"
    assert result.stdout.lines.count(line) == 1, result.stdout.str()
