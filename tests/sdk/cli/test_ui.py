"""``tracely ui`` refuses what it cannot show."""

from __future__ import annotations

from tracely_sdk.cli import main


def test_ui_shows_a_local_store_not_a_server(capsys: object) -> None:
    status = main(["ui", "--store", "https://user:secret@tracely.example"])
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    assert status == 2
    assert "is a tracely server: open its pages at https://user:***@tracely.example/ui" in err
    assert "secret" not in err
