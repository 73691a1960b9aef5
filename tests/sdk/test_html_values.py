"""Values in a page: JSON pretty-printed and coloured, escaped, long values cut with a way to
the whole of them."""

from __future__ import annotations

from tracely_sdk._html._values import MAX_SHOWN, json_view, value_view

HOSTILE = "<script>alert(1)</script>"


def test_json_is_pretty_printed_with_keys_strings_numbers_and_literals_marked() -> None:
    shown = value_view({"city": "Paris", "days": [{"temp_c": -3.5, "sunny": False, "note": None}]})
    assert shown.startswith('<pre class="json">{\n  <span class="jk">&quot;city&quot;</span>:')
    assert '<span class="jn">-3.5</span>' in shown
    assert '<span class="jl">false</span>' in shown and '<span class="jl">null</span>' in shown
    assert '\n      <span class="jk">&quot;sunny&quot;</span>' in shown  # indented


def test_a_number_or_literal_inside_a_string_stays_part_of_the_string() -> None:
    shown = json_view('{"a": "true 12 \\"null\\""}')
    assert shown == (
        '{<span class="jk">&quot;a&quot;</span>: '
        '<span class="js">&quot;true 12 \\&quot;null\\&quot;&quot;</span>}'
    )


def test_recorded_markup_in_keys_and_values_is_escaped() -> None:
    shown = value_view({HOSTILE: HOSTILE, "n": list(range(40))})
    assert "<script>" not in shown
    assert shown.count("&lt;script&gt;alert(1)&lt;/script&gt;") == 2


def test_a_string_stays_text_and_is_not_coloured() -> None:
    assert value_view('{"looks": "like json"}') == (
        '<pre class="inline">{&quot;looks&quot;: &quot;like json&quot;}</pre>'
    )


def test_a_cut_value_links_to_the_whole_of_it_on_a_server() -> None:
    huge = {"text": "x" * (MAX_SHOWN * 2)}
    shown = value_view(huge, "output", full="/ui/traces/abc/raw")
    assert 'href="/ui/traces/abc/raw"' in shown
    assert "the whole output (40,016 characters)" in shown
    assert "x" * (MAX_SHOWN + 1) not in shown  # never laid out, nor sent


def test_a_cut_value_keeps_the_whole_of_it_out_of_the_layout_in_a_report() -> None:
    huge = HOSTILE + "y" * MAX_SHOWN + "THE END"
    shown = value_view(huge, "output")
    laid_out, kept = shown.split('<details class="cut">')
    assert "THE END" not in laid_out
    assert kept.startswith("<summary>… 32 more characters not shown: the whole output")
    assert '<textarea readonly rows="12" aria-label="the whole output">&lt;script&gt;' in kept
    assert kept.endswith("THE END</textarea></details></details>")
    assert "<script>" not in shown


def test_a_report_keeps_at_most_a_bounded_part_of_a_huge_value() -> None:
    from tracely_sdk._html._values import MAX_KEPT

    shown = value_view("z" * (MAX_KEPT + 10), "output")
    assert "z" * MAX_KEPT + "</textarea>" in shown and "z" * (MAX_KEPT + 1) not in shown
    assert "… 10 more characters: see the JSON report (--json)" in shown
