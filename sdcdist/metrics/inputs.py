"""What a measurement is given besides the two files, and which metrics it can compute.

:class:`Inputs` is the one description of the columns and their roles (categorical,
ordinal, weight, confidential, household), the key sets and the files that go with the
original (a holdout, a control set). It is built once, from a dataset's roles
(:meth:`Inputs.from_microdata`) or from a command's flags, and handed to
:func:`~sdcdist.metrics.measure`, to the audit and to ``sdcdist risk``.
:meth:`Inputs.check` states every rule about roles that clash, with its message, once.

:func:`applicable` is the one place that decides whether a metric can run on given
inputs; it reads what the metric declared when it registered (``needs``, ``same_shape``,
``categorical``, ``keysets``, ``guard``), never its name. :func:`default_metrics` is the
choice of a command that was not told which metrics to compute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import SdcInputError, column_positions, weight_error
from ..roles import EXCLUSIVE, first_clash, key_role_error, role_clash_error
from ..text import repeated
from ._registry import NEEDS, REGISTRY, Metric, get_metric
from .keysets import check_distinct, default_keysets

__all__ = ["Inputs", "Reason", "applicable", "applicability", "default_metrics",
           "applicable_split", "need_error", "NEED_TEXT",
           "declared_categories"]

#: What each need (:data:`~sdcdist.metrics.NEEDS`) is, what a metric without it is told is
#: missing, and where it is given: ``(what, noun, how)``.
NEED_TEXT: dict[str, tuple[str, str, str]] = {
    "holdout": ("a holdout file (records of the same population the release was not made "
                "from)", "holdout file",
                "give one (--holdout, holdout=..., or 'holdout:' in the spec's dataset)"),
    "confidential": ("confidential columns (what an intruder wants to learn)",
                     "confidential column",
                     "give them (--confidential, confidential=[...], or the dataset's "
                     "'confidential' role)"),
    "household": ("the household id column", "household id column",
                  "give it (--household, household=..., or the dataset's 'household' role)"),
}

def need_error(name: str, need: str) -> SdcInputError:
    """The standard message for metric ``name`` asked for without its need ``need`` (and
    without the options that stand for it, :attr:`~sdcdist.metrics.Metric.needs_unless`).

    >>> str(need_error("HR_mean", "household"))  # doctest: +NORMALIZE_WHITESPACE
    "HR_mean needs the household id column, and none is named; give it (--household,
    household=..., or the dataset's 'household' role)"
    """
    what, noun, how = NEED_TEXT[need]
    m = REGISTRY.get(name)
    alt = [o for n, o in (m.needs_unless if m is not None else ()) if n == need]
    return SdcInputError(f"{name} needs {what}, and none is named; {how}"
                         + "".join(f", or set the option {o}" for o in alt))


def declared_categories(categories: Any) -> dict[str, int]:
    """The number of declared categories of each categorical column, from the files'
    ``{column: labels}`` (Microdata's ``categories``): the labels of either file (the
    codes once the files are aligned, :func:`~sdcdist.data.align_categories`); columns
    without labels are left out.

    >>> declared_categories([{"a": ["x", "y"]}, {"a": ["x", "z"], "b": []}])
    {'a': 3}
    """
    seen: dict[str, dict[str, None]] = {}
    for cats in categories:
        for c, labels in (cats or {}).items():
            if labels is not None and len(labels):
                seen.setdefault(str(c), {}).update(dict.fromkeys(str(x) for x in labels))
    return {c: len(v) for c, v in seen.items()}


@dataclass(frozen=True)
class Reason:
    """Why a metric does not apply: ``head`` says what the inputs lack or hold, ``tail``
    why the metric cannot use them; ``need`` names the missing input (:data:`NEED_TEXT`) of
    a metric that needs one. ``quiet``: a command choosing its metrics leaves the metric out
    without a note (it needs an input nobody gave, or is computed only when named)."""

    head: str
    tail: str = ""
    need: str = ""
    quiet: bool = False
    order: int = 0

    def note(self, names: Sequence[str]) -> str:
        """The note of a command that leaves ``names`` out for this reason."""
        return f"{self.head}: skipping {', '.join(names)} ({self.tail})"

    def __str__(self) -> str:
        return f"{self.head} ({self.tail})" if self.tail else self.head


@dataclass(frozen=True)
class Inputs:
    """The columns, their roles and the key sets of one measurement.

    Attributes
    ----------
    columns : tuple of str
        The original file's columns.
    masked_columns : tuple of str or None
        The masked file's columns when they differ; None: the original's.
    categorical, ordinal : tuple of str
        Categorical columns (codes, the same in both files) and those among them whose
        categories are ordered.
    weight, household : str or None
        The sampling-weight and the household id columns.
    confidential : tuple of str
        The confidential columns (what an intruder wants to learn).
    keys : tuple of str
        The key columns the default key sets are the prefixes of (the key role); empty:
        the columns both files share.
    keysets : tuple of tuple of str, or None
        Named key sets; None: the default.
    holdout, control : bool
        Whether a holdout file and a control set are given.
    shape_original, shape_masked : tuple of int, or None
        The files' shapes when known.
    levels : tuple of (str, int)
        The number of distinct values of categorical columns of the masked file, when
        known (what the guards of the models that grow with them read).
    n_categories : tuple of (str, int)
        The number of declared categories (labels) of each categorical column whose labels
        are known (a Microdata's ``categories``; the larger count of the two files), used
        or not: the levels ``L_j`` of an ordinal column's Gower term.
    """

    columns: tuple[str, ...] = ()
    masked_columns: tuple[str, ...] | None = None
    categorical: tuple[str, ...] = ()
    ordinal: tuple[str, ...] = ()
    weight: str | None = None
    confidential: tuple[str, ...] = ()
    household: str | None = None
    keys: tuple[str, ...] = ()
    keysets: tuple[tuple[str, ...], ...] | None = None
    holdout: bool = False
    control: bool = False
    shape_original: tuple[int, int] | None = None
    shape_masked: tuple[int, int] | None = None
    levels: tuple[tuple[str, int], ...] = field(default=())
    n_categories: tuple[tuple[str, int], ...] = field(default=())

    def __post_init__(self) -> None:
        for f in ("columns", "categorical", "ordinal", "confidential", "keys"):
            v = getattr(self, f) or ()
            object.__setattr__(self, f, tuple(str(c) for c in ([v] if isinstance(v, str)
                                                              else v)))
        if self.masked_columns is not None:
            object.__setattr__(self, "masked_columns", tuple(self.masked_columns))
        if self.keysets is not None:
            object.__setattr__(self, "keysets", tuple(tuple(k) for k in self.keysets))
        for f in ("shape_original", "shape_masked"):
            if getattr(self, f) is not None:
                object.__setattr__(self, f, tuple(int(x) for x in getattr(self, f)))
        for f in ("levels", "n_categories"):
            object.__setattr__(self, f, tuple((str(c), int(k)) for c, k in
                                              dict(getattr(self, f)).items()))

    # -- building ---------------------------------------------------------------------
    @classmethod
    def from_microdata(cls, original: Any, masked: Any = None, **given: Any) -> "Inputs":
        """The inputs of ``original`` and ``masked`` (Microdata, or arrays that carry no
        roles): each role given as a keyword (None: not given) wins, else the masked file's
        role, else the original's; categorical columns are those of both."""
        from ..data import Microdata
        mds = [md for md in (masked, original) if isinstance(md, Microdata)]

        def role(r: str) -> Any:
            return next((md.roles.get(r) for md in mds if md.roles.get(r)), None)

        out: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
        if "categorical" not in out:
            out["categorical"] = list(dict.fromkeys(
                c for md in (original, masked) if isinstance(md, Microdata)
                for c in md.categorical))
        if "weight" not in out:
            out["weight"] = next((md.weight for md in mds if md.weight), None)
        if "confidential" not in out:
            out["confidential"] = list(role("confidential") or ())
        if "household" not in out:
            out["household"] = next((md.household for md in mds if md.household), None)
        if "n_categories" not in out:
            out["n_categories"] = declared_categories(
                md.categories for md in (original, masked) if isinstance(md, Microdata))
        if "columns" not in out and isinstance(original, Microdata):
            out["columns"] = original.columns
        if "masked_columns" not in out and isinstance(masked, Microdata) and \
                out.get("columns") is not None and list(masked.columns) != list(out["columns"]):
            out["masked_columns"] = masked.columns
        return cls(**out)

    def replace(self, **changes: Any) -> "Inputs":
        """A copy with ``changes``."""
        return replace(self, **changes)

    # -- reading ----------------------------------------------------------------------
    @property
    def masked(self) -> tuple[str, ...]:
        """The masked file's columns."""
        return self.masked_columns if self.masked_columns is not None else self.columns

    @property
    def shared(self) -> list[str]:
        """The columns both files share, in the original's order."""
        have = set(self.masked)
        return [c for c in self.columns if c in have]

    @property
    def numeric(self) -> list[str]:
        """The masked file's columns that are not categorical."""
        return [c for c in self.masked if c not in set(self.categorical)]

    def has(self, need: str) -> bool:
        """Whether the input ``need`` (one of :data:`NEEDS`) is given."""
        if need == "holdout":
            return self.holdout
        if need == "confidential":
            return bool(self.confidential)
        if need == "household":
            return self.household is not None
        raise ValueError(f"unknown need {need!r}; one of {NEEDS}")

    def link_keysets(self) -> list[tuple[str, ...]]:
        """The named key sets, else the prefixes of the key columns, else of the columns
        both files share."""
        return self.given_keysets() or [tuple(k) for k in default_keysets(self.shared)]

    def given_keysets(self) -> list[tuple[str, ...]] | None:
        """The named key sets, else the prefixes of the key columns, else None."""
        if self.keysets is not None:
            return [tuple(k) for k in self.keysets]
        return [tuple(k) for k in default_keysets(self.keys)] if self.keys else None

    def key_candidates(self) -> list[str]:
        """The key columns: those of the named key sets or of the prefixes of the key
        columns, else the masked file's columns."""
        ks = self.given_keysets()
        if ks:
            return list(dict.fromkeys(c for k in ks for c in k))
        return list(self.masked)

    def categorical_keys(self) -> list[str]:
        """The categorical columns among :meth:`key_candidates`."""
        cats = set(self.categorical)
        return [c for c in self.key_candidates() if c in cats]

    # -- the role rules ---------------------------------------------------------------
    def check(self) -> None:
        """Refuse roles that clash: a categorical weight; the household id also the weight
        or a confidential column; a key set holding the household id or the weight; an
        empty key set, a column twice in one, or one that is not in both files; two key
        sets of the same columns."""
        if self.weight is not None and self.weight in set(self.categorical):
            raise weight_error(self.weight, fix="name a numeric weight column (--weight), or "
                               "leave the weight out")
        h = self.household
        clash = first_clash({"household": h, "weight": self.weight,
                             "confidential": self.confidential})
        if clash is not None:
            raise role_clash_error(*clash)
        given = self.given_keysets()
        if given is None:
            return
        for role, col in ((r, getattr(self, r)) for r, other in EXCLUSIVE if other == "key"):
            hit = [list(k) for k in given if col is not None and col in k]
            if hit:
                raise key_role_error(f"key set {hit[0]}", col, role, "the key sets")
        if len(given) == 0:
            raise SdcInputError("no key sets given; give at least one list of key columns")
        for ks in given:
            if len(ks) == 0:
                raise SdcInputError("an empty key set was given; every key set needs at "
                                    "least one column")
            dup = sorted(repeated(ks))
            if dup:
                raise SdcInputError(f"key set {list(ks)} names {dup} more than once; give "
                                    "each column once per key set")
            for have, what in ((self.columns, "original"), (self.masked, "masked")):
                column_positions(ks, have, what="key set column", where=f"the {what} file")
        check_distinct(given)


_SHAPE = Reason("files differ in shape", "they compare the files record by record", order=0)


def applicable(metric: Metric | str, inputs: Inputs,
               options: Mapping[str, Any] | None = None) -> Reason | None:
    """Why ``metric`` cannot run on ``inputs`` (with the computation ``options``), or None
    when it can. Reads only what the metric declared when it registered:

    - a need (``needs``) that is not given (unless an option it names stands for it);
    - the frequency risks (``categorical``, no key sets) on files without categorical
      columns;
    - a metric comparing the files record by record (``same_shape``) on files of different
      shapes;
    - a numeric-only linkage metric on key sets holding a categorical column;
    - a numeric-only loss or utility on files without a numeric column;
    - its own ``guard`` (a model that would grow too large for these inputs).

    >>> applicable("HR_mean", Inputs(columns=("a", "b"))).need
    'household'
    >>> applicable("IL1s", Inputs(columns=("a", "b"))) is None
    True
    """
    m = get_metric(metric) if isinstance(metric, str) else metric
    opts = options or {}
    for need in NEEDS:
        if need in m.needs and not inputs.has(need) and not \
                any(opts.get(o) for n, o in m.needs_unless if n == need):
            return Reason(f"no {NEED_TEXT[need][1]}", f"they need {NEED_TEXT[need][0]}",
                          need=need, quiet=True)
    if m.needs_categorical and not inputs.categorical:
        return Reason("no categorical column", "they count categorical key combinations",
                      quiet=True)
    if m.same_shape and inputs.shape_original is not None and \
            inputs.shape_masked is not None and inputs.shape_original != inputs.shape_masked:
        return _SHAPE
    if inputs.categorical:
        cats = set(inputs.categorical)
        in_keys = sorted({c for k in inputs.link_keysets() for c in k if c in cats})
        if m.keysets and not m.categorical and in_keys:
            return Reason(f"key sets hold categorical column(s) {', '.join(in_keys)}",
                          "they link on numeric keys only; name numeric key sets with "
                          "--keyset, or ask for them with --metric", order=1)
        if not inputs.numeric and not m.keysets and not m.categorical:
            return Reason("no numeric column", "they read numeric columns only", order=2)
    if m.guard is not None:
        return m.guard(inputs, opts)
    return None



def applicability(inputs: Inputs, options: Mapping[str, Any] | None = None
                  ) -> dict[str, Reason | str | None]:
    """Every registered metric -> None when it applies to ``inputs``, else why: its own
    :func:`applicable` reason, or for a metric computed from others (a score) the first
    part that does not apply (``"its part X does not apply: ..."``). Registry order."""
    why: dict[str, Reason | str | None] = {}

    def reason(n: str, depth: int = 0) -> Reason | str | None:
        if n in why:
            return why[n]
        m = REGISTRY[n]
        out: Reason | str | None = applicable(m, inputs, options)
        if out is None and depth < 8:
            for part in m.requires or ():
                sub = reason(part, depth + 1)
                if sub is not None:
                    out = f"its part {part} does not apply: {sub}"
                    break
        why[n] = out
        return out

    return {n: reason(n) for n in REGISTRY}

def default_metrics(kind: str, inputs: Inputs, options: Mapping[str, Any] | None = None
                    ) -> tuple[list[str], dict[Reason, list[str]]]:
    """The metrics of ``kind`` a command computes when it was not told which: every one
    not computed only by name (``by_name``) that :func:`applicable` admits. Returns them
    and the others grouped by reason, quiet reasons first, then in the order of the checks
    of :func:`applicable` (``Reason.order``) and as first met."""
    return applicable_split([n for n, m in REGISTRY.items() if m.kind == kind and not m.by_name],
                            inputs, options)


def applicable_split(names: Sequence[str], inputs: Inputs,
                     options: Mapping[str, Any] | None = None, *,
                     parts: Any = None) -> tuple[list[str], dict[Reason, list[str]]]:
    """Those of ``names`` that :func:`applicable` admits, and the others grouped by reason
    (quiet reasons first, then in the order of its checks and as first met). ``parts(name)``:
    the metrics a name stands for (default itself; e.g. a composite and the metrics it is
    computed from): the first of them that does not apply gives the reason."""
    kept: list[str] = []
    skipped: dict[Reason, list[str]] = {}
    for n in names:
        why = next((w for w in (applicable(p, inputs, options)
                                for p in (parts(n) if parts else [n])) if w is not None), None)
        if why is None:
            kept.append(n)
        else:
            skipped.setdefault(why, []).append(n)
    order = sorted(skipped, key=lambda r: (not r.quiet, r.order))
    return kept, {r: skipped[r] for r in order}
