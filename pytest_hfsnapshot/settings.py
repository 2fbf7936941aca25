"""Every knob of pytest-hfsnapshot, declared once: name, type, default, help and spellings.

The plugin's options, the command line's flags, ``materialize``'s keywords, the reference page
and the advice in messages are all made from :data:`KNOBS`: a new setting is one field here."""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar, cast, get_args

from .errors import InvalidRequestError

# The values a user chooses between, each spelled once for the plugin's options, the CLI and prefetch.
#: What a test needing a snapshot the Hub refuses does.
AuthAction = Literal["skip", "xfail", "fail"]
#: What a test needing a snapshot that is not fully cached does offline.
MissingAction = Literal["fail", "skip"]
#: How cached files are re-checked.
VerifyMode = Literal["size", "sha256"]
#: What the plugin does with Hub use that no declaration made (CONTRACT section 9).
ImplicitMode = Literal["report", "manage", "fail", "off"]

AUTH_ACTIONS: tuple[AuthAction, ...] = get_args(AuthAction)
MISSING_ACTIONS: tuple[MissingAction, ...] = get_args(MissingAction)
VERIFY_MODES: tuple[VerifyMode, ...] = get_args(VerifyMode)
IMPLICIT_MODES: tuple[ImplicitMode, ...] = get_args(ImplicitMode)

DEFAULT_AUTH_ACTION: AuthAction = "skip"
DEFAULT_MISSING_ACTION: MissingAction = "fail"
DEFAULT_VERIFY: VerifyMode = "size"
DEFAULT_IMPLICIT: ImplicitMode = "report"
DEFAULT_RETRIES = 5
DEFAULT_LOCK_TIMEOUT = 900.0
DEFAULT_MAX_RATE_WAIT = 300.0
#: The lease length when neither a keyword, an option nor the environment gives one.
DEFAULT_LOCK_LEASE = 60.0
#: The shortest lease accepted: its holder renews it every third of it, on a loaded machine too.
MIN_LOCK_LEASE = 5.0
IMPLICIT_ENV = "HFSNAPSHOT_IMPLICIT"
LOCK_LEASE_ENV = "HFSNAPSHOT_LOCK_LEASE"
LAYERS_ENV = "HFSNAPSHOT_CACHE_LAYERS"

#: Where a knob can be set: the pytest plugin (flag and ini), the command line, ``materialize``.
Front = Literal["pytest", "cli", "materialize"]
#: pytest's ini types the knobs use.
IniType = Literal["bool", "string", "linelist"]


def _say(value: float) -> str:
    return f"{value:g}"


def _or(words: Sequence[str]) -> str:
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]


# --- kinds: how a knob's values are checked (as keywords) and read (as text) -------------------
# Each kind is made once, below, and never compared or printed: plain dataclasses, as the plugin's
# start-up makes them (a frozen one costs three times as much to create on CPython 3.11).


@dataclasses.dataclass(eq=False, repr=False)
class Kind:
    """The type of a knob. ``check`` takes a keyword's value, ``parse`` an option's text (or list)."""

    #: Whether None is a value (huggingface_hub's default, or the environment's, at call time).
    optional: bool = False
    ini_type: IniType = "string"
    metavar: str | None = None

    def check(self, name: str, value: object) -> object:
        """``value`` normalized; InvalidRequestError ``name=value is not valid: ...`` when it is not one."""
        if value is None and self.optional:
            return None
        try:
            return self._check(value)
        except ValueError:
            raise InvalidRequestError(f"{name}={value!r} is not valid: {self.give}.") from None

    def _check(self, value: object) -> object:
        return value

    def parse(self, value: object, base: Path) -> object:
        """An option's value (text, or lines) as a keyword would give it; ValueError when invalid."""
        return self._check(str(value).strip())

    @property
    def give(self) -> str:
        """What to give instead, in a keyword's error."""
        return "give " + self.use

    @property
    def use(self) -> str:
        """What to use instead, in an option's error."""
        raise NotImplementedError


@dataclasses.dataclass(eq=False, repr=False)
class Switch(Kind):
    """On or off: a flag without a value, a bool in ini and as a keyword."""

    ini_type: IniType = "bool"
    #: The option turns the knob off (``--hf-no-space-check`` sets ``space_check=False``).
    inverted: bool = False

    def _check(self, value: object) -> object:
        if not isinstance(value, bool):
            raise ValueError
        return value

    def parse(self, value: object, base: Path) -> object:
        return bool(value) != self.inverted

    @property
    def use(self) -> str:
        return "True, False or None" if self.optional else "True or False"


@dataclasses.dataclass(eq=False, repr=False)
class Choice(Kind):
    """One of ``values``."""

    values: tuple[str, ...] = ()
    #: What the choices mean, said after them in an option's error.
    meaning: str = ""

    def _check(self, value: object) -> object:
        if value not in self.values:
            raise ValueError
        return value

    @property
    def give(self) -> str:
        return "use " + _or([repr(v) for v in self.values])

    @property
    def use(self) -> str:
        return "one of: " + ", ".join(self.values) + (f" ({self.meaning})" if self.meaning else "")


@dataclasses.dataclass(eq=False, repr=False)
class Count(Kind):
    """A whole number >= 0."""

    metavar: str | None = "N"

    def _check(self, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError
        return value

    def parse(self, value: object, base: Path) -> object:
        return self._check(int(str(value).strip()))

    @property
    def give(self) -> str:
        return "give a whole number >= 0"

    @property
    def use(self) -> str:
        return "an integer >= 0"


@dataclasses.dataclass(eq=False, repr=False)
class Seconds(Kind):
    """A number of seconds from ``minimum`` on; ``math.inf`` only as a keyword, where ``infinite``."""

    minimum: float = 0.0
    #: Whether ``minimum`` itself is allowed.
    inclusive: bool = True
    #: Whether a keyword may give ``math.inf`` (wait for ever); an option never may.
    infinite: bool = False
    metavar: str | None = "SECONDS"

    def _check(self, value: object) -> object:
        if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
            raise ValueError
        if (math.isinf(value) and not self.infinite) or value < self.minimum:
            raise ValueError
        if value == self.minimum and not self.inclusive:
            raise ValueError
        return float(value)

    def parse(self, value: object, base: Path) -> object:
        parsed = float(str(value).strip())
        if math.isinf(parsed):
            raise ValueError
        return self._check(parsed)

    @property
    def use(self) -> str:
        return f"a number of seconds {'>=' if self.inclusive else '>'} {_say(self.minimum)}"


@dataclasses.dataclass(eq=False, repr=False)
class PathKind(Kind):
    """The path of ``what`` (a folder unless said otherwise)."""

    optional: bool = True
    metavar: str | None = "PATH"
    #: What the path names, in errors.
    what: str = "a folder"

    def _check(self, value: object) -> object:
        if not isinstance(value, str | os.PathLike):
            raise ValueError
        return value

    def parse(self, value: object, base: Path) -> object:
        text = str(value).strip()
        return (base / Path(text).expanduser()).resolve() if text else None

    @property
    def give(self) -> str:
        return f"give the path of {self.what}, or None"

    @property
    def use(self) -> str:
        return f"the path of {self.what}"


@dataclasses.dataclass(eq=False, repr=False)
class Folders(Kind):
    """Folders, in order (``cache_layers``): a list as a keyword, lines in ini, repeats of a flag, or
    one text of paths joined by ``os.pathsep`` in the environment."""

    ini_type: IniType = "linelist"
    metavar: str | None = "PATH"

    def check(self, name: str, value: object) -> object:
        if isinstance(value, str | bytes | os.PathLike) or not isinstance(value, Iterable):
            raise InvalidRequestError(f"{name}={value!r} is not valid: {self.give}.")
        out: list[Path] = []
        for layer in value:
            if not isinstance(layer, str | os.PathLike) or not os.fspath(layer).strip():
                raise InvalidRequestError(f"{name}: {layer!r} is not a folder path.")
            path = Path(os.path.realpath(os.path.expanduser(os.fspath(layer))))
            if path not in out:
                out.append(path)
        return tuple(out)

    def parse(self, value: object, base: Path) -> object:
        texts = value.split(os.pathsep) if isinstance(value, str) else list(cast(Iterable[object], value or ()))
        paths = [(base / Path(str(text).strip()).expanduser()).resolve() for text in texts if str(text).strip()]
        return tuple(dict.fromkeys(paths))

    @property
    def give(self) -> str:
        return "give a list of folders"

    @property
    def use(self) -> str:
        return "folders"


@dataclasses.dataclass(eq=False, repr=False)
class Lines(Kind):
    """Lines of text, each read where the knob is used (``hf_prefetch``)."""

    ini_type: IniType = "linelist"

    def check(self, name: str, value: object) -> object:
        return tuple(str(line) for line in cast(Iterable[object], value))

    def parse(self, value: object, base: Path) -> object:
        return tuple(str(line) for line in cast(Iterable[object], value or ()))

    @property
    def use(self) -> str:
        return "lines"


_SESSION_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


@dataclasses.dataclass(eq=False, repr=False)
class SessionId(Kind):
    """A session's name: letters, digits, ``_``, ``.``, ``-``."""

    optional: bool = True

    def _check(self, value: object) -> object:
        if not isinstance(value, str) or not _SESSION_RE.fullmatch(value):
            raise ValueError
        return value

    @property
    def give(self) -> str:
        return "use letters, digits, '_', '.', '-'"

    @property
    def use(self) -> str:
        return "letters, digits, '_', '.', '-'"


@dataclasses.dataclass(eq=False, repr=False)
class Token(Kind):
    """A Hub token, or True/False/None as huggingface_hub takes them."""

    optional: bool = True

    def _check(self, value: object) -> object:
        if not isinstance(value, str | bool):
            raise ValueError
        return value

    @property
    def use(self) -> str:
        return "a token, True, False or None"


# --- the declaration ----------------------------------------------------------------------------


class Knob(NamedTuple):
    """One knob and its spellings on every front end. Made by :func:`knob`; listed in :data:`KNOBS`."""

    name: str
    kind: Kind
    default: Any
    help: str
    #: Whether ``materialize`` takes it as a keyword.
    keyword: bool = True
    #: Whether the pytest plugin has it (a flag, unless ``ini_only``, and its ini twin).
    plugin: bool = True
    ini_only: bool = False
    #: The words the options spell it with, when not its name (``no_space_check``).
    spelled: str | None = None
    #: The flags' words, when not ``spelled`` (``cache_layer``: the flag is repeated, the ini key plural).
    flag_spelled: str | None = None
    #: The environment variable that gives it when no option does.
    env: str | None = None
    #: Whether ``env`` is huggingface_hub's (read by huggingface_hub itself; shown, not read here).
    env_is_hub: bool = False
    #: The command-line commands that have a flag for it.
    cli: tuple[str, ...] = ()
    #: The command line's help, when not ``help``.
    cli_help: str | None = None
    #: The command line's choices, when not all (no test to xfail without pytest).
    cli_choices: tuple[str, ...] | None = None
    #: The value when neither a keyword, an option nor ``env`` gives one, when not ``default``.
    fallback: Any = None
    #: What the default is, in words, where the value does not say it.
    default_text: str | None = None

    # -- spellings ---------------------------------------------------------------------------------
    @property
    def flag(self) -> str | None:
        """The pytest flag: ``--hf-lock-timeout``; None when the plugin has none."""
        if not self.plugin or self.ini_only:
            return None
        return "--hf-" + (self.flag_spelled or self.spelled or self.name).replace("_", "-")

    @property
    def ini(self) -> str | None:
        """The ini key: ``hf_lock_timeout``; None when the plugin has none."""
        return "hf_" + (self.spelled or self.name) if self.plugin else None

    def cli_flag(self) -> str:
        """The command line's flag, for the commands in ``cli``: ``--lock-timeout``."""
        return "--" + (self.flag_spelled or self.spelled or self.name).replace("_", "-")

    @property
    def fronts(self) -> tuple[Front, ...]:
        """Where it can be set."""
        reach: list[Front] = []
        if self.plugin:
            reach.append("pytest")
        if self.cli:
            reach.append("cli")
        if self.keyword:
            reach.append("materialize")
        return tuple(reach)

    # -- what the plugin and the manual show --------------------------------------------------------
    @property
    def ini_type(self) -> IniType:
        return self.kind.ini_type

    @property
    def choices(self) -> tuple[str, ...]:
        return self.kind.values if isinstance(self.kind, Choice) else ()

    @property
    def metavar(self) -> str | None:
        return self.kind.metavar

    @property
    def unset(self) -> Any:
        """The value when nothing sets it."""
        return self.fallback if self.fallback is not None else self.default

    @property
    def ini_default(self) -> str | bool | None:
        """What ``getini`` gives when the ini file does not set it: empty where ``env`` comes next."""
        if self.kind.ini_type == "bool":
            return False
        if self.kind.ini_type == "linelist":
            return None
        if self.default is None or (self.env and not self.env_is_hub):
            return ""
        return self.show(self.default)

    def show(self, value: object) -> str:
        return _say(value) if isinstance(value, float) else str(value)

    @property
    def shown_default(self) -> str:
        """The default as the manual and ``--help`` say it."""
        if self.default_text is not None:
            return self.default_text
        if isinstance(self.kind, Switch):
            return "off"
        return self.show(self.unset)

    @property
    def full_help(self) -> str:
        """The help with the default and the environment variable, where the help does not say them."""
        extra = []
        if self.choices:
            return _choices_help(self)
        if not isinstance(self.kind, Switch | Lines):
            extra.append(f"default {self.shown_default}")
        if self.env and not self.env_is_hub:
            joined = ", paths separated by os.pathsep" if isinstance(self.kind, Folders) else ""
            extra.append(f"{self.env} gives the default{joined}")
        return self.help + (f" ({'; '.join(extra)})" if extra else "")

    # -- reading ---------------------------------------------------------------------------------
    def from_env(self) -> Any:
        """The value ``env`` gives, else :attr:`unset`; InvalidRequestError naming a bad value."""
        assert self.env is not None
        raw = os.environ.get(self.env, "").strip()
        if not raw:
            return self.unset
        try:
            return self.kind.parse(raw, Path.cwd())
        except ValueError:
            raise InvalidRequestError(
                f"{self.env}={raw!r} is not valid: give {self.kind.use} (the default is {self.show(self.unset)})."
            ) from None

    def advice(self, front: Front | str, value: object = None) -> str | None:
        """How ``front`` (``pytest``, ``materialize``, or ``cli:COMMAND``) sets this knob, in a message;
        None where it cannot."""
        if front == "pytest":
            return self.flag or (f"the ini option {self.ini}" if self.ini else None)
        if front == "materialize":
            return f"{self.name}=" if self.keyword else None
        command = front.removeprefix("cli:")
        return self.cli_flag() if command in self.cli else None


def _choices_help(option: Knob) -> str:
    said = [f"{c} (default)" if c == option.unset else c for c in option.choices]
    env = f" ({option.env} gives the default)" if option.env and not option.env_is_hub else ""
    return f"{option.help}: {_or(said)}{env}"


def knob(kind: Kind, help: str, **spellings: Any) -> dict[str, Knob]:
    """A field's metadata declaring it a knob: ``x: T = dataclasses.field(default=..., metadata=knob(...))``.

    Its name, type and default are the field's; ``spellings`` are :class:`Knob`'s other fields.
    """
    return {"knob": Knob(name="", kind=kind, default=None, help=help, **spellings)}


def _knobs(cls: type) -> tuple[Knob, ...]:
    return tuple(
        f.metadata["knob"]._replace(name=f.name, default=f.default)
        for f in dataclasses.fields(cls)
        if "knob" in f.metadata
    )


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a snapshot is made: ``materialize``'s keywords, set by the plugin's options and the CLI too.

    Each field is a knob: its type, default, help and spellings are declared here, once; invalid
    values raise InvalidRequestError naming the knob on construction.
    """

    offline: bool | None = dataclasses.field(
        default=None,
        metadata=knob(
            Switch(optional=True),
            "make no network request; use only what is cached",
            env="HF_HUB_OFFLINE",
            env_is_hub=True,
            cli=("prefetch",),
            cli_help="make no network request; check the cache only",
            default_text="off (HF_HUB_OFFLINE=1 turns it on)",
        ),
    )
    strict: bool = dataclasses.field(
        default=False, metadata=knob(Switch(), "fail when a cached branch or tag cannot be confirmed against the Hub")
    )
    retries: int = dataclasses.field(
        default=DEFAULT_RETRIES,
        metadata=knob(
            Count(),
            "retries for transient Hub errors (5xx, 429, resets, timeouts, cut bodies)",
            cli=("pins",),
            cli_help=f"retries for transient Hub errors, per pin (default {DEFAULT_RETRIES})",
        ),
    )
    lock_timeout: float = dataclasses.field(
        default=DEFAULT_LOCK_TIMEOUT,
        metadata=knob(
            Seconds(minimum=0.0, inclusive=False, infinite=True),
            "seconds to wait for another process holding a repo lock",
        ),
    )
    lock_lease: float | None = dataclasses.field(
        default=None,
        metadata=knob(
            Seconds(minimum=MIN_LOCK_LEASE, optional=True),
            "seconds a lease lock (a cache without flock, or HFSNAPSHOT_LOCK_MODE=lease) lasts without renewal "
            "before a waiter on any host takes it over; every host sharing the cache must use the same "
            f"(at least {_say(MIN_LOCK_LEASE)})",
            env=LOCK_LEASE_ENV,
            fallback=DEFAULT_LOCK_LEASE,
        ),
    )
    verify: VerifyMode = dataclasses.field(
        default=DEFAULT_VERIFY,
        metadata=knob(
            Choice(values=VERIFY_MODES),
            "how cached files are re-checked (files just downloaded are always hashed)",
            cli=("prefetch",),
        ),
    )
    cache_dir: str | os.PathLike[str] | None = dataclasses.field(
        default=None,
        metadata=knob(
            PathKind(),
            "huggingface_hub cache folder to use",
            env="HF_HUB_CACHE",
            env_is_hub=True,
            cli=("prefetch",),
            default_text="HF_HUB_CACHE, huggingface_hub's",
        ),
    )
    cache_layers: Sequence[str | os.PathLike[str]] = dataclasses.field(
        default=(),
        metadata=knob(
            Folders(),
            "a read-only huggingface_hub cache (a mounted bucket, a cache baked into an image) searched before "
            "anything is fetched into the cache; what it holds is linked, never fetched or copied, and nothing is "
            "written into it; repeat for more, searched in order",
            flag_spelled="cache_layer",
            env=LAYERS_ENV,
            cli=("prefetch",),
            default_text="none",
        ),
    )
    space_check: bool = dataclasses.field(
        default=True,
        metadata=knob(
            Switch(inverted=True),
            "do not refuse, before transferring, snapshots the cache's free space cannot take "
            "(for filesystems whose free space means nothing, such as some network mounts)",
            spelled="no_space_check",
            cli=("prefetch",),
            default_text="off (the check is on)",
        ),
    )
    max_rate_wait: float = dataclasses.field(
        default=DEFAULT_MAX_RATE_WAIT,
        metadata=knob(
            Seconds(minimum=0.0, infinite=True),
            "longest wait, in seconds, for a rate-limit window of the Hub to reset before failing",
            cli=("prefetch", "pins"),
        ),
    )
    pins: str | os.PathLike[str] | None = dataclasses.field(
        default=None,
        metadata=knob(
            PathKind(what="a pin file"),
            "a pin file (JSON, the manifest's format; a manifest is one): the branches and tags it lists "
            "resolve to their pinned commits, without asking the Hub",
            cli=("prefetch",),
            cli_help="a pin file: its branches and tags resolve to their pinned commits, and its entries with files "
            "(implicit uses recorded by --hf-update-pins) are fetched",
            default_text="none",
        ),
    )
    session: str | None = dataclasses.field(
        default=None,
        metadata=knob(
            SessionId(),
            "an id shared by the processes of one test session (branches resolved once per session per cache; "
            "rate-limit windows and outages shared)",
            plugin=False,
        ),
    )
    token: str | bool | None = dataclasses.field(
        default=None,
        metadata=knob(Token(), "passed to huggingface_hub (None: its own lookup; False: none)", plugin=False),
    )

    def __post_init__(self) -> None:
        for option in SETTINGS_KNOBS:
            object.__setattr__(self, option.name, option.kind.check(option.name, getattr(self, option.name)))

    @classmethod
    def split(
        cls, keywords: Mapping[str, object], *, form: str = "materialize()"
    ) -> tuple[dict[str, object], Settings]:
        """``materialize``'s keywords as the request's (:data:`~pytest_hfsnapshot.request.KEYWORDS`) and
        these settings; an unknown keyword, or a value of the wrong type, is an InvalidRequestError naming it."""
        from .request import KEYWORDS

        knobs = {option.name for option in SETTINGS_KNOBS}
        unknown = sorted(set(keywords) - knobs - set(KEYWORDS))
        if unknown:
            known = ", ".join([*KEYWORDS, *(option.name for option in SETTINGS_KNOBS)])
            raise InvalidRequestError(f"unknown argument(s) {', '.join(unknown)}; {form} takes the repo id and {known}")
        request = {name: value for name, value in keywords.items() if name not in knobs}
        return request, cls(**{name: value for name, value in keywords.items() if name in knobs})  # type: ignore[arg-type]

    def resolved(self) -> Settings:
        """These settings with the defaults of the moment filled in (huggingface_hub's cache folder
        and offline mode, ``HFSNAPSHOT_LOCK_LEASE``)."""
        from huggingface_hub import constants

        return dataclasses.replace(
            self,
            cache_dir=self.cache_dir if self.cache_dir is not None else constants.HF_HUB_CACHE,
            offline=bool(constants.HF_HUB_OFFLINE) if self.offline is None else self.offline,
            lock_lease=self.lock_lease if self.lock_lease is not None else lock_lease_from_env(),
        )


@dataclasses.dataclass(frozen=True)
class PluginSettings:
    """What the pytest plugin does besides making snapshots; each field a knob, as in :class:`Settings`."""

    on_auth_error: AuthAction = dataclasses.field(
        default=DEFAULT_AUTH_ACTION,
        metadata=knob(
            Choice(values=AUTH_ACTIONS),
            "what a test needing a gated, private or unauthorized repo does",
            keyword=False,
            cli=("prefetch",),
            cli_choices=tuple(a for a in AUTH_ACTIONS if a != "xfail"),  # without pytest there is no test to xfail
            cli_help="repos the Hub refuses are listed; fail makes them fail the command too "
            f"(default {DEFAULT_AUTH_ACTION})",
        ),
    )
    on_missing: MissingAction = dataclasses.field(
        default=DEFAULT_MISSING_ACTION,
        metadata=knob(Choice(values=MISSING_ACTIONS), "offline and not fully cached", keyword=False),
    )
    prefetch_only: bool = dataclasses.field(
        default=False,
        metadata=knob(
            Switch(),
            "materialize every snapshot the selected tests declare (fixtures, markers, ini hf_prefetch) "
            "in parallel, write the manifest, run no test; exit 0 when all are ready",
            keyword=False,
        ),
    )
    manifest: Path | None = dataclasses.field(
        default=None,
        metadata=knob(
            PathKind(what="a file"),
            "write a deterministic JSON manifest of the session's snapshots to PATH (a CI cache key)",
            keyword=False,
            cli=("prefetch",),
            cli_help="write the JSON manifest of the snapshots to PATH",
            default_text="none",
        ),
    )
    update_pins: bool = dataclasses.field(
        default=False,
        metadata=knob(
            Switch(),
            "resolve every snapshot of the session on the Hub and write the --hf-pins file at the end "
            "(moved pins updated, new ones added, the others kept)",
            keyword=False,
        ),
    )
    implicit: ImplicitMode = dataclasses.field(
        default=DEFAULT_IMPLICIT,
        metadata=knob(
            Choice(
                values=IMPLICIT_MODES,
                meaning="report: only report and record Hub use no declaration made; manage: fetch, lock and verify "
                "each file it downloads; fail: also fail tests whose use the pin file does not list; off: ignore it",
            ),
            "Hub use that no declaration made (from_pretrained('org/name'), hf_hub_download, ...): report it "
            "(and record it with --hf-update-pins); manage it (each file it downloads is fetched first under "
            "the repo's lock, through the gate, with retries, and verified); fail its test when the pin file "
            "does not list it (as manage otherwise); or leave it alone (off)",
            keyword=False,
            env=IMPLICIT_ENV,
            default_text=f"{DEFAULT_IMPLICIT} ({IMPLICIT_ENV} gives another)",
        ),
    )
    prefetch: tuple[str, ...] = dataclasses.field(
        default=(),
        metadata=knob(
            Lines(),
            "snapshots --hf-prefetch-only fetches besides the selected tests' declarations (those "
            "hf_snapshots(...) gets): one per line, org/name[@revision] or a JSON object of its arguments",
            keyword=False,
            ini_only=True,
            default_text="none",
        ),
    )


SETTINGS_KNOBS: tuple[Knob, ...] = _knobs(Settings)
#: Every knob, in the order ``--help`` and the manual list them.
KNOBS: tuple[Knob, ...] = SETTINGS_KNOBS + _knobs(PluginSettings)
_BY_NAME = {option.name: option for option in KNOBS}


def spelling(name: str) -> Knob:
    """The knob called ``name`` (a field of :class:`Settings` or :class:`PluginSettings`)."""
    return _BY_NAME[name]


_F = TypeVar("_F", bound=Callable[..., Any])


def takes_knobs(function: _F) -> _F:
    """Show ``function(repo_id, **keywords)`` (``materialize``) to ``help()`` and ``inspect`` with each keyword
    it takes: the request's, then every knob of :class:`Settings`, with their defaults."""
    from .request import KEYWORD_DEFAULTS

    keyword = inspect.Parameter.KEYWORD_ONLY
    parameters = [inspect.Parameter("repo_id", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="str")]
    parameters += [inspect.Parameter(name, keyword, default=value) for name, value in KEYWORD_DEFAULTS.items()]
    parameters += [
        inspect.Parameter(f.name, keyword, default=f.default, annotation=f.type) for f in dataclasses.fields(Settings)
    ]
    function.__signature__ = inspect.Signature(parameters, return_annotation="Snapshot")  # type: ignore[attr-defined]
    return function


#: The front end this process serves (``pytest``, ``materialize`` or ``cli:COMMAND``): the core's
#: messages name the knobs as it spells them. The plugin and the command line set it on start.
_front: list[str] = ["materialize"]


def serve_front(front: str) -> str:
    """Make the core's messages in this process spell knobs as ``front`` does; returns the one before."""
    previous, _front[0] = _front[0], front
    return previous


def say(name: str, *, with_env: bool = False, value: str | None = None) -> str:
    """Knob ``name`` as this process's front end spells it in advice: ``--hf-lock-timeout`` under
    pytest, ``--lock-timeout`` for a command that has it, ``lock_timeout=`` for ``materialize``,
    else ``the lock_timeout setting (not settable here)``. ``with_env``: the ini key (pytest) and
    the environment variable too, for a knob every host must set alike. ``value``: set to it
    (``--hf-on-auth-error=skip``)."""
    knob, front = spelling(name), _front[0]
    advice = knob.advice(front)
    if value is None and front == "materialize" and isinstance(knob.kind, Switch):
        value = str(not (knob.spelled or "").startswith("no_"))  # what its flag does: on, or off
    if value is not None and advice is not None:
        return advice + ("" if advice.endswith("=") else "=") + value
    if with_env and knob.env:
        extra = [f"ini {knob.ini}"] if front == "pytest" and knob.ini else []
        extra.append(f"env {knob.env}")
        return f"{advice} ({', '.join(extra)})" if advice else f"env {knob.env}"
    return advice if advice is not None else f"the {name} setting (not settable here)"


def pytest_command(*knobs: str | tuple[str, object]) -> str:
    """``pytest --hf-x --hf-y=VALUE`` for ``("x", ("y", VALUE))``: a pytest command a message gives."""
    flags = []
    for item in knobs:
        name, value = item if isinstance(item, tuple) else (item, None)
        flag = spelling(name).flag or f"-o {spelling(name).ini}"
        flags.append(flag if value is None else f"{flag}={value}")
    return " ".join(["pytest", *flags])


def prefetch_command() -> str:
    """The command that fills a cache for offline runs, as this front end gives it."""
    if _front[0] == "pytest":
        return f"`{pytest_command('prefetch_only')}`"
    return "`pytest-hfsnapshot prefetch --repo ...`"


#: Said after the option that asked for an update of the pin file, when no pin file is given.
NEEDS_PIN_FILE = "needs --hf-pins=PATH (or the ini option hf_pins): the pin file to write"


def lock_lease_from_env() -> float:
    """The lease length ``HFSNAPSHOT_LOCK_LEASE`` sets (60 when unset); InvalidRequestError naming a bad value."""
    return cast(float, spelling("lock_lease").from_env())


def lease_valid(value: object) -> bool:
    """Whether ``value`` is a usable lease length: a finite number of seconds, at least ``MIN_LOCK_LEASE``."""
    try:
        spelling("lock_lease").kind.check("lock_lease", value)
    except InvalidRequestError:
        return False
    return value is not None


__all__ = [
    "AUTH_ACTIONS",
    "DEFAULT_AUTH_ACTION",
    "DEFAULT_IMPLICIT",
    "DEFAULT_LOCK_LEASE",
    "DEFAULT_LOCK_TIMEOUT",
    "DEFAULT_MAX_RATE_WAIT",
    "DEFAULT_MISSING_ACTION",
    "DEFAULT_RETRIES",
    "DEFAULT_VERIFY",
    "IMPLICIT_ENV",
    "IMPLICIT_MODES",
    "KNOBS",
    "LAYERS_ENV",
    "LOCK_LEASE_ENV",
    "MIN_LOCK_LEASE",
    "MISSING_ACTIONS",
    "NEEDS_PIN_FILE",
    "SETTINGS_KNOBS",
    "VERIFY_MODES",
    "AuthAction",
    "Front",
    "ImplicitMode",
    "Knob",
    "MissingAction",
    "PluginSettings",
    "Settings",
    "VerifyMode",
    "knob",
    "lease_valid",
    "lock_lease_from_env",
    "prefetch_command",
    "pytest_command",
    "say",
    "serve_front",
    "spelling",
    "takes_knobs",
]
