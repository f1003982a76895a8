"""``python -m sdcdist.simd --env``: the pins as NAME=value words (the Makefile's TEST_ENV);
``--check``: the code paths this process runs, as JSON."""

from __future__ import annotations

import sys

from . import code_paths, env_line


def main(argv: list[str] | None = None) -> int:
    """``python -m sdcdist.simd --env`` prints the pins; ``--check`` this process's paths."""
    import json
    args = sys.argv[1:] if argv is None else argv
    if args == ["--env"]:
        print(env_line())
        return 0
    if args == ["--check"]:
        print(json.dumps(code_paths(), indent=1))
        return 0
    print("usage: python -m sdcdist.simd --env | --check", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
