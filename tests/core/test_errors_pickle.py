"""Every exported error survives pickling whole, as a multiprocessing or xdist caller receives it."""

from __future__ import annotations

import copy
import inspect
import pickle
import typing

import pytest

import pytest_hfsnapshot
from pytest_hfsnapshot import errors

EXPORTED = sorted(
    (
        value
        for name in pytest_hfsnapshot.__all__
        if isinstance(value := getattr(pytest_hfsnapshot, name), type) and issubclass(value, BaseException)
    ),
    key=lambda cls: cls.__name__,
)

#: A value for each annotation an error's ``__init__`` takes, unlike any default, so that a field
#: lost on the way shows. A new error with another annotation fails here until it gets one.
SAMPLES: dict[object, object] = {
    str: "sample",
    int: 28,
    float: 1.5,
    dict[str, object]: {"host": "runner-7", "pid": 4242},
    tuple[str, ...]: ("config.json", "model.safetensors"),
}


def sample(annotation: object) -> object:
    """A sample for ``annotation``, the non-None member of ``X | None`` included."""
    if annotation not in SAMPLES and type(None) in typing.get_args(annotation):
        (annotation,) = (arg for arg in typing.get_args(annotation) if arg is not type(None))
    assert annotation in SAMPLES, f"no sample value for {annotation!r}: add one to SAMPLES"
    return SAMPLES[annotation]


def build(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` with every parameter of its ``__init__`` given a sample, optional ones too."""
    init = cls.__init__
    if not inspect.isfunction(init):  # a builtin's (a warning's): one message
        return cls("a message")
    hints = typing.get_type_hints(init)
    positional: list[object] = []
    keywords: dict[str, object] = {}
    for parameter in list(inspect.signature(init).parameters.values())[1:]:
        value = f"what failed ({cls.__name__})" if parameter.name == "message" else sample(hints[parameter.name])
        if parameter.kind is parameter.KEYWORD_ONLY:
            keywords[parameter.name] = value
        else:
            positional.append(value)
    return cls(*positional, **keywords)


def assert_same(copied: BaseException, original: BaseException) -> None:
    assert type(copied) is type(original)
    assert copied.args == original.args
    assert str(copied) == str(original)
    assert vars(copied) == vars(original)


def test_every_exported_error_is_covered() -> None:
    defined = {
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == errors.__name__
    }
    assert defined <= set(EXPORTED), f"errors not exported from pytest_hfsnapshot: {defined - set(EXPORTED)}"
    assert len(EXPORTED) >= 15


@pytest.mark.parametrize("cls", EXPORTED, ids=lambda cls: cls.__name__)
@pytest.mark.parametrize("protocol", [0, pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL])
def test_an_exported_error_survives_pickle(cls: type[BaseException], protocol: int) -> None:
    original = build(cls)
    assert_same(pickle.loads(pickle.dumps(original, protocol)), original)
    assert_same(copy.deepcopy(original), original)


def test_an_error_of_a_new_subclass_keeps_its_own_fields() -> None:
    original = Subclassed("the lock is gone", limit="lock_timeout", value=900, repo_id="org/name")
    original.__notes__ = ["seen in worker gw1"]  # what add_note does (3.11+); 3.10 has no add_note
    copied = pickle.loads(pickle.dumps(original))
    assert_same(copied, original)
    assert copied.__notes__ == ["seen in worker gw1"]


class Subclassed(errors.LockTimeoutError):
    def __init__(self, message: str, *, limit: str, value: int, repo_id: str | None = None) -> None:
        super().__init__(message, repo_id=repo_id)
        self.limit = limit
        self.value = value
