"""Store URLs as messages show them: no password, wherever the URL carries it."""

from __future__ import annotations

import pytest

from tracely_sdk.store import redact_url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:s3cret@db:5432/t", "postgresql://u:***@db:5432/t"),
        ("postgresql://u@db/t?password=s3cret", "postgresql://u@db/t?password=***"),
        (
            "postgresql://db/t?sslmode=require&PassWord=s3cret&pool_size=4",
            "postgresql://db/t?sslmode=require&PassWord=***&pool_size=4",
        ),
        ("postgresql://db/t?pass%77ord=s3cret", "postgresql://db/t?pass%77ord=***"),
        (
            "postgresql://u:a@b@db/t?password=x&password=y",
            "postgresql://u:***@db/t?password=***&password=***",
        ),
        (
            "postgresql://u:s3cret@db?application_name=a@b",
            "postgresql://u:***@db?application_name=a@b",
        ),
        ("sqlite:///tmp/tracely.db", "sqlite:///tmp/tracely.db"),
        (
            "https://tracely.example.com/?passwords=kept",
            "https://tracely.example.com/?passwords=kept",
        ),
    ],
)
def test_passwords_are_hidden(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "s3cret" not in redact_url(url)
