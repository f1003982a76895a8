"""``python -m sdcdist ...``: the same as the ``sdcdist`` command.

The package's import (``sdcdist/__init__.py``) has pinned the SIMD code paths
(:mod:`sdcdist.simd`) before the command imports numpy.
"""

from .cli import main

if __name__ == "__main__":  # pragma: no cover
    main()
