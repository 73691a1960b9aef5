"""urllib3, and so requests and botocore (boto3): model calls recorded and served at
``HTTPConnectionPool.urlopen`` (see :mod:`tracely_sdk.providers.http._urllib3`)."""

from __future__ import annotations

from tracely_sdk.providers.http._urllib3 import URLLib3

LIBRARY = URLLib3("urllib3")
set_live = LIBRARY.set_live
install = LIBRARY.install
uninstall = LIBRARY.uninstall
patched = LIBRARY.patched
