"""``python -m tracely_sdk.server``: ``tracely serve`` without the rest of the command line."""

from tracely_sdk.server._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
