"""Every computation option, declared once: its default, its check and one line of help.

An option is a named setting that changes *how* something is computed, not
what: chunk sizes, memory budgets, linkage tolerances. A spec gives them under
``options:`` (or, for a masking method, under ``methods[i].options``), the
command line with ``--option KEY=VALUE``, the Python API as ``options={...}``.
This module is the only list of them:

- :data:`OPTIONS` maps each name to an :class:`Option` (default, check,
  description, scope);
- :func:`defaults` gives the defaults (``sdcdist.metrics.DEFAULT_OPTIONS`` is
  ``defaults("metric")``);
- :func:`validate` and :func:`validate_method_options` refuse unknown or
  ill-typed values with the standard messages of :mod:`sdcdist.errors`; the spec
  parser and :class:`~sdcdist.metrics.MeasureContext` call them;
- the registries say which options a metric or a masking method reads
  (:func:`sdcdist.metrics.options_of`, :func:`sdcdist.masking.options_of`): each
  declares them when it registers. This module imports neither (it sits below them);
- ``docs/catalog.md`` has a table of them (:func:`sdcdist.docs.options_table`).

Scopes: ``"metric"`` options are read by the metrics (``ctx.options``),
``"audit"`` options by the audit driver, ``"method"`` options are keyword
options of masking methods. Checks are about the value alone; checks that need
the data (a blocking column in the key set, ``k <= n/2``) stay where the data
are known.

This module imports nothing heavy, so the command line can read it at once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import SdcInputError, one_of, option_error, unknown_name_error, value_error
from .limits import (MAX_ATTACKS, MAX_ATTEMPTS, MAX_DENSE, MAX_EM_ITER, MAX_MEMORY_BYTES,
                     MAX_QUERY_COLUMNS, MAX_ROWS, MAX_TOP_C)

__all__ = ["Option", "Check", "OPTIONS", "declare", "defaults", "get_option", "check_option",
           "validate", "validate_method_options", "parse_items", "read_items", "names",
           "prl_names", "PRL_EM_DEFAULTS", "PRL_BLOCK_ROWS",
           "integer", "number", "choice", "optional", "default_text", "SCOPES"]

SCOPES = ("metric", "audit", "method")

#: largest ``chunk_rows``: the exact sums of :mod:`sdcdist.metrics.exactsum` stay exact
#: for chunks of up to 2**26 values (its ``MAX_CHUNK``; a test keeps the two equal)
MAX_CHUNK_ROWS = 2**26


# ---------------------------------------------------------------------------
# checks


@dataclass(frozen=True)
class Check:
    """A test of an option value and the wording of what it accepts.

    ``allowed`` completes the sentence "The 'x' option must be ..."; ``part`` (a mapping's
    check) names the key at fault, for a message about that key alone.
    """

    allowed: str
    test: Callable[[Any], bool]
    #: for a mapping: ``(key, allowed, value)`` of the first key the check refuses (allowed
    #: None: a key it does not take), else None
    part: Callable[[Any], tuple[str, str | None, Any] | None] | None = None

    def __call__(self, value: Any) -> bool:
        try:
            return bool(self.test(value))
        except (TypeError, ValueError, OverflowError):
            return False


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or \
        type(v).__module__ == "numpy" and hasattr(v, "dtype") and v.dtype.kind in "iu"


def _is_number(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, (int, float)) or type(v).__module__ == "numpy" and \
            hasattr(v, "dtype") and v.dtype.kind in "iuf" and getattr(v, "ndim", 0) == 0:
        return math.isfinite(float(v))
    return False


def _bounds(low: float | None, high: float | None, what: str) -> str:
    if low is not None and high is not None:
        return f"{what} in [{low}, {high}]"
    if low is not None:
        return f"{what} >= {low}"
    if high is not None:
        return f"{what} <= {high}"
    return what


def integer(low: int | None = None, high: int | None = None) -> Check:
    """An integer (not a bool) in ``[low, high]``."""
    return Check(_bounds(low, high, "an integer"),
                 lambda v: _is_int(v) and (low is None or v >= low)
                 and (high is None or v <= high))


def number(low: float | None = None, high: float | None = None, *,
           above: float | None = None) -> Check:
    """A finite number in ``[low, high]`` (``above``: strictly greater than it)."""
    if above is not None:
        text = f"a number > {above}"
    else:
        text = _bounds(low, high, "a number")
    return Check(text, lambda v: _is_number(v) and (low is None or v >= low)
                 and (high is None or v <= high) and (above is None or v > above))


def choice(*values: Any) -> Check:
    """One of ``values`` (compared with ``==``; ``None`` is YAML's ``null``)."""
    return Check(one_of(values), lambda v: isinstance(v, (str, type(None)))
                 and any(v == c for c in values))


def optional(check: Check, meaning: str = "") -> Check:
    """``None`` (``null``; ``meaning`` says what it does) or a value passing ``check``."""
    null = f"null ({meaning})" if meaning else "null"
    return Check(f"{null} or {check.allowed}", lambda v: v is None or check(v), check.part)


def _is_list(v: Any) -> bool:
    return isinstance(v, (list, tuple))


def _int_pair(v: Any, high: int = MAX_DENSE) -> bool:
    return _is_list(v) and len(v) == 2 and all(_is_int(x) and 1 <= x <= high for x in v)


def _row_pair(v: Any) -> bool:
    return _int_pair(v, MAX_ROWS)


def _tolerances(v: Any) -> bool:
    """A tolerance > 0, an increasing list of them, or one such list per key column."""
    def levels(x: Any) -> bool:
        x = list(x) if _is_list(x) else [x]
        return bool(x) and all(_is_number(t) and t > 0 for t in x[1:]) and \
            _is_number(x[0]) and (x[0] > 0 or (x[0] == 0 and len(x) > 1)) and \
            all(b > a for a, b in zip(x, x[1:]))
    if _is_list(v) and v and any(_is_list(x) for x in v):
        return all(levels(x) for x in v)
    return levels(v)


def _column_list(v: Any) -> bool:
    if isinstance(v, str):
        return bool(v)
    return _is_list(v) and len(v) > 0 and all(isinstance(c, str) and c for c in v)


def _blocking(v: Any) -> bool:
    return (isinstance(v, str) and bool(v)) or (
        _is_list(v) and len(v) == 2 and isinstance(v[0], str) and _is_int(v[1]) and v[1] >= 1)


#: Rows of A and of B per PRL pair block when ``prl_block_rows`` is null (the kernels hold no
#: pair matrix, so blocks are sized for scheduling, not memory).
PRL_BLOCK_ROWS = 8192

#: The EM settings ``prl_em`` leaves out (``p_max`` None: ``min(nA, nB) / (nA nB)``).
PRL_EM_DEFAULTS = {"max_iter": 20000, "tol": 1e-10, "eps": 1e-9, "m_start": 0.9, "p_max": None,
                   "accelerate": True, "fit": "joint"}

#: What the PRL EM fits (``prl_em`` key ``fit``): ``joint`` m, u and P(M) (constrained EM);
#: ``m_only`` u the level frequencies over all pairs and P(M) = min(nA, nB)/pairs, both
#: fixed, only m fitted.
PRL_EM_FITS = ("joint", "m_only")

#: Largest ``prl_em`` eps. The EM keeps each level probability of a column in
#: ``[eps, 1 - eps]`` and renormalises the column; a column has at most 16 levels (15
#: tolerances, :data:`sdcdist.linkage.prl.comparison.MAX_LEVELS`), whose floors must leave
#: most of the mass to the levels the data put it on: 16 x 0.01 = 0.16. At 1/16 a 16-level
#: column is held uniform (weight 0 whatever the data), and from 1/2 on the interval is
#: empty (the fit is NaN).
PRL_EM_EPS_MAX = 0.01

_EM_KEYS = {"max_iter": integer(1, MAX_EM_ITER), "tol": number(low=0),
            "eps": Check(f"a number in (0, {PRL_EM_EPS_MAX}]",
                         lambda v: _is_number(v) and 0 < v <= PRL_EM_EPS_MAX),
            # the other levels of a column start at (1 - m_start) / (levels - 1): 1 leaves
            # them at 0 (log 0), more makes them negative
            "m_start": Check("a number in (0, 1)", lambda v: _is_number(v) and 0 < v < 1),
            # a probability: 1 turns the cap off (P(M) <= 1 - 1/pairs)
            "p_max": Check("null (min(nA, nB)/(nA nB)) or a number in (0, 1]",
                           lambda v: v is None or _is_number(v) and 0 < v <= 1),
            "accelerate": Check("true or false", lambda v: isinstance(v, bool)),
            "fit": Check("joint or m_only", lambda v: v in PRL_EM_FITS)}

#: How ``prl_em`` keys are listed in its help and its messages.
_EM_TEXT = ", ".join(f"{k} ({c.allowed})" for k, c in _EM_KEYS.items())


def _em(v: Any) -> bool:
    return isinstance(v, Mapping) and all(k in _EM_KEYS and _EM_KEYS[k](x)
                                          for k, x in v.items())


def _em_part(v: Any) -> tuple[str, str | None, Any] | None:
    """The first key of a ``prl_em`` mapping its check refuses: (key, allowed, value), with
    allowed None for a key that is not one of its keys."""
    if not isinstance(v, Mapping):
        return None
    for k, x in v.items():
        if k not in _EM_KEYS:
            return str(k), None, x
        if not _EM_KEYS[k](x):
            return str(k), _EM_KEYS[k].allowed, x
    return None


class _Said(str):
    """A description shown as it is in a message's "Got ... instead" (not a value's repr)."""

    def __repr__(self) -> str:
        return str(self)


#: What each column's entry of recode's ``mapping`` must be (:func:`_mapping_part`).
_LABELS = ("a mapping of category label to new label, each label a non-empty text or a "
           "number")


def _label_fault(x: Any) -> str:
    """What ``x`` is when it is no category label ('' when it is one: a non-empty text or
    a finite number), worded without the value (labels are data)."""
    if isinstance(x, bool) or x is None:
        return "true or false" if isinstance(x, bool) else "null"
    if isinstance(x, str):
        return "" if x.strip() else "an empty text"
    if _is_number(x):
        return ""
    if isinstance(x, (int, float)):
        return "a non-finite number"
    return "a list" if isinstance(x, (list, tuple)) else (
        "a mapping" if isinstance(x, Mapping) else f"a {type(x).__name__}")


def _mapping_part(v: Any) -> tuple[str, str | None, Any] | None:
    """The first column of a recode ``mapping`` its check refuses: ``(column, allowed,
    what was given)``, the labels described, not shown (a mapping that is no mapping is
    refused as a whole)."""
    if not isinstance(v, Mapping):
        return None
    for c, m in v.items():
        if not isinstance(c, str):
            return str(c), "a column name (a text)", _Said(_label_fault(c) or "a number")
        if not isinstance(m, Mapping):
            return c, _LABELS, _Said(_label_fault(m) or "a single label")
        for old, lab in m.items():
            for which, x in (("category", old), ("new", lab)):
                fault = _label_fault(x)
                if fault:
                    return c, _LABELS, _Said(f"{fault} as a {which} label")
    return None


def _percentages(v: Any) -> bool:
    return _is_list(v) and len(v) > 0 and all(_is_number(p) and 0 <= p <= 100 for p in v)


def _roles(v: Any) -> bool:
    return isinstance(v, Mapping) and all(
        isinstance(r, str) and _is_list(cols) and
        all(isinstance(c, str) or _is_int(c) for c in cols) for r, cols in v.items())


# ---------------------------------------------------------------------------
# the registry


@dataclass(frozen=True)
class Option:
    """One declared option.

    Attributes
    ----------
    name : str
    default : object
        Used when the option is not given (``None`` often means "chosen from the data").
    check : Check
        The values accepted.
    description : str
        One line for the docs and ``--help``.
    scope : {"metric", "audit", "method"}
        Who reads it: the metrics, the audit driver, or masking methods.
    spec : bool
        Whether a spec or the command line may set it (``False`` for options of
        the Python API only, such as a dict a method fills).
    """

    name: str
    default: Any
    check: Check
    description: str
    scope: str = "metric"
    spec: bool = True

    @property
    def allowed(self) -> str:
        return self.check.allowed

    def summary(self) -> str:
        """One line for ``--help`` and listings: name, default, valid values, description."""
        return (f"{self.name} (default {default_text(self)}): {self.description}; "
                f"{self.allowed}")

    def validate(self, value: Any, owner: str | None = None) -> Any:
        """Return ``value`` unchanged if the check accepts it, else raise the template."""
        if not self.check(value):
            part = self.check.part(value) if self.check.part is not None else None
            if part is not None:
                key, allowed, got = part
                of = f" of {owner}" if owner else ""
                if allowed is None:
                    raise option_error(self.name, self.check.allowed, value, owner)
                raise value_error(f"The {key!r} key of the {self.name!r} option{of}",
                                  allowed, got)
            raise option_error(self.name, self.check.allowed, value, owner)
        return value


OPTIONS: dict[str, Option] = {}


def declare(name: str, default: Any, check: Check, description: str, *,
            scope: str = "metric", spec: bool = True) -> Option:
    """Declare option ``name`` (once). Its default must pass its own check."""
    if name in OPTIONS:
        raise ValueError(f"option {name!r} declared twice")
    if scope not in SCOPES:
        raise ValueError(f"bad option scope {scope!r}")
    opt = Option(name, default, check, description, scope, spec)
    if not check(default):
        raise ValueError(f"the default {default!r} of option {name!r} fails its own check")
    OPTIONS[name] = opt
    return opt


def names(scope: str | Iterable[str] | None = None) -> list[str]:
    """Declared option names of ``scope`` (one or several; all when None), in order."""
    scopes = (scope,) if isinstance(scope, str) else tuple(scope or SCOPES)
    return [n for n, o in OPTIONS.items() if o.scope in scopes]


def defaults(scope: str | Iterable[str] = "metric") -> dict[str, Any]:
    """``{name: default}`` of the options of ``scope``."""
    return {n: OPTIONS[n].default for n in names(scope)}


def get_option(name: str) -> Option:
    try:
        return OPTIONS[name]
    except (KeyError, TypeError):
        raise unknown_name_error("option", name, names(("metric", "audit"))) from None


def check_option(name: str, value: Any) -> Any:
    """Check one value of option ``name`` (standard messages); returns it unchanged."""
    return get_option(name).validate(value)


def validate(options: Any, *, scopes: Iterable[str] = ("metric", "audit"),
             what: str = "'options'") -> dict[str, Any]:
    """Check a mapping of computation options; returns a plain dict (values unchanged).

    Raises
    ------
    SdcInputError
        ``options`` is not a mapping, names an undeclared option (the message
        lists the valid ones) or holds a value its check refuses.
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise value_error(what, "a mapping of option names to values (e.g. "
                          "{chunk_rows: 65536})", options)
    valid = [n for n in names(tuple(scopes)) if OPTIONS[n].spec]
    for key, value in options.items():
        if key not in valid:
            raise unknown_name_error("option", key, valid)
        OPTIONS[key].validate(value)
    return dict(options)


def validate_method_options(method: Any, options: Any, *, api: bool = False
                            ) -> dict[str, Any]:
    """Check the options given to a masking method (a :class:`MaskingMethod`).

    Only the options the method declared are accepted (the message lists them);
    ``api=True`` also accepts those of the Python API only (``spec=False``).
    """
    if options is None:
        return {}
    name = method.name
    if not isinstance(options, Mapping):
        raise value_error(f"the options of {name}", "a mapping of option names to values",
                          options)
    valid = [n for n in method.options if api or OPTIONS[n].spec]
    for key, value in options.items():
        if key not in valid:
            raise unknown_name_error(f"{name} option", key, valid)
        OPTIONS[key].validate(value, owner=name)
    return dict(options)


def read_items(items: Iterable[str], *, what: str = "--option") -> dict[str, Any]:
    """``KEY=VALUE`` strings as a dict, each VALUE read as YAML with a spec's rules; not yet
    checked against the registry. The one parser of every command's ``-o/--option``.

    A key given twice is refused (no "last one wins"); an item without ``=`` is
    refused with a hint at ``--out`` (``-o FILE`` once meant ``--out FILE``).
    """
    out: dict[str, Any] = {}
    for item in items:
        from .yamlsafe import parse_option_value     # imported only when there are items
        key, sep, value = str(item).partition("=")
        key = key.strip()
        if not sep or not key:
            raise SdcInputError(f"{what} takes KEY=VALUE (e.g. chunk_rows=4096 or "
                                f"crl_external=[V4,V12]). Got {item!r} instead. (-o is short "
                                "for --option; an output file is given with --out FILE.)")
        if key in out:
            raise SdcInputError(f"{what} {key} is given twice; give each option once")
        out[key] = parse_option_value(key, value)
    return out


def parse_items(items: Iterable[str], *, scopes: Iterable[str] = ("metric",)
                ) -> dict[str, Any]:
    """``KEY=VALUE`` strings (``--option`` on the command line) as checked options.

    Each VALUE is read as YAML, as in a spec: ``chunk_rows=4096``,
    ``crl_external=[V4,V12]``, ``prl_blocking=null`` (see :func:`read_items`).
    """
    return validate(read_items(items), scopes=scopes, what="--option")


def prl_names() -> tuple[str, ...]:
    """The PRL options (``prl_*``), in declaration order: the fields of
    :class:`sdcdist.linkage.prl.PRLSettings` and the PRL flags of ``sdcdist link``."""
    return tuple(n for n in OPTIONS if n.startswith("prl_"))


def default_text(opt: Option) -> str:
    """The default as a spec would write it (``null`` for None)."""
    v = opt.default
    if v is None:
        return "null"
    if isinstance(v, tuple):
        v = list(v)
    if isinstance(v, str):
        return v
    return str(v)


def check_declared(used: Iterable[str], *, scope: str, owner: str) -> tuple[str, ...]:
    """For registries: ``used`` as a tuple, each a declared option of ``scope``."""
    used = tuple(used)
    for n in used:
        if n not in OPTIONS or OPTIONS[n].scope != scope:
            raise ValueError(f"{owner} uses option {n!r}, which is not a declared {scope} "
                             "option of sdcdist.options")
    return used


# ---------------------------------------------------------------------------
# the declarations

_INT1 = integer(1)

# -- record chunks, pair blocks, sorting (every reduction) --
declare("chunk_rows", 65_536, integer(1, MAX_CHUNK_ROWS),
        "records per reduction chunk (fixed: results never depend on the storage chunking "
        "or the workers)")
declare("block_memory", 64 * 2**20, integer(1, MAX_MEMORY_BYTES),
        "bytes of pair distances one linkage task may hold")
declare("block_rows", None, optional(Check("a pair [masked rows, original rows] of integers "
                                           f"in [1, {MAX_DENSE}] (a block's distances fill "
                                           "at most 8 GiB)", _int_pair), "sized from block_memory"),
        "explicit rows per pair block of distance linkage, instead of block_memory")
declare("linkage_method", "index", choice("index", "brute"),
        "nearest neighbours by a KD-tree per original block (index) or by distance matrices "
        "(brute); identical results")
declare("dld", "catalog", choice("catalog", "dmt"),
        "convention of DLD and DLD2: catalog (standardised keys, masked -> original, ties "
        "1/t) or dmt (raw keys, original -> masked, a full hit when the true record is among "
        "the tied nearest; reproduces Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra)")
declare("dld_distance", None, optional(choice("euclidean", "gower"),
                                       "gower on key sets with a categorical column, "
                                       "euclidean on all-numeric ones"),
        "distance of DLD and DLD2: euclidean (standardised keys; a key set with categorical "
        "columns is linked within blocks of equal categories) or gower (Gower 1971: mean of "
        "per-column terms, nominal 0/1, ordinal |a - b|/(L - 1), numeric |a - b|/range, a "
        "missing value 1; exact ties)")
declare("ordinal", None, optional(Check("a list of column names", _column_list),
                                  "none: categorical columns are nominal"),
        "categorical columns whose codes (label order) are ordered: the Gower distance of "
        "DLD takes |a - b|/(L - 1) on them, and CRL under crl_correlation: spearman ranks "
        "them (nominal columns are left out of it)")
declare("bucket_rows", None, optional(integer(1, MAX_ROWS), "max(4 x chunk_rows, 65536)"),
        "keys per bucket of the distributed rank sort")
declare("sort_memory", 128 * 2**20, integer(1, MAX_MEMORY_BYTES),
        "bytes of sort data in flight (columns are sorted in groups)")
# -- probabilistic record linkage (PLD, PLD20) --
declare("prl_method", "s", choice("s", "l", "d"),
        "PRL comparison: absolute differences in sd of the original column (s, default), "
        "relative differences on g(v) = sign(v) log(1+|v|) (l) or on the raw values (d); the "
        "papers use l with prl_t 0.05")
declare("prl_t", [0, 0.1, 0.25, 0.5, 1.0],
        Check("a tolerance > 0, a list of increasing tolerances (only the first may be 0: "
              "exact agreement), or one such list per key column", _tolerances),
        "PRL tolerances (in sd of the column for prl_method s); a list of increasing ones "
        "gives a multi-level comparison")
declare("prl_weights", "linear", choice("linear", "step"),
        "PRL weights of a multi-level numeric key column: linear in |a - b| between the "
        "weights of neighbouring levels, each read at its level's middle (linear, default), "
        "or one weight per level (step); binary and categorical columns are not affected")
declare("prl_top_c", 20, integer(1, MAX_TOP_C),
        "PRL candidates per masked record for the sparse assignment")
declare("prl_dense_limit", 5000, integer(1, MAX_DENSE),
        "largest file PRL links with the dense exact assignment")
declare("prl_blocking", None,
        optional(Check("a key column name (exact blocks) or [key column name, half window >= 1]",
                       _blocking), "all pairs"),
        "PRL blocking on a key column: its name alone compares only records with equal values "
        "(e.g. the same category); [name, half window] is sorted-neighbourhood blocking "
        "(the result is then flagged)")
declare("prl_block_rows", None, optional(Check(f"a pair [A rows, B rows] of integers in [1, "
                                               f"{MAX_ROWS}]", _row_pair), f"{PRL_BLOCK_ROWS} each"),
        "rows per PRL pair block")
declare("prl_em", None, optional(Check(f"a mapping with some of {_EM_TEXT}", _em, _em_part),
                                 "the defaults"),
        f"PRL EM settings: max_iter ({PRL_EM_DEFAULTS['max_iter']} E-steps; reaching it flags "
        f"the cell), tol ({PRL_EM_DEFAULTS['tol']:g}, largest change of a parameter's logarithm "
        f"in a plain EM step), eps ({PRL_EM_DEFAULTS['eps']:g}), m_start "
        f"({PRL_EM_DEFAULTS['m_start']}), p_max (default min(nA, nB)/(nA nB); 1 turns the cap "
        "off), accelerate (true: SQUAREM, the default; false: plain EM), fit (joint: m, u and "
        "P(M), the default; m_only: u the level frequencies over all pairs and P(M) = "
        "min(nA, nB)/pairs fixed, only m fitted)")
declare("prl_unmatched", "row_floor", choice("row_floor", None),
        "sparse PRL assignment: row_floor (fast) or null (assign as many masked records as "
        "the candidates allow first)")
declare("prl_counting", "auto", choice("auto", "pairs", "count"),
        "PRL pattern counts by comparing all pairs (pairs), exactly without enumerating them "
        "(count; identical counts, refused where slower), or count on large files and search "
        "the top candidates from 2^24 pairs on (auto; the same candidates)")
# -- distance, rank and correlation linkage, interval disclosure --
declare("gdbrl_dense_max", 5000, integer(1, MAX_DENSE),
        "largest file GDBRL links with the dense exact assignment")
declare("gdbrl_candidates", 20, integer(1, MAX_TOP_C),
        "nearest candidates per record of GDBRL's sparse assignment (flagged)")
declare("crl_external", None, optional(Check("a list of column names", _column_list),
                                       "link on each key set"),
        "CRL without shared attributes: the intruder's columns (original file); give "
        "crl_released too")
declare("crl_released", None, optional(Check("a list of column names", _column_list),
                                       "link on each key set"),
        "CRL without shared attributes: the released columns (masked file); give "
        "crl_external too")
declare("crl_correlation", "pearson", choice("pearson", "spearman"),
        "the correlations CRL picks its attribute pair by: pearson, or spearman (mid-ranks "
        "for ties; ordinal categorical columns by their codes in label order; nominal ones "
        "left out, with a note)")
declare("id_p", tuple(range(1, 11)), Check("a non-empty list of percentages in [0, 100]",
                                           _percentages),
        "the percentages p of ID1 and ID2 (averaged over them)")
declare("sdid_k", 0.05, number(low=0), "SDID interval half-width in masked sds")
declare("regression", None, optional(Check("a regression 'y ~ x1 + x2' (column names)",
                                           lambda v: isinstance(v, str) and "~" in v),
                                     "the last numeric column on the other columns"),
        "ci_overlap: the linear regression whose coefficients' intervals are compared")
declare("quality_corr_threshold", 0.5, number(0, 1),
        "corr_similarity and quality: a pair of numeric columns counts when the original's "
        "|Pearson r| exceeds it (SDMetrics' QualityReport default 0.5; 0 counts every pair)")
declare("quality_assoc_threshold", 0.3, number(0, 1),
        "contingency_similarity and quality: a pair counts when the original's Cramér's V "
        "exceeds it (SDMetrics' QualityReport default 0.3; 0 counts every pair)")
# -- attribute disclosure (l-diversity, t-closeness, beta-likeness, delta-disclosure) --
declare("ldiv_l", 2, number(low=1),
        "the l a key class must reach in distinct, entropy and recursive l-diversity (the "
        "ldiv_*_fail metrics)")
declare("ldiv_c", 2, number(above=0),
        "the c of recursive (c,l)-diversity (sdcMicro's l_recurs_c)")
declare("tclose_t", 0.2, number(0, 1),
        "the t a key class's earth mover's distance may not exceed (tclose_fail)")
declare("likeness_beta", 1.0, number(above=0),
        "the beta of beta-likeness (beta_basic_fail, beta_enhanced_fail)")
declare("privacy_delta", 1.0, number(above=0),
        "the delta of delta-disclosure privacy (delta_disc_fail)")
declare("tclose_ordered", None, optional(Check("a list of column names", _column_list),
                                       "none: categorical columns are nominal"),
        "categorical confidential columns whose codes are ordered (ordinal): t-closeness "
        "uses the ordered distance on them, as on numeric columns")
# -- special uniques (SUDA2) --
declare("suda_max_size", None, optional(integer(1, MAX_QUERY_COLUMNS),
                                        "all the key columns, as sdcMicro"),
        "largest minimal sample unique (key columns) SUDA2 searches; larger ones are left "
        "out of the SUDA scores")
declare("suda_dis_fraction", 0.01, Check("a number in (0, 1)",
                                         lambda v: _is_number(v) and 0 < v < 1),
        "the sampling fraction of the DIS-SUDA scores (sdcMicro's DisFraction)")
declare("suda_original_scores", True, Check("true or false", lambda v: isinstance(v, bool)),
        "SUDA scores as Elliot et al. (true: w(k) = (m - k)!) or as the IHSN program "
        "(false), sdcMicro's original_scores")
declare("suda_missing", None, optional(number(), "only NaN is missing"),
        "a key code that SUDA2 also treats as missing (sdcMicro's missing, e.g. -999)")
# -- model-based risk (log-linear models, sdcMicro's modRisk) --
declare("modrisk_method", "default", choice("default", "CE", "PML", "weightedLLM", "IPF"),
        "the log-linear fit of modrisk_*: default (Poisson model of the sample counts), CE "
        "(Clogg-Eliason offset), PML (pseudo maximum likelihood on the rounded weight "
        "sums), weightedLLM (the weight sum as a covariate), IPF (iterative proportional "
        "fitting, main effects only)")
declare("modrisk_formula", None, optional(Check("a model formula such as '~ a + b + a:b'",
                                                lambda v: isinstance(v, str) and bool(v.strip())),
                                          "the main effects of the categorical keys"),
        "the log-linear model of modrisk_*: main effects and interactions of categorical "
        "columns ('~ a + b + c + a:b', 'a*b' for a + b + a:b)")
declare("modrisk_bound", None, optional(number(above=0), "no bound"),
        "modrisk_*: only key cells with at most this many records count in the divisor "
        "(sdcMicro's bound)")
# -- the three criteria of the Article 29 Working Party (singling out, linkability, inference) --
declare("attack_n", 500, integer(1, MAX_ATTACKS),
        "attacks per attack kind: targets of linkability and inference, queries of singling out")
declare("attack_confidence", 0.95, Check("a number strictly between 0 and 1",
                                         lambda v: _is_number(v) and 0 < v < 1),
        "confidence level of the attacks' risk intervals (Wilson score)")
declare("attack_columns", None, optional(Check("a list of column names", _column_list),
                                         "every column but the weight and the household id"),
        "the columns the singling-out attacker queries (and the default linkability and "
        "inference columns)")
declare("so_n_cols", 3, integer(1, MAX_QUERY_COLUMNS),
        "columns per multivariate singling-out query (at most the attack columns)")
declare("so_max_attempts", 10_000_000, integer(1, MAX_ATTEMPTS),
        "most candidate queries the multivariate singling-out attacker tries")
declare("so_control_scale", "fit", choice("fit", "sizes", "none"),
        "singling out: how the control set's successes are scaled to the original file's size: "
        "the fitted singling-out model (fit), (n_control + 1) / (n_original + 1) as anonymeter "
        "1.1.0's fit comes out (sizes), or not at all (none)")
declare("link_aux", None, optional(Check("two non-empty lists of column names",
                                         lambda v: _is_list(v) and len(v) == 2 and all(
                                             _is_list(x) and _column_list(x) for x in v)),
                                   "the attack columns split in two halves"),
        "linkability: the columns of the attacker's two files")
declare("link_neighbors", 1, integer(1, MAX_TOP_C),
        "linkability: a link is found when the two halves share one of this many nearest "
        "released records")
declare("infer_secret", None, optional(Check("a column name", lambda v: isinstance(v, str)
                                             and bool(v)), "the first confidential column"),
        "inference: the secret column the attacker guesses")
declare("infer_aux", None, optional(Check("a list of column names", _column_list),
                                    "the attack columns but the secret"),
        "inference: the columns the attacker knows")
declare("infer_tolerance", 0.05, number(low=0),
        "inference on a numeric secret: a guess is right within this relative difference")
# -- the audit driver --
declare("cell_mode", "auto", choice("auto", "task", "distributed"),
        "run each cell in one task, spread over the cluster (distributed), or task up to "
        "task_cell_limit records (auto)", scope="audit")
declare("control", None, optional(Check("a number strictly between 0 and 1",
                                        lambda v: _is_number(v) and 0 < v < 1),
                                  "no control set"),
        "share of each dataset's records held out of masking as the control set of the "
        "singling-out, linkability and inference attacks", scope="audit")
declare("task_cell_limit", 20_000, integer(1, MAX_ROWS),
        "largest file (records) that cell_mode auto runs as one task per cell", scope="audit")
# -- masking methods --
declare("roles", None, optional(Check("a mapping of role names (confidential, quasi or key) "
                                      "to lists of columns", _roles), "the dataset's roles"),
        "column roles of a method that needs them (IPSO)", scope="method")
declare("columns", None, optional(Check("a list of column names", _column_list),
                                  "the dataset's columns"),
        "column names the roles refer to (filled in by the audit)", scope="method")
declare("leftover", "end", choice("end", "middle"),
        "micir, micz, micpcp: where the group holding the n mod k left-over records lies in "
        "the sorted order: the last group (end) or group (n // k - 1) // 2, counting from 0 "
        "(middle, as Table 2 of Domingo-Ferrer, Mateo-Sanz and Torra)", scope="method")
declare("variables", None, optional(Check("a list of column names", _column_list),
                             "the categorical key columns (else every categorical column)"),
        "pram, pram_freq, pram_freq_inv, recode, suppress: the categorical columns to mask",
        scope="method")
declare("importance", None, optional(Check("a list of integers 1..q, one per masked column",
                                           lambda v: isinstance(v, (list, tuple)) and all(
                                               _is_int(j) for j in v)),
                                     "by number of categories, most first"),
        "suppress: sdcMicro's importance of each masked column (1 = most important, "
        "suppressed last)", scope="method")
declare("alpha", 0.5, number(low=0, high=1),
        "pram: the amount of perturbation, Rs = alpha PQ + (1 - alpha) I (sdcMicro's alpha)",
        scope="method")
declare("mapping", None, optional(Check("a mapping of column name to a mapping of category "
                                        "label to new label", lambda v: isinstance(v, dict)
                                        and _mapping_part(v) is None, _mapping_part),
                                  "bands only"),
        "recode: new labels per column ({age: {'1': 'child', ...}}); applied before bands",
        scope="method")
declare("origin", 0.0, number(), "recode: where the first band starts (bands are "
        "[origin + i w, origin + (i+1) w))", scope="method")
declare("synth_columns", None, optional(Check("a non-empty list of column names", lambda v:
                                              _column_list(v) and len(v) > 0),
                                        "every column"),
        "cart, copula, privbayes: the columns replaced by synthetic values; the others are "
        "kept bit for bit and serve as predictors (partially synthetic)", scope="method")
declare("synth_order", None, optional(Check("a list of column names", _column_list),
                                      "the file's order"),
        "cart: the visit sequence, each replaced column once", scope="method")
declare("synth_bins", 20, integer(2, 10_000),
        "privbayes: equal-width bins of each numeric column", scope="method")
declare("synth_degree", 2, integer(1, 10),
        "privbayes: the most parents of an attribute in the Bayesian network (k)",
        scope="method")
declare("categorical", None, optional(Check("a list of column positions", lambda v: isinstance(
            v, (list, tuple)) and all(_is_int(j) for j in v)), "none"),
        "positions of the categorical columns (filled in from the data; numeric methods carry "
        "them through unchanged); Python API only", scope="method", spec=False)
declare("keep", None, optional(Check("a list of column positions", lambda v: isinstance(
            v, (list, tuple)) and all(_is_int(j) for j in v)), "none"),
        "positions of numeric columns no method masks (the sampling weight; filled in from "
        "the data); Python API only", scope="method", spec=False)
declare("labels", None, optional(Check("a mapping of column name to its category labels",
                                       lambda v: isinstance(v, dict)), "the dataset's"),
        "recode: each categorical column's labels in code order (filled in from the data); "
        "Python API only", scope="method", spec=False)
declare("info", None, optional(Check("a dict", lambda v: isinstance(v, dict))),
        "a dict the method fills with detail (distr: the family of each column); Python API "
        "only", scope="method", spec=False)
