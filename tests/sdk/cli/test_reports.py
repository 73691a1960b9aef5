"""``tracely replay --shard K/N`` and ``tracely reports merge``: a suite split between jobs,
gated as one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from examples import weather_agent
from tracely_sdk._runner import Shard

from ._helpers import CLI, WEATHER, record


def suite(capture: Any, cli: CLI, ids: list[str], *, broken: set[str] = frozenset()) -> None:
    """A case per id, all from one Paris recording; the ``broken`` ones fail."""
    paris = record(capture, cli, weather_agent.run, "Paris")
    for case_id in ids:
        fn = "run_broken" if case_id in broken else "run"
        status, _, err = cli(
            "cases", "promote", paris, "--name", case_id, "--id", case_id,
            "--entrypoint", f"{WEATHER}:{fn}",
        )  # fmt: skip
        assert status == 0, err


def shard_reports(cli: CLI, tmp_path: Path, count: int) -> list[Path]:
    paths = []
    for k in range(1, count + 1):
        path = tmp_path / f"shard-{k}.json"
        status, _, err = cli("replay", "--shard", f"{k}/{count}", "--json", str(path))
        assert status in (0, 1), err
        paths.append(path)
    return paths


def case_ids(path: Path) -> list[str]:
    return [c["case_id"] for c in json.loads(path.read_text())["cases"]]


def test_shards_replay_every_case_once_and_merge_into_one_gate(
    capture: Any, cli: CLI, tmp_path: Path
) -> None:
    ids = [f"city{n}" for n in range(1, 10)]
    suite(capture, cli, ids, broken={"city4", "city7"})
    paths = shard_reports(cli, tmp_path, 3)
    held = [case_ids(p) for p in paths]
    assert sorted(i for ids_of in held for i in ids_of) == sorted(ids)  # each case in one shard
    assert held == [[i for i in ids if Shard(k, 3).holds(i)] for k in (1, 2, 3)]
    shard = json.loads(paths[1].read_text())["summary"]["shard"]
    assert shard == {"index": 2, "count": 3, "selected": 9}

    merged = tmp_path / "merged.json"
    status, out, err = cli("reports", "merge", *map(str, paths), "--json", str(merged), "--all")
    assert status == 1, err
    assert [line.split()[0] for line in out.splitlines()[1:10]] == ids  # natural order
    assert "FAIL 2 cases alike:\n  cases city4, city7\n" in out
    assert out.rstrip().splitlines()[-1].startswith("9 cases: 7 passed, 2 failed in")
    report = json.loads(merged.read_text())
    assert report["schema"] == "tracely.replay/1" and "shard" not in report["summary"]
    assert [c["case_id"] for c in report["cases"]] == ids
    assert (report["summary"]["passed"], report["summary"]["failed"]) == (7, 2)


def test_a_merge_of_passing_shards_passes(capture: Any, cli: CLI, tmp_path: Path) -> None:
    suite(capture, cli, ["a", "b", "c"])
    status, out, err = cli("reports", "merge", *map(str, shard_reports(cli, tmp_path, 2)))
    assert status == 0, err
    assert out.rstrip().splitlines()[-1].startswith("3 cases: 3 passed in")


def test_a_merge_refuses_a_missing_or_repeated_shard(
    capture: Any, cli: CLI, tmp_path: Path
) -> None:
    suite(capture, cli, ["a", "b", "c", "d"])
    one, two, three = map(str, shard_reports(cli, tmp_path, 3))
    status, out, err = cli("reports", "merge", one, three)
    assert status == 2 and out == ""
    assert err.startswith("tracely: error: the report of shard 2/3 is missing")
    status, _, err = cli("reports", "merge", one, two, three, one)
    assert status == 2 and f"{one} and {one} are both shard 1/3" in err
    status, _, err = cli("replay", "--json", str(tmp_path / "whole.json"))
    status, _, err = cli("reports", "merge", str(tmp_path / "whole.json"), two)
    assert status == 2 and "is not the report of a shard, but other reports are" in err


def test_a_merge_refuses_what_is_not_a_report(cli: CLI, tmp_path: Path) -> None:
    for name, text, problem in (
        ("garbage.json", "{", "not JSON"),
        ("list.json", "[]", "not a JSON object"),
        ("other.json", '{"schema": "x/1"}', 'no "schema": "tracely.replay/1"'),
        ("cases.json", '{"schema": "tracely.replay/1", "summary": {}, "cases": [{}]}', "case #1"),
        (
            "reasons.json",
            '{"schema": "tracely.replay/1", "summary": {}, '
            '"cases": [{"case_id": "a", "verdict": "FAIL", "reasons": "no list"}]}',
            "case 'a': reasons must be a list",
        ),
    ):
        (tmp_path / name).write_text(text)
        status, _, err = cli("reports", "merge", str(tmp_path / name))
        assert status == 2 and f"{tmp_path / name} is not a tracely replay report" in err
        assert problem in err
    status, _, err = cli("reports", "merge", str(tmp_path / "absent.json"))
    assert status == 2 and "cannot read the report" in err


def test_a_merge_refuses_a_case_in_two_reports(capture: Any, cli: CLI, tmp_path: Path) -> None:
    suite(capture, cli, ["a"])
    for name in ("x.json", "y.json"):
        cli("replay", "--json", str(tmp_path / name))
    status, _, err = cli("reports", "merge", str(tmp_path / "x.json"), str(tmp_path / "y.json"))
    assert status == 2 and "case 'a' is in both" in err


def test_an_empty_shard_of_a_suite_is_not_an_error(capture: Any, cli: CLI, tmp_path: Path) -> None:
    suite(capture, cli, ["only"])
    empty = next(k for k in range(1, 9) if not Shard(k, 8).holds("only"))
    status, out, err = cli("replay", "--shard", f"{empty}/8", "--json", str(tmp_path / "e.json"))
    assert status == 0 and out == ""
    assert f"shard {empty}/8 holds none of the 1 selected case(s)" in err
    report = json.loads((tmp_path / "e.json").read_text())
    assert report["cases"] == []
    assert report["summary"]["shard"] == {"index": empty, "count": 8, "selected": 1}
    # but a filter that selects nothing is still an error, sharded or not
    status, _, err = cli("replay", "--shard", f"{empty}/8", "--tag", "nope")
    assert status == 2 and "no cases to replay" in err


def test_an_empty_suite_is_an_error_in_every_shard(cli: CLI) -> None:
    cli.store().close()
    status, _, err = cli("replay", "--shard", "1/2")
    assert status == 2 and "holds no cases" in err


def test_a_shard_must_be_k_of_n(cli: CLI) -> None:
    for bad in ("0/2", "3/2", "2", "a/b", "1/0", "-1/2"):
        status, _, err = cli("replay", "--shard", bad)
        assert status == 2 and "argument --shard:" in err and "K/N" in err, bad
