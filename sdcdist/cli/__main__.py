"""``python -m sdcdist.cli ...``: the same as the ``sdcdist`` command."""

from . import main

if __name__ == "__main__":  # pragma: no cover
    main()
