"""The metric registry and the context a metric is computed in.

A metric is a function ``func(ctx) -> float | MetricResult`` (or, for
linkage metrics computed per key set, ``func(ctx, keys) -> ...`` with ``keys``
a tuple of column positions) registered with :func:`register`. The function
does its numpy work through ``ctx.runner`` (the drivers of
:mod:`sdcdist.parallel`), so the same code runs in-process and on a cluster.
Metrics that share work (the 15 Table-1 errors, DLD and DLD2, ...) memoise
the shared part with :meth:`MeasureContext.cached`; scores read the metrics
they combine with :meth:`MeasureContext.value`.
"""

from __future__ import annotations

import logging
import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import moments
from .. import options as _options
from ..errors import SdcInputError, column_positions, unknown_name_error
from ..parallel import Runner
from .keysets import KEYSET_DEFAULTS, default_keysets

__all__ = ["Metric", "MetricResult", "MeasureContext", "REGISTRY", "register",
           "get_metric", "stable_id", "DEFAULT_OPTIONS", "default_keysets", "PARTS",
           "companions", "is_companion", "NEEDS", "needing", "score_weights",
           "preferred_score", "preferred_loss"]


@dataclass(frozen=True)
class Metric:
    """One registered metric.

    Attributes
    ----------
    name : str
        Canonical name (CATALOG.md).
    kind : {"loss", "utility", "risk", "score"}
    func : callable
        ``func(ctx)`` or, with ``keysets=True``, ``func(ctx, keys)``.
    description, reference : str
    keysets : bool
        Computed for each key set and averaged (linkage risk).
    requires : tuple of str
        Metrics this one is computed from (scores); an audit measures them too.
    ascending : bool
        Rank 1 goes to the smallest value (lowest loss / lowest risk). False for
        metrics where a small value means high risk or high loss (``RR``).
    same_shape : bool
        Needs both files with the same records and columns.
    random : bool
        Uses the cell's generator (tie-breaking, k-means seeds).
    options : tuple of str
        The options of :mod:`sdcdist.options` it reads (``ctx.options``).
    keyset_default : {"prefixes", "all"}
        For key-set metrics, what they link on when no key sets were named
        (:data:`~sdcdist.metrics.keysets.KEYSET_DEFAULTS`); named key sets are
        always used as given.
    categorical : bool
        Reads categorical columns (frequency risk, categorical loss, blocked
        linkage). A metric without it is numeric-only: losses and utilities are
        computed on the numeric columns alone, and a categorical column in a
        key set is refused.
    unit : str
        What its value counts, for people reading it ("% of records",
        "standard deviations", ...); shown beside the value by the service's page.
    part_of : str
        For a companion figure of another metric, that metric's name (``so_uni`` for
        ``so_uni_lo``); empty for a metric in its own right. Ranking tables give a
        companion no rank of its own and plots draw the interval of its metric.
    part : {"", "lo", "hi", "base"}
        What the companion is: the lower or upper bound of its metric's confidence
        interval, or the figure of the baseline (random-guess) attack.
    needs : frozenset of str
        Inputs it reads besides the two files (:data:`NEEDS`: a holdout file, confidential
        columns, a household id); the layers above ask :func:`needing` which metrics read
        one, and never keep lists of names.
    by_name : bool
        Computed only when asked for by name, never among a command's defaults (the
        attacks, whose cost the user chooses).
    mixed : bool
        With ``categorical``: reads the categorical columns when there are any and works
        on all-numeric files too (the synthetic-release utility measures); such a metric,
        like a key-set or an ``index`` one, does not need a categorical column.
    index : bool
        Its work is nearest-neighbour searches in a KD-tree over every shared column,
        categorical or not (the distance metrics): about n log n, not pairs of records.
    scaled : bool
        Divides by each original column's standard deviation (or z-scores the columns): it
        is computed without the columns that are constant in the original file (a survey
        year), which are left out with a note (``info["constant_columns_left_out"]``).
    weights : tuple of (str, float)
        For a score, the metrics it combines and their weights (the score is their
        weighted sum); :func:`score_weights` reads them.
    preferred : bool
        The score ranked by when nobody said how (the service's default ranking).
    recommend : bool
        A loss measure a release recommendation minimises when nobody said which; the
        first of them in registry order that the cube holds (:func:`preferred_loss`).
    needs_unless : tuple of (str, str)
        Needs that an option stands for when set: ``("confidential", "infer_secret")``
        (the inference attack needs a confidential column unless ``infer_secret`` names
        its secret).
    reads : frozenset of str
        Inputs of :data:`NEEDS` it reads when they are given but does without (the
        distance metrics leave the household id out of the distance); with ``needs``,
        every input that may change its value.
    keys_only : bool
        Reads no column of the files but the key columns (of the named key sets, else the
        key role) and the weight (the frequency risks): a command computing only such
        metrics on named keys may leave the other columns' values unread.
    guard : callable or None
        ``guard(inputs, options) -> Reason | None``: why the metric would refuse these
        inputs (a model that grows too large with the number of keys), for
        :func:`~sdcdist.metrics.inputs.applicable`.
    """

    name: str
    kind: str
    func: Callable[..., Any]
    description: str
    reference: str = ""
    keysets: bool = False
    requires: tuple[str, ...] = ()
    ascending: bool = True
    same_shape: bool = True
    random: bool = False
    options: tuple[str, ...] = ()
    keyset_default: str = "prefixes"
    categorical: bool = False
    unit: str = ""
    part_of: str = ""
    part: str = ""
    needs: frozenset[str] = frozenset()
    index: bool = False
    by_name: bool = False
    scaled: bool = False
    weights: tuple[tuple[str, float], ...] = ()
    preferred: bool = False
    recommend: bool = False
    needs_unless: tuple[tuple[str, str], ...] = ()
    guard: Callable[..., Any] | None = None
    mixed: bool = False
    reads: frozenset[str] = frozenset()
    keys_only: bool = False

    @property
    def needs_categorical(self) -> bool:
        """Whether it cannot run on a file without categorical columns: a ``categorical``
        metric that is neither a key-set metric, nor a distance (``index``) one, nor
        ``mixed`` (the frequency risks, the categorical losses)."""
        return self.categorical and not (self.keysets or self.index or self.mixed)


#: What a metric may need besides the original and masked files (:attr:`Metric.needs`).
NEEDS = ("holdout", "confidential", "household")

#: What a companion metric can be (:attr:`Metric.part`).
PARTS = ("lo", "hi", "base")


@dataclass
class MetricResult:
    """A measured value with its detail.

    ``per_keyset`` holds one value per key set for linkage metrics;
    ``excluded`` counts terms left out of an average (zero denominators);
    ``flag`` is 1 when an approximation or a restriction was used (sparse
    assignment, blocking), 0 for the exact computation; ``info`` is free-form
    detail (never record values).
    """

    value: float
    per_keyset: tuple[float, ...] | None = None
    excluded: int = 0
    flag: int = 0
    info: dict[str, Any] = field(default_factory=dict)


class _Registry(dict):
    """The registry: a dict of name -> :class:`Metric` filled as the metric modules are
    imported. The package imports them on demand (:mod:`sdcdist.metrics`): a look-up of
    one name imports only the module that declares it when the package knows which,
    anything else (a listing, an unknown name) imports them all. A command that computes
    only the frequency risk therefore never imports the linkage, SciPy or numba."""

    #: the package's loader ``load(name or None)``; None once every module is imported
    loader: Callable[[str | None], None] | None = None

    def __init__(self) -> None:
        super().__init__()
        # one loading at a time: a look-up in another thread waits for it instead of
        # reading a half-filled registry (the service answers its first requests on
        # several threads); the thread that loads may look up while its modules register
        self._lock = threading.RLock()
        self._busy = False

    def _need(self) -> None:
        # every module (a listing)
        if self.loader is not None:
            with self._lock:
                self._load_for(None)

    def _load_for(self, name: Any) -> None:
        # with the lock held: load what ``name`` needs (every module for None) unless this
        # thread is already loading or it is there
        if self.loader is None or self._busy or (name is not None
                                                  and dict.__contains__(self, name)):
            return
        self._busy = True
        try:
            self.loader(name)
        finally:
            self._busy = False

    def _read(self, name: str, read: Callable[[], Any]) -> Any:
        # a look-up of one name: under the lock while loading may still change the dict
        # (a full load re-orders it at its end)
        if self.loader is None:
            return read()
        with self._lock:
            self._load_for(name)
            return read()

    def __getitem__(self, name: str) -> Metric:
        return self._read(name, lambda: dict.__getitem__(self, name))

    def get(self, name: str, default: Any = None) -> Any:
        return self._read(name, lambda: dict.get(self, name, default))

    def __contains__(self, name: object) -> bool:
        return self._read(name, lambda: dict.__contains__(self, name))  # type: ignore[arg-type]

    def __iter__(self):  # type: ignore[no-untyped-def]
        self._need()
        return dict.__iter__(self)

    def __len__(self) -> int:
        self._need()
        return dict.__len__(self)

    def __repr__(self) -> str:
        self._need()
        return dict.__repr__(self)

    def keys(self):  # type: ignore[no-untyped-def]
        self._need()
        return dict.keys(self)

    def values(self):  # type: ignore[no-untyped-def]
        self._need()
        return dict.values(self)

    def items(self):  # type: ignore[no-untyped-def]
        self._need()
        return dict.items(self)

    def copy(self) -> dict[str, Metric]:
        self._need()
        return dict(dict.items(self))

    def __eq__(self, other: object) -> bool:
        self._need()
        return dict.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]


REGISTRY: dict[str, Metric] = _Registry()

log = logging.getLogger(__name__)

def constant_columns(X: Any, cols: Sequence[int]) -> list[bool]:
    """Task: whether each of ``cols`` holds one value in every record (NaN ignored)."""
    return [bool(moments.constant_columns(np.asarray(X[:, j], dtype=np.float64)[:, None])[0])
            for j in cols]

def take_columns(A: np.ndarray, pos: list[int]) -> np.ndarray:
    """The columns ``pos`` of ``A`` (n x m) as a C-ordered n x len(pos) array."""
    return np.ascontiguousarray(A[:, pos])

#: Defaults of the options metrics read, from their one declaration in :mod:`sdcdist.options`.
DEFAULT_OPTIONS: dict[str, Any] = _options.defaults("metric")


def register(name: str, *, kind: str, description: str, reference: str = "",
             keysets: bool = False, requires: Sequence[str] = (), ascending: bool = True,
             same_shape: bool = True, random: bool = False,
             options: Sequence[str] = (), keyset_default: str = "prefixes",
             categorical: bool = False, unit: str = "", part_of: str = "",
             part: str = "", needs: Sequence[str] = (), index: bool = False,
             by_name: bool = False, scaled: bool = False,
             weights: Mapping[str, float] | None = None, preferred: bool = False,
             needs_unless: Mapping[str, str] | None = None,
             guard: Callable[..., Any] | None = None,
             reads: Sequence[str] = (), mixed: bool = False,
             recommend: bool = False, keys_only: bool = False) -> Callable:
    """Decorator: register ``func`` as the metric ``name``.

    ``options`` names the options of :mod:`sdcdist.options` the metric reads;
    ``keyset_default`` what a key-set metric links on when no key sets are named;
    ``unit`` what its value counts; ``part_of`` and ``part`` make it a companion
    (interval bound or baseline) of another metric; ``needs`` the inputs it reads besides
    the two files (:data:`NEEDS`); ``index`` that its work is KD-tree searches; ``by_name``
    that it is computed only when named; ``scaled`` that it divides by the columns' sds;
    ``weights`` a score's parts and their weights (``requires`` defaults to the parts);
    ``preferred`` the score ranked by by default; ``recommend`` that a recommendation
    minimises this loss by default (:func:`preferred_loss`); ``needs_unless`` the options that stand
    for a need; ``guard`` the check of inputs it would refuse (:attr:`Metric.guard`);
    ``reads`` the inputs it reads when given but does without; ``mixed`` (with
    ``categorical``) that it also runs on files without a categorical column;
    ``keys_only`` that it reads only the key columns and the weight (:attr:`Metric.keys_only`).
    """
    if bool(part_of) != bool(part) or (part and part not in PARTS):
        raise ValueError(f"metric {name!r}: part_of and part go together, part one of {PARTS}")
    if kind not in ("loss", "utility", "risk", "score"):
        raise ValueError(f"bad metric kind {kind!r}")
    if keyset_default not in KEYSET_DEFAULTS:
        raise ValueError(f"bad keyset_default {keyset_default!r}")
    used = _options.check_declared(options, scope="metric", owner=f"metric {name!r}")
    unless = dict(needs_unless or {})
    if not set(needs) | set(reads) <= set(NEEDS) or not set(unless) <= set(needs):
        raise ValueError(f"metric {name!r}: needs must be among {NEEDS}, needs_unless among "
                         "its needs")
    _options.check_declared(tuple(unless.values()), scope="metric", owner=f"metric {name!r}")
    if (preferred and kind != "score") or (recommend and kind != "loss"):
        raise ValueError(f"metric {name!r}: only a score is preferred, only a loss recommend")
    if weights is not None and kind != "score":
        raise ValueError(f"metric {name!r}: only a score has weights")
    parts = tuple((str(k), float(w)) for k, w in (weights or {}).items())
    if parts and not requires:
        requires = tuple(k for k, _ in parts)

    def deco(func: Callable) -> Callable:
        if dict.__contains__(REGISTRY, name):
            raise ValueError(f"metric {name!r} registered twice")
        REGISTRY[name] = Metric(name, kind, func, description, reference, keysets,
                                tuple(requires), ascending, same_shape, random, used,
                                keyset_default=keyset_default, categorical=categorical,
                                unit=unit, part_of=part_of, part=part,
                                needs=frozenset(needs), index=index, by_name=by_name,
                                scaled=scaled, weights=parts, preferred=preferred,
                                needs_unless=tuple(unless.items()), guard=guard,
                                reads=frozenset(reads), mixed=mixed, recommend=recommend,
                                keys_only=keys_only)
        return func

    return deco


def needing(names: Sequence[str], need: str,
            options: Mapping[str, Any] | None = None) -> list[str]:
    """The metrics among ``names`` that declare ``need`` (one of :data:`NEEDS`), in order;
    with ``options``, not those for which a set option stands for the need
    (:attr:`Metric.needs_unless`).

    >>> needing(["IL1s", "dcr_overfit"], "holdout")
    ['dcr_overfit']
    """
    if need not in NEEDS:
        raise ValueError(f"unknown need {need!r}; one of {NEEDS}")
    opts = options or {}
    return [n for n in names if need in get_metric(n).needs
            and not any(opts.get(o) for k, o in get_metric(n).needs_unless if k == need)]


def score_weights() -> dict[str, dict[str, float]]:
    """Every score of the registry: name -> the metrics it combines and their weights.

    >>> score_weights()["Score"]
    {'IL': 0.5, 'DLD': 0.125, 'PLD': 0.125, 'ID1': 0.25}
    """
    return {n: dict(m.weights) for n, m in REGISTRY.items() if m.weights}


def preferred_score() -> str:
    """The score ranked by when nobody said how (registered ``preferred=True``)."""
    return next(n for n, m in REGISTRY.items() if m.preferred and m.kind == "score")


def family_metrics(families: Sequence[str], per_family: int) -> list[str]:
    """The first ``per_family`` metrics (registry order) of each family in ``families``
    (the module under ``sdcdist.metrics`` a metric is defined in, e.g. ``"risk.frequency"``)
    that run on what every file has: a risk, loss or utility measure of its own (no
    companion, no attack asked for by name), needing no other input and no option."""
    counts: dict[str, int] = {}
    out = []
    for n, m in REGISTRY.items():
        fam = m.func.__module__.removeprefix("sdcdist.metrics.")
        if fam not in families or m.by_name or m.part_of or m.needs \
                or m.kind not in ("risk", "loss", "utility") or m.requires:
            continue
        if counts.get(fam, 0) < per_family:
            counts[fam] = counts.get(fam, 0) + 1
            out.append(n)
    return out


def preferred_loss(names: Sequence[str]) -> str | None:
    """The loss measure a recommendation minimises when nobody said which: among
    ``names``, the first loss metric registered ``recommend=True`` (in registry order),
    else the first of ``names`` of kind loss, else None."""
    present = set(names)
    for n, m in REGISTRY.items():
        if m.recommend and m.kind == "loss" and n in present:
            return n
    return next((n for n in names if n in REGISTRY and REGISTRY[n].kind == "loss"), None)


def is_companion(name: str) -> bool:
    """Whether ``name`` is a registered companion (interval bound or baseline) of a metric."""
    m = REGISTRY.get(str(name))
    return bool(m is not None and m.part_of)


def companions(name: str, have: Sequence[str] | None = None) -> dict[str, str]:
    """The companions of metric ``name``: part (``lo``, ``hi``, ``base``) -> metric name,
    only those among ``have`` when given.

    >>> companions("so_uni")
    {'lo': 'so_uni_lo', 'hi': 'so_uni_hi', 'base': 'so_uni_base'}
    >>> companions("DLD")
    {}
    """
    # a companion is registered by the module of its metric (tests/test_metrics_lazy.py):
    # looking the metric up imports that module, and no other is needed
    REGISTRY.get(str(name))
    out = {m.part: m.name for m in dict.values(REGISTRY) if m.part_of == name}
    if have is not None:
        out = {p: n for p, n in out.items() if n in set(have)}
    return {p: out[p] for p in PARTS if p in out}


def get_metric(name: str) -> Metric:
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        raise unknown_name_error("metric", name, REGISTRY) from None


def stable_id(name: str) -> int:
    """A stable integer for a name (CRC-32), used in seed spawn keys."""
    return zlib.crc32(str(name).encode())


class MeasureContext:
    """Everything a metric function needs for one (original, masked) pair.

    The columns, their roles and the files' shapes come from one
    :class:`~sdcdist.metrics.Inputs`; the context reads them from it (``ctx.columns``,
    ``ctx.categorical``, ``ctx.weight``, ``ctx.confidential``, ``ctx.household``, ...) and
    keeps no copy of its own.

    Parameters
    ----------
    runner : Runner
        Where the numpy pieces run.
    original, masked : array handles
        ndarray, :class:`~sdcdist.data.StoredArray` or a future of an ndarray;
        shapes ``inputs.shape_original`` and ``inputs.shape_masked``.
    inputs : Inputs
        The columns (the original's and, when they differ, the masked file's), their roles
        (categorical, ordinal, weight, confidential, household, the declared categories'
        counts) and the files' shapes (required).
    keysets : sequence of tuple of str, optional
        The key sets linkage metrics link on, once resolved (the given ones, or the
        default prefixes with constant columns left out). A
        :class:`~sdcdist.metrics.keysets.KeySets` from :func:`default_keysets` is a
        default, and metrics registered with ``keyset_default="all"`` then link on all its
        key columns as one key set; any other sequence is taken as named key sets, used by
        every key-set metric. None: those of ``inputs``
        (:meth:`~sdcdist.metrics.Inputs.given_keysets`), else the prefixes of the columns
        both files share.
    seed : numpy.random.SeedSequence
        The cell's seed; metric ``name`` uses the child with spawn key
        ``seed.spawn_key + (1, stable_id(name))``.
    options : dict
        Overrides of :data:`DEFAULT_OPTIONS`, checked against their declarations
        in :mod:`sdcdist.options` (unknown or ill-typed values raise).
    truth : array handle or None
        For each masked record, the row of its true record in the original
        file (-1 if absent). ``None``: row order is the truth.
    holdout : array handle or None
        A holdout file (records of the original's population the release was not made
        from; the original's columns), read by the DCR metrics of
        :mod:`sdcdist.metrics.synthetic`; ``shape_holdout`` its shape (default: the
        handle's ``shape``).
    control : array handle or None
        The control set of the singling-out, linkability and inference attacks:
        original records held out of what was masked, shape ``(n_c, m)`` with the
        original file's columns (``shape_control``, default: the handle's ``shape``).
    """

    def __init__(self, runner: Runner, original: Any, masked: Any, *, inputs: Any,
                 keysets: Sequence[Sequence[str]] | None = None,
                 seed: np.random.SeedSequence | None = None,
                 options: Mapping[str, Any] | None = None, truth: Any = None,
                 holdout: Any = None, shape_holdout: tuple[int, int] | None = None,
                 control: Any = None, shape_control: tuple[int, int] | None = None):
        if inputs.shape_original is None or inputs.shape_masked is None:
            raise ValueError("MeasureContext needs the files' shapes in its inputs "
                             "(Inputs(shape_original=..., shape_masked=...))")
        if not inputs.columns:
            raise ValueError("MeasureContext needs the column names in its inputs")
        self.runner = runner
        #: the columns, their roles and the files' shapes (:class:`~sdcdist.metrics.Inputs`)
        self.inputs = inputs
        self.holdout = holdout
        if shape_holdout is None and holdout is not None:
            shape_holdout = getattr(holdout, "shape", None)
        self.shape_holdout = tuple(shape_holdout) if shape_holdout is not None else None
        self.control = control
        if shape_control is None and control is not None:
            shape_control = getattr(control, "shape", None)
        self.shape_control = tuple(shape_control) if shape_control is not None else None
        self.original = original
        self.masked = masked
        ks = keysets if keysets else (inputs.given_keysets() if inputs.keysets is not None
                                      else None)
        if not ks:
            ks = default_keysets(inputs.keys) if inputs.keys else default_keysets(
                inputs.shared)
        self.keysets = [tuple(k) for k in ks]
        #: whether the key sets were named (else they are the default prefixes)
        self.keysets_given = bool(getattr(ks, "given", True))
        #: the key columns of the default (all of them: one key set for RR and PDL)
        self.key_columns = tuple(getattr(ks, "columns", ())) or tuple(inputs.shared)
        self.seed = seed if seed is not None else np.random.SeedSequence(0)
        self.options = {**DEFAULT_OPTIONS, **_options.validate(options, what="options")}
        ordinal = self.options.get("ordinal")
        if ordinal is not None and not inputs.ordinal:
            # the option ``ordinal`` names the ordered categorical columns of these inputs
            self.inputs = inputs = inputs.replace(ordinal=ordinal)
        self.truth = truth
        have = set(self.columns) | set(self.masked_columns)
        #: the categorical columns either file holds
        self.categorical = tuple(c for c in inputs.categorical if c in have)
        self._cache: dict[Any, Any] = {}
        self.results: dict[str, MetricResult] = {}
        self._numeric: MeasureContext | None = None
        self._scaled: MeasureContext | None = None
        #: columns this context left out because they are constant in the original file
        self.constant_left_out: tuple[str, ...] = ()

    # -- what the inputs say (read-only views of :attr:`inputs`) -------------------------
    @property
    def shape_original(self) -> tuple[int, int]:
        return self.inputs.shape_original

    @property
    def shape_masked(self) -> tuple[int, int]:
        return self.inputs.shape_masked

    @property
    def columns(self) -> tuple[str, ...]:
        """The original file's column names."""
        return self.inputs.columns

    @property
    def masked_columns(self) -> tuple[str, ...]:
        """The masked file's column names."""
        return self.inputs.masked

    @property
    def weight(self) -> str | None:
        return self.inputs.weight

    @property
    def confidential(self) -> tuple[str, ...]:
        return self.inputs.confidential

    @property
    def household(self) -> str | None:
        return self.inputs.household

    @property
    def ordinal(self) -> tuple[str, ...]:
        """The categorical columns whose categories are ordered."""
        return tuple(c for c in self.inputs.ordinal if c in set(self.categorical))

    def n_levels(self, column: str) -> int | None:
        """The number of declared categories of categorical ``column`` (its labels), or
        None when no labels are known."""
        return dict(self.inputs.n_categories).get(column)

    def _without(self, drop: set, keep_a: list[int], keep_b: list[int],
                 **roles: Any) -> "MeasureContext":
        """This context on the columns ``keep_a`` (original) and ``keep_b`` (masked), key
        sets touching ``drop`` left out; ``roles``: the roles the new context keeps (the
        others are left out)."""
        inputs = self.inputs.replace(
            columns=tuple(self.columns[j] for j in keep_a),
            masked_columns=tuple(self.masked_columns[j] for j in keep_b),
            shape_original=(self.shape_original[0], len(keep_a)),
            shape_masked=(self.shape_masked[0], len(keep_b)),
            **{"categorical": (), "ordinal": (), "weight": None, "confidential": (),
               "household": None, "keys": (), "keysets": None, **roles})
        return MeasureContext(
            self.runner, self.runner.task(take_columns, self.original, keep_a),
            self.runner.task(take_columns, self.masked, keep_b), inputs=inputs,
            keysets=[k for k in self.keysets if not set(k) & drop] or None,
            seed=self.seed, options=self.options, truth=self.truth)

    def numeric_context(self) -> "MeasureContext":
        """This context restricted to the numeric columns (without the categorical columns
        and the weight): where numeric-only losses and utilities are computed."""
        if self._numeric is None:
            drop = set(self.categorical) | ({self.weight} if self.weight else set()) | \
                ({self.household} if self.household else set())
            keep_a = [j for j, c in enumerate(self.columns) if c not in drop]
            keep_b = [j for j, c in enumerate(self.masked_columns) if c not in drop]
            if not keep_a or not keep_b:
                raise SdcInputError("the files have no numeric column besides the weight; "
                                    "numeric losses and utilities need at least one")
            self._numeric = self._without(drop, keep_a, keep_b)
        return self._numeric

    def scaled_context(self) -> "MeasureContext":
        """This context without the columns that are constant in the original file: where
        the metrics that divide by a column's sd (:attr:`Metric.scaled`) are computed. Itself when
        no column is constant."""
        if self._scaled is None:
            const = self.runner.call(constant_columns, self.original,
                                     list(range(len(self.columns))))
            drop = {c for c, k in zip(self.columns, const) if k} - set(self.categorical)
            if not drop:
                self._scaled = self
                return self
            keep_a = [j for j, c in enumerate(self.columns) if c not in drop]
            keep_b = [j for j, c in enumerate(self.masked_columns) if c not in drop]
            left = tuple(c for c in self.columns if c in drop)
            if not keep_a or not keep_b:
                raise SdcInputError(f"every numeric column is constant ({list(left)}); the "
                                    "losses and utilities that divide by a column's standard "
                                    "deviation need one that is not")
            log.warning("constant column(s) %s left out of the metrics that divide by a "
                        "column's standard deviation", list(left))
            ctx = self._without(drop, keep_a, keep_b, categorical=self.categorical,
                                ordinal=self.inputs.ordinal, weight=self.weight,
                                household=self.household)
            ctx._scaled = ctx
            ctx.constant_left_out = left
            self._scaled = ctx
        return self._scaled

    def check_numeric_keys(self, name: str, keys: Sequence[str]) -> None:
        """Refuse categorical columns among the keys of a numeric-only metric."""
        bad = [c for c in keys if c in self.categorical]
        if bad:
            raise SdcInputError(
                f"{name} compares numeric values, and its key set holds the categorical "
                f"column(s) {bad}; leave them out of the key sets of {name} (name key sets "
                "of numeric columns), or use the frequency risk metrics (uniques, kviol2, "
                "IR_mean, ...) for categorical keys")

    # -- helpers for metric functions ------------------------------------
    def rng(self, name: str) -> np.random.Generator:
        """The generator of metric ``name`` in this cell (stable spawn key)."""
        ss = np.random.SeedSequence(self.seed.entropy,
                                    spawn_key=tuple(self.seed.spawn_key) + (1, stable_id(name)))
        return np.random.default_rng(ss)

    def cached(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Compute once per context; metrics share work through this."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def key_index(self, keys: Sequence[str]) -> tuple[int, ...]:
        """Positions of key columns in the original file (unknown names raise)."""
        return tuple(column_positions(keys, self.columns, what="key column",
                                      where="the original file"))

    def require_same_shape(self, name: str) -> None:
        if self.shape_original != self.shape_masked:
            raise SdcInputError(
                f"{name} compares the files record by record, so both need the same shape; "
                f"got original {self.shape_original} and masked {self.shape_masked}")

    def value(self, name: str) -> float:
        """The value of another metric in this context (computed once)."""
        return self.measure(name).value

    def measure(self, name: str) -> MetricResult:
        """Compute metric ``name`` (memoised) and return its :class:`MetricResult`."""
        if name in self.results:
            return self.results[name]
        metric = get_metric(name)
        if metric.same_shape:
            self.require_same_shape(name)
        if (self.categorical or self.weight) and not metric.categorical \
                and not metric.keysets and metric.kind in ("loss", "utility"):
            res = self.numeric_context().measure(name)
            self.results[name] = res
            return res
        if metric.scaled and self.scaled_context() is not self:
            sc = self.scaled_context()
            res = sc.measure(name)
            res.info["constant_columns_left_out"] = list(sc.constant_left_out)
            self.results[name] = res
            return res
        if metric.keysets and not metric.categorical:
            ks = [self.key_columns] if metric.keyset_default == "all" and \
                not self.keysets_given else self.keysets
            for k in ks:
                self.check_numeric_keys(name, k)
        if metric.keysets and metric.keyset_default == "all" and not self.keysets_given:
            # one key set of all key columns; no per-key-set detail (the cube's key set
            # labels are the default prefixes, which this value does not belong to)
            if not self.key_columns:
                raise SdcInputError(f"{name} needs at least one key column; got none")
            res = _as_result(metric.func(self, self.key_index(self.key_columns)))
            res = MetricResult(float(res.value), None, res.excluded, res.flag,
                               {**res.info, "keys": list(self.key_columns)})
        elif metric.keysets:
            if not self.keysets:
                raise SdcInputError(f"{name} needs at least one key set; got none")
            # key sets are independent: their tasks go to the cluster together
            idx = [self.key_index(k) for k in self.keysets]
            parts = self.runner.map_concurrent(lambda keys: _as_result(metric.func(self, keys)),
                                               idx)
            res = MetricResult(float(np.mean([r.value for r in parts])),
                               tuple(float(r.value) for r in parts),
                               sum(r.excluded for r in parts), max(r.flag for r in parts),
                               {"per_keyset_info": [r.info for r in parts]}
                               if any(r.info for r in parts) else {})
        else:
            res = _as_result(metric.func(self))
        self.results[name] = res
        return res


def _as_result(out: Any) -> MetricResult:
    if isinstance(out, MetricResult):
        return out
    return MetricResult(float(out))
