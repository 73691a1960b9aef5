"""Masks: volatile values declared once are left out of matching and divergence, never out of
what is served or recorded."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import tracely_sdk as tracely
from tests.sdk.test_canonical import json_values
from tracely_otel import attributes as A
from tracely_sdk._canonical import canonical
from tracely_sdk._masks import PLACEHOLDER, Masks, masks_from, parse_mask
from tracely_sdk._matching import CallKey, call_key
from tracely_sdk._reports import case_entry, format_result
from tracely_sdk._runner import CaseResult


def _boom() -> Any:
    raise AssertionError("fn must not be called under recorded replay")


def masked(value: Any, *specs: str) -> Any:
    return masks_from(list(specs)).apply(canonical(value))[0]


def _prompt(day: str, request_id: str = "req-1") -> list[dict[str, str]]:
    return [
        {"role": "system", "content": f"Today is {day}. Request {request_id}."},
        {"role": "user", "content": "weather in Oslo?"},
    ]


def _llm_bundle(prompt: Any) -> dict[str, Any]:
    return {"llm": {"gpt-4o": [{"input": prompt, "output": "Sunny"}]}}


# -- the syntax -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    [
        ("messages[0].content", {"messages": [{"content": "a"}]}, {"messages": [{"content": PLACEHOLDER}]}),
        ("$.request_id", {"request_id": 7, "q": 1}, {"request_id": PLACEHOLDER, "q": 1}),
        ("$..request_id", {"a": [{"request_id": 1}], "request_id": 2}, {"a": [{"request_id": PLACEHOLDER}], "request_id": PLACEHOLDER}),
        ("[*].content", [{"content": 1}, {"content": 2, "x": 3}], [{"content": PLACEHOLDER}, {"content": PLACEHOLDER, "x": 3}]),
        ("$.meta.*", {"meta": {"a": 1, "b": [2]}}, {"meta": {"a": PLACEHOLDER, "b": PLACEHOLDER}}),
        ("[-1]", [1, 2, 3], [1, 2, PLACEHOLDER]),
        ("""$["odd key"]['it\\'s']""", {"odd key": {"it's": 1}}, {"odd key": {"it's": PLACEHOLDER}}),
        ("$..msg.content", {"msg": {"content": 1, "msg": {"content": 2}}}, {"msg": {"content": PLACEHOLDER, "msg": {"content": PLACEHOLDER}}}),
        ("$.absent.path", {"present": 1}, {"present": 1}),
        ("[5]", [1], [1]),
    ],
)  # fmt: skip
def test_a_json_path_masks_the_values_it_names(spec: str, value: Any, expected: Any) -> None:
    assert masked(value, spec) == expected


def test_a_path_reaches_into_json_text_the_canonical_form_parses() -> None:
    args = {"arguments": '{"city": "Oslo", "request_id": "r-1"}'}
    assert masked(args, "$.arguments.request_id") == {
        "arguments": {"city": "Oslo", "request_id": PLACEHOLDER}
    }


@pytest.mark.parametrize(
    ("spec", "text", "expected"),
    [
        ("@iso-timestamp", "Today is 2026-12-04.", f"Today is {PLACEHOLDER}."),
        ("@iso-timestamp", "at 2026-12-04T07:06:52.123Z", f"at {PLACEHOLDER}"),
        ("@iso-timestamp", "at 2026-12-04 07:06:52+01:00 ok", f"at {PLACEHOLDER} ok"),
        ("@iso-timestamp", "order 12026-12-04 and 2026-12-045", "order 12026-12-04 and 2026-12-045"),
        ("@uuid", "id 0b9f5a8e-3c4d-4e5f-8a9b-0c1d2e3f4a5b.", f"id {PLACEHOLDER}."),
        ("@uuid", "id 0b9f5a8e-3c4d-4e5f-8a9b-0c1d2e3f4a5b7", "id 0b9f5a8e-3c4d-4e5f-8a9b-0c1d2e3f4a5b7"),
        (r"re:req-\d+", "Request req-42, again req-7", f"Request {PLACEHOLDER}, again {PLACEHOLDER}"),
        ("re:x*", "abc", "abc"),
    ],
)  # fmt: skip
def test_a_pattern_masks_its_matches_inside_every_string(
    spec: str, text: str, expected: str
) -> None:
    assert masked({"k": [text]}, spec) == {"k": [expected]}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("@date", "unknown built-in mask '@date'; the built-ins are @iso-timestamp, @uuid"),
        ("re:(", "'re:(' is not a valid regular expression"),
        ("a..", "cannot read the JSON path 'a..'"),
        ("$", "names the whole value"),
        ("", "is not a mask"),
        (3, "3 is not a mask"),
    ],
)
def test_a_mask_that_cannot_be_read_is_a_config_error(spec: Any, message: str) -> None:
    with pytest.raises(tracely.ConfigError, match="ignore") as info:
        parse_mask(spec)
    assert message in str(info.value)


# -- properties -------------------------------------------------------------------------------

mask_specs = st.lists(
    st.sampled_from(
        [
            "@iso-timestamp",
            "@uuid",
            "$..a",
            "$.a",
            "[0]",
            "[*].b",
            "$.*",
            "$..b[0]",
            "re:a",
            "re:[0-9]+",
            "re:MASK",
            r"re:\[",
        ]
    ),
    max_size=4,
)
volatile_text = st.text(alphabet="0123456789-:TZ.+abcdef[MASKED] ", max_size=40)
values = st.recursive(
    json_values | volatile_text,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3)
    ),
    max_leaves=12,
)


@given(values, mask_specs)
def test_masking_is_idempotent(value: Any, specs: list[str]) -> None:
    masks = masks_from(specs)
    once, _ = masks.apply(canonical(value))
    twice, applied_again = masks.apply(once)
    assert twice == once and applied_again == ()


@given(values, mask_specs)
def test_masking_never_changes_the_value_it_is_given(value: Any, specs: list[str]) -> None:
    given_value = canonical(value)
    before = copy.deepcopy(given_value)
    masks_from(specs).apply(given_value)
    assert given_value == before


def _json(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


@given(values, values, mask_specs)
def test_masks_apply_to_both_sides_alike(a: Any, b: Any, specs: list[str]) -> None:
    masks = masks_from(specs)
    key_a, key_b = CallKey(call_key(a).text, masks), CallKey(call_key(b).text, masks)
    # Compared as JSON, which tells false from 0 and 1 from 1.0 (Python's == does not)
    same = _json(masks.apply(canonical(a))[0]) == _json(masks.apply(canonical(b))[0])
    assert key_a.matches(call_key(b)) == key_b.matches(call_key(a)) == same
    # a value matches itself whatever the masks
    assert key_a.matches(call_key(a))


@given(values, values, mask_specs)
def test_masking_never_changes_what_is_served_or_recorded(
    recorded_input: Any, actual_input: Any, specs: list[str]
) -> None:
    output = {"answer": "It is 2026-12-04", "id": "0b9f5a8e-3c4d-4e5f-8a9b-0c1d2e3f4a5b"}
    bundle = {
        "llm": {"m": [{"input": recorded_input, "output": output}]},
        "tools": {"t": [{"args": recorded_input, "output": output}]},
    }
    with tracely.fixtures(bundle, strict=False, ignore=specs):
        served_llm = tracely.call_llm("m", _boom, input=actual_input, ignore=["@uuid"])
        served_tool = tracely.call_tool("t", lambda: output, args=actual_input, ignore=specs)
    assert served_llm == output and served_tool == output


# -- in replay --------------------------------------------------------------------------------


def test_a_date_in_the_prompt_diverges_without_a_mask() -> None:
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03"))) as rep:
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-04"))
    assert rep.diverged == ["llm:gpt-4o"] and not rep.clean


def test_a_per_call_mask_keeps_a_dated_prompt_clean_and_is_reported() -> None:
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03"))) as rep:
        answer = tracely.call_llm(
            "gpt-4o", _boom, input=_prompt("2026-12-04"), ignore=["@iso-timestamp"]
        )
    assert answer == "Sunny"
    assert rep.diverged == [] and rep.clean
    assert rep.masked == {"llm:gpt-4o": ["@iso-timestamp"]}
    assert rep.to_dict()["masked"] == {"llm:gpt-4o": ["@iso-timestamp"]}


def test_only_the_masked_part_is_left_out() -> None:
    recorded = _prompt("2026-12-03")
    changed = _prompt("2026-12-04")
    changed[1]["content"] = "weather in Bergen?"
    with tracely.fixtures(_llm_bundle(recorded)) as rep:
        tracely.call_llm("gpt-4o", _boom, input=changed, ignore="@iso-timestamp")
    assert rep.diverged == ["llm:gpt-4o"]


def test_an_unneeded_mask_is_not_reported() -> None:
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03"))) as rep:
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-03"), ignore=["@iso-timestamp"])
    assert rep.clean and rep.masked == {}


def test_a_masked_tool_arg_matches_and_the_rest_still_must() -> None:
    bundle = {
        "tools": {
            "get_order": [{"args": {"order_id": 7, "request_id": "r-1"}, "output": "shipped"}]
        }
    }
    with tracely.fixtures(bundle) as rep:
        out = tracely.call_tool(
            "get_order", _boom, args={"order_id": 7, "request_id": "r-2"}, ignore=["request_id"]
        )
    assert out == "shipped" and rep.clean
    assert rep.masked == {"tools:get_order": ["request_id"]}
    with tracely.fixtures(bundle), pytest.raises(tracely.ReplayError) as info:
        tracely.call_tool(
            "get_order", _boom, args={"order_id": 8, "request_id": "r-2"}, ignore=["request_id"]
        )
    # the miss shows the difference that counts, not the masked one
    assert info.value.closest[0]["differences"] == [
        {"path": "args.order_id", "recorded": 7, "actual": 8}
    ]


def test_observe_takes_masks(capture: Any) -> None:
    @tracely.observe(as_type="tool", ignore=["$..trace"])
    def lookup(city: str, trace: str) -> str:
        raise AssertionError("not under fixtures")

    bundle = {"tools": {"lookup": [{"args": {"city": "Oslo", "trace": "t-1"}, "output": "x"}]}}
    with tracely.fixtures(bundle) as rep:
        assert lookup("Oslo", trace="t-2") == "x"
    assert rep.clean and rep.masked == {"tools:lookup": ["$..trace"]}
    with pytest.raises(tracely.ConfigError, match="ignore= applies to tool and llm calls"):
        tracely.observe(as_type="span", ignore=["a"])


def test_async_calls_take_masks() -> None:
    import asyncio

    async def main() -> tuple[Any, Any]:
        tool = await tracely.acall_tool(
            "t", _boom, args={"at": "2026-12-04"}, ignore="@iso-timestamp"
        )
        llm = await tracely.acall_llm("m", _boom, input="at 2026-12-04", ignore="@iso-timestamp")
        return tool, llm

    bundle = {
        "tools": {"t": [{"args": {"at": "2026-12-03"}, "output": 1}]},
        "llm": {"m": [{"input": "at 2026-12-03", "output": 2}]},
    }
    with tracely.fixtures(bundle) as rep:
        assert asyncio.run(main()) == (1, 2)
    assert rep.clean and set(rep.masked) == {"tools:t", "llm:m"}


def test_the_span_records_the_actual_input_unmasked(capture: Any) -> None:
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03"))):
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-04"), ignore=["@iso-timestamp"])
    span = next(s for s in capture.spans if s.attributes.get(A.KIND) == A.KIND_LLM)
    assert orjson.loads(str(span.attributes[A.INPUT])) == _prompt("2026-12-04")
    assert A.REPLAY_DIVERGENCE not in span.attributes


# -- project settings -------------------------------------------------------------------------


def test_the_project_declares_masks_once_in_pyproject(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.tracely]\nignore = ["@iso-timestamp", "re:req-\\\\d+"]\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACELY_IGNORE", raising=False)
    recorded = _prompt("2026-12-03", "req-1")
    with tracely.fixtures(_llm_bundle(recorded)) as rep:
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-04", "req-2"))
    assert rep.clean
    assert rep.masked == {"llm:gpt-4o": ["@iso-timestamp", r"re:req-\d+"]}


def test_the_environment_and_the_argument_override_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tracely]\nignore = ["@uuid"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRACELY_IGNORE", '["@iso-timestamp"]')
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03"))) as rep:
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-04"))
    assert rep.clean
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03")), ignore=[]) as rep:
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-04"))
    assert rep.diverged == ["llm:gpt-4o"]


def test_a_bad_project_mask_names_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.tracely]\nignore = ["@today"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACELY_IGNORE", raising=False)
    with (
        pytest.raises(tracely.ConfigError, match=r"\[tool.tracely\] ignore: unknown built-in"),
        tracely.fixtures({}),
    ):
        pass


def test_the_json_report_lists_the_masks_that_applied() -> None:
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03"))) as rep:
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-04"), ignore=["@iso-timestamp"])
    result = CaseResult("c", 1, "c", "PASS", report=rep.to_dict())
    assert case_entry(result)["masked"] == {"llm:gpt-4o": ["@iso-timestamp"]}
    assert "  masked llm:gpt-4o: @iso-timestamp" in format_result(result).splitlines()


def test_masks_are_hashable_and_deduplicated() -> None:
    a = masks_from(["@uuid", "@uuid", "$.a"])
    assert a.specs == ("@uuid", "$.a") and a == masks_from(("@uuid", "$.a"))
    assert hash(a) == hash(masks_from(["@uuid", "$.a"])) and not Masks()


def test_a_changed_pyproject_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.tracely]\nignore = ["@uuid"]\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRACELY_IGNORE", raising=False)
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03"))) as rep:
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-04"))
    assert rep.diverged == ["llm:gpt-4o"]
    pyproject.write_text('[tool.tracely]\nignore = ["@uuid", "@iso-timestamp"]\n')
    with tracely.fixtures(_llm_bundle(_prompt("2026-12-03"))) as rep:
        tracely.call_llm("gpt-4o", _boom, input=_prompt("2026-12-04"))
    assert rep.clean


def test_the_project_masks_apply_to_unchanged_openai_code(capture: Any) -> None:
    import openai

    from examples.llm_server import serve
    from tests.sdk.providers._helpers import closed_url
    from tracely_sdk import providers

    def ask(client: Any, day: str) -> Any:
        system = f"Today is {day}. Call 0b9f5a8e-3c4d-4e5f-8a9b-0c1d2e3f4a5b."
        return client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "system", "content": system}, {"role": "user", "content": "hi"}],
        )

    providers.instrument("openai")
    try:
        with serve() as (server, _):
            client = openai.OpenAI(api_key="k", base_url=server.openai_base_url, max_retries=0)
            with tracely.agent("agent", input="q"):
                live = ask(client, "2026-12-03")
        bundle = orjson.loads(orjson.dumps(capture.last_bundle))
        offline = openai.OpenAI(api_key="k", base_url=closed_url("/v1"), max_retries=0)
        with tracely.fixtures(bundle) as rep:
            ask(offline, "2026-12-04")
        assert rep.diverged == ["llm:gpt-4o"]
        with tracely.fixtures(bundle, ignore=["@iso-timestamp", "@uuid"]) as rep:
            replayed = ask(offline, "2026-12-04")
    finally:
        providers.uninstrument("openai")
    assert replayed.model_dump() == live.model_dump()
    assert rep.clean and rep.masked == {"llm:gpt-4o": ["@iso-timestamp", "@uuid"]}
