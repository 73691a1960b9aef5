"""``python -m tracely_sdk.cli``: the ``tracely`` command."""

from tracely_sdk.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
