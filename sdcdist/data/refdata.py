"""Where the CASC reference files (Census, Tarragona) are read from.

They are not shipped with sdcdist. The folder is ``$SDCDIST_REFDATA`` when set,
else ``shared/data`` beside the source checkout.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import SdcInputError

__all__ = ["reference_dir", "reference_file", "REFERENCE_FILES"]

REFERENCE_FILES = {"census": "census.csv", "tarragona": "tarragona.csv"}


def reference_dir() -> Path:
    env = os.environ.get("SDCDIST_REFDATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / "shared" / "data"


def reference_file(name: str) -> Path:
    """Path of a reference file by short name (``"census"`` or ``"tarragona"``)."""
    if name not in REFERENCE_FILES:
        raise SdcInputError(f"Unknown reference file {name!r}. Valid names: "
                            f"{', '.join(REFERENCE_FILES)}.")
    path = reference_dir() / REFERENCE_FILES[name]
    if not path.exists():
        raise SdcInputError(f"reference file {REFERENCE_FILES[name]!r} not found in "
                            f"{str(reference_dir())!r}; set SDCDIST_REFDATA to the folder "
                            "holding census.csv and tarragona.csv")
    return path
