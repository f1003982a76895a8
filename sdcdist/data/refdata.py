"""The reference microdata files shipped with sdcdist.

Four public test files live in the package (``sdcdist/data/reference/``,
provenance in the README.md there):

- ``census``: the CASC "Census" file, 1080 x 13 continuous variables;
- ``tarragona``: the CASC "Tarragona" file, 834 x 13 continuous variables;
- ``household``: a household survey extract, 4580 x 15 columns, all numeric
  (the categorical quasi-identifiers are integer codes). Its
  ``sampling_weight`` column is constant, so select the columns to audit
  (``dataset: {reference: household, columns: [...]}``) or give it the
  ``weight`` role; sdcdist reads the codes as numbers unless the dataset names
  them in ``categorical:`` (``examples/household.yaml``);
- ``free1``: the CASC / mu-Argus demo file, 4000 x 10 columns (categorical codes,
  ``INCOME``, ``WEIGHT``), used for the attribute-disclosure comparisons.

When ``$SDCDIST_REFDATA`` is set, the files are read from that folder instead
(the same file names).
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from ..errors import missing_file_error, unknown_name_error

__all__ = ["reference_dir", "reference_file", "REFERENCE_FILES"]

#: short name -> file name, in the package folder ``sdcdist/data/reference``.
REFERENCE_FILES = {"census": "census.csv", "tarragona": "tarragona.csv",
                   "household": "household.csv", "free1": "free1.csv"}


def reference_dir() -> Path:
    """The folder the reference files are read from: ``$SDCDIST_REFDATA`` when set, else
    the copy shipped in the package."""
    env = os.environ.get("SDCDIST_REFDATA")
    if env:
        return Path(env)
    return Path(os.fspath(resources.files(__package__).joinpath("reference")))


def reference_file(name: str) -> Path:
    """Path of a reference file by short name.

    Parameters
    ----------
    name : {"census", "tarragona", "household", "free1"}

    Returns
    -------
    pathlib.Path
        The file in ``$SDCDIST_REFDATA`` when that is set, else the shipped copy.

    Raises
    ------
    SdcInputError
        For an unknown name, or a file missing from ``$SDCDIST_REFDATA``.
    """
    if name not in REFERENCE_FILES:
        raise unknown_name_error("reference file", name, list(REFERENCE_FILES))
    folder = reference_dir()
    path = folder / REFERENCE_FILES[name]
    if not path.exists():
        if os.environ.get("SDCDIST_REFDATA"):
            raise missing_file_error("reference file", path, "set SDCDIST_REFDATA to the "
                                     "folder holding it, or unset it to use the copy shipped "
                                     "with sdcdist")
        raise missing_file_error("reference file", path, "it is missing from the installed "
                                 "package: reinstall sdcdist, or set SDCDIST_REFDATA to a "
                                 "folder holding it")
    return path
