"""Regenerate the example fingerprints of ``tests/test_examples.py`` after a deliberate change.

    python tests/data/make_fingerprints.py demo ywc_domingo     # full runs of these specs
    python tests/data/make_fingerprints.py --subset             # the subsets only
    python tests/data/make_fingerprints.py --subset dmt_table2  # both (dmt_table2 takes minutes)
    python tests/data/make_fingerprints.py --all                # every spec of examples/ and
                                                                # every subset, and the tables
                                                                # of examples/README.md
    python tests/data/make_fingerprints.py household --keep cubes/  # keep the cubes

Each named spec of ``examples/`` is audited on an in-process cluster like the
test's ``client`` fixture (two workers of one thread), and its per-metric
fingerprints (:func:`sdcdist.testing.cube_fingerprints`) replace its entry in
``example_fingerprints.json``. Metrics whose flags changed on purpose
(``example_values_fingerprints.json``: ``PS``, ``PS2``) get their values-only
hash updated there and keep their old entry in ``example_fingerprints.json``,
which the test does not compare; ``RR`` and ``PDL`` are left out as the test
leaves them out. ``--subset`` reruns each subset (the parameters listed in
``<spec>_subset_fingerprints.json``: ``dmt_table2``, ``drs_equal_risk``,
``household_risks``) and rewrites its fingerprints (``["values", hash]`` for ``PS``/``PS2``). Only the files of the runs asked for are rewritten; review the
diff (``git diff tests/data``) and say in the commit which metrics changed and why.

The full run of a spec whose figures ``examples/README.md`` shows (``household``, the
``household_risks`` and ``synthetic_reid`` studies: ``README_TABLES`` of ``examples/reproduce.py``) also rewrites its
summary in ``example_tables.json`` (the cube's fingerprints and the figures of its tables)
and the README's tables between their markers, so fingerprints, summary and README change
together (``tests/test_reproduce.py`` checks that they agree). ``--keep DIR`` leaves the
cubes in DIR (``NAME.zarr``; ``python examples/reproduce.py --readme DIR`` reads them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
FULL_FILE = DATA / "example_fingerprints.json"
VALUES_FILE = DATA / "example_values_fingerprints.json"
SUBSET_FILES = sorted(DATA.glob("*_subset_fingerprints.json"))
CHANGED_ON_PURPOSE = {"RR", "PDL"}   # as tests/test_examples.py


def _dump(path: Path, obj: dict) -> None:
    if json.loads(path.read_text()) != obj:   # the files' own layout, rewritten on change only
        compact = path == VALUES_FILE
        path.write_text(json.dumps(obj) if compact else json.dumps(obj, indent=1) + "\n")


def subset_spec(subset: dict):
    """The parsed spec ``subset["spec"]`` restricted to the subset's parameters (and to its
    ``replicates`` when it names them: replicate r of a cell has the same seed whatever the
    count)."""
    import yaml

    from sdcdist.audit import parse_spec
    path = ROOT / "examples" / f"{subset['spec']}.yaml"
    doc = yaml.safe_load(path.read_text())
    for m in doc["methods"]:
        if "params" in m:
            m["params"] = subset["params"][m["name"]]
    doc["replicates"] = subset.get("replicates", doc.get("replicates", 1))
    return parse_spec(doc, base_dir=path.parent)


def fingerprints(spec, out: Path, client, values_only: set[str]) -> tuple[dict, dict]:
    """(full fingerprints, values-only fingerprints of ``values_only``) of ``spec``'s cube."""
    from sdcdist.audit import run_audit
    from sdcdist.testing import cube_fingerprints
    res = run_audit(spec, out, client=client)
    if res.computed != res.total:
        raise SystemExit(f"{out.name}: {res.total - res.computed} cells were not computed")
    full = cube_fingerprints(out)
    values = cube_fingerprints(out, variables=("value", "keyset_value", "excluded"))
    return full, {m: values[m] for m in values_only if m in values}


def _reproduce():
    """examples/reproduce.py as a module (its README tables)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "examples" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("names", nargs="*", help="spec names of examples/ (file stems)")
    ap.add_argument("--subset", action="store_true",
                    help="the subsets (dmt_table2, drs_equal_risk, household_risks) that the tests "
                         "run by default")
    ap.add_argument("--all", action="store_true", help="every spec and every subset")
    ap.add_argument("--keep", metavar="DIR", help="keep the full runs' cubes in DIR")
    args = ap.parse_args(argv)
    known = sorted(p.stem for p in (ROOT / "examples").glob("*.yaml"))
    names = known if args.all else args.names
    unknown = [n for n in names if n not in known]
    if unknown or not (names or args.subset or args.all):
        ap.error(f"give spec names among {known} and/or --subset (unknown: {unknown})")

    sys.path.insert(0, str(ROOT))
    import sdcdist  # noqa: F401  (first: pins the SIMD code paths before numpy loads)
    from distributed import Client, LocalCluster

    from sdcdist.audit import load_spec
    full_fp = json.loads(FULL_FILE.read_text())
    values_fp = json.loads(VALUES_FILE.read_text())
    subsets = {p: json.loads(p.read_text()) for p in SUBSET_FILES}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster, Client(cluster) as client, \
            tempfile.TemporaryDirectory() as tmp:
        cubes = Path(args.keep) if args.keep else Path(tmp)
        cubes.mkdir(parents=True, exist_ok=True)
        for name in names:
            spec = load_spec(ROOT / "examples" / f"{name}.yaml")
            cube = cubes / f"{name}.zarr"
            if cube.exists():
                shutil.rmtree(cube)
            got, vals = fingerprints(spec, cube, client, set(values_fp))
            keep = set(spec.metrics) - CHANGED_ON_PURPOSE
            old = full_fp.get(name, {})
            entry = {m: (old[m] if m in vals and m in old else h)
                     for m, h in got.items() if m in keep}
            changed = sorted(m for m in entry if old.get(m) != entry[m])
            changed += sorted(m for m in vals if values_fp.get(m) != vals[m])
            full_fp[name] = entry
            values_fp.update(vals)
            print(f"{name}: {len(entry)} metrics, changed: {changed or 'none'}")
        if names:
            _dump(VALUES_FILE, values_fp)   # the summary reads the values-only metrics
            readme = _reproduce()
            tabled = {n: cubes / f"{n}.zarr" for n in names
                      if any(spec == n for spec, _ in readme.README_TABLES.values())}
            if tabled:
                readme.update_summary(tabled)
                print(f"examples/README.md: tables "
                      f"{'rewritten' if readme.write_readme() else 'unchanged'}")
        for subset in subsets.values() if args.subset or args.all else ():
            out = Path(tmp) / f"{subset['spec']}_subset.zarr"     # a cube per subset
            got, vals = fingerprints(subset_spec(subset), out, client, set(values_fp))
            keep = set(full_fp[subset["spec"]])
            entry = {m: (["values", vals[m]] if m in vals else h)
                     for m, h in got.items() if m in keep}
            changed = sorted(m for m in entry if subset["fingerprints"].get(m) != entry[m])
            subset["fingerprints"] = entry
            print(f"{subset['spec']} subset: {len(entry)} metrics, changed: {changed or 'none'}")
    if names:
        _dump(FULL_FILE, full_fp)
        _dump(VALUES_FILE, values_fp)
    for path, subset in subsets.items() if args.subset or args.all else ():
        _dump(path, subset)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
