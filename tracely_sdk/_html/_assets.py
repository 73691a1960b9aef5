"""The pages' one stylesheet and one script: inline in a static report, served as files by
the server (whose Content-Security-Policy allows scripts from itself only).

The script only enhances: every page reads and works without it. It filters the cases table
by verdict and text, focuses the search box on ``/``, and moves between the rows of a table
or the steps of a timeline with ``j``/``k``.
"""

from __future__ import annotations

__all__ = ["CSS", "JS"]

CSS = """
:root{--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#fff;--soft:#f6f8fa;
--pass:#1a7f37;--fail:#cf222e;--warn:#9a6700;--err:#8250df;--live:#0969da}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:var(--fg);background:var(--bg)}
header.top{padding:10px 20px;border-bottom:1px solid var(--line);background:var(--soft);display:flex;gap:18px;align-items:baseline;flex-wrap:wrap}
header.top a{color:var(--fg)}
header.top strong{font-size:16px}
main{padding:16px 20px;max-width:1400px}
h1{font-size:20px;margin:4px 0 12px}h2{font-size:17px;margin:18px 0 8px}h3{font-size:15px;margin:14px 0 6px}
a{color:#0969da}a:focus-visible,summary:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible,li.step:focus-visible,tr:focus-visible{outline:2px solid #0969da;outline-offset:1px}
.muted{color:var(--muted)}
.counts{display:flex;gap:10px;flex-wrap:wrap;margin:6px 0 12px;padding:0;list-style:none}
.counts li{border:1px solid var(--line);border-radius:6px;padding:4px 10px;background:var(--soft)}
.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0 0 12px}
.meta dt{color:var(--muted)}.meta dd{margin:0}
.badge{display:inline-block;border-radius:10px;padding:0 8px;font-size:12px;font-weight:600;color:#fff;background:var(--muted);white-space:nowrap}
.v-PASS,.o-served,.o-recorded{background:var(--pass)}.v-FAIL,.o-diverged{background:var(--fail)}
.v-INCOMPLETE,.o-missed{background:var(--warn)}.v-ERRORED{background:var(--err)}
.v-LENIENT,.o-live{background:var(--live)}.v-NOT_RUN{background:#6e7781}.o-never-made{background:#6e7781}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
th{background:var(--soft);font-weight:600}
.filters{display:flex;gap:10px;align-items:center;margin:8px 0;flex-wrap:wrap}
input[type=search]{min-width:260px}input,select,button{font:inherit;padding:3px 6px}
pre{margin:2px 0;padding:6px 8px;background:var(--soft);border:1px solid var(--line);border-radius:4px;white-space:pre-wrap;word-break:break-word;max-height:28em;overflow:auto}
pre.inline{display:inline-block;margin:0;padding:0 4px;max-width:100%}
details.value>summary{cursor:pointer;color:var(--muted)}
ul.reasons{margin:4px 0 10px;padding-left:20px}
ol.timeline{list-style:none;margin:0;padding:0;border:1px solid var(--line);border-radius:6px}
ol.timeline>li.head{display:grid;grid-template-columns:1fr 1fr;background:var(--soft);font-weight:600}
ol.timeline>li.head>div{padding:4px 10px}
li.step{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);border-top:1px solid var(--line)}
li.step>div{padding:6px 10px;min-width:0}
li.step>div.recorded{border-right:1px solid var(--line)}
li.step.o-diverged,li.step.o-missed,li.step.o-never-made,li.step.o-live{background:#fff8f0}
li.step.o-never-made>div.replay{color:var(--muted)}
li.step{background:none}
.step-title{display:flex;gap:8px;align-items:baseline;flex-wrap:wrap}
.step-title code{font-weight:600}
table.diff td,table.diff th{font-size:13px}
table.diff td.path{width:1%;white-space:nowrap;font-family:ui-monospace,monospace}
table.diff td{width:49%}
.absent{color:var(--muted);font-style:italic}
section.case-page{border-top:2px solid var(--line);margin-top:16px}
.report section.case-page{display:none}.report section.case-page:target{display:block}
.report:has(section.case-page:target) #index{display:none}
form.inline{display:inline}
form.signout{float:right;margin:0 0 6px 10px}
.error{color:var(--fail)}
.pager{display:flex;gap:14px;margin:10px 0}
ol.timeline.alone li.step{grid-template-columns:minmax(0,1fr)}ol.timeline.alone li.step:first-child{border-top:0}
ol.timeline.alone li.step>div.recorded{border-right:0}
.report:has(section.case-page.only) #index,.report section.case-page.only{display:block}
.scroll{overflow-x:auto;max-width:100%}
code,dd,td,.said{overflow-wrap:anywhere}
.jk{color:#0550ae}.js{color:#0a3069}.jn{color:#953800}.jl{color:#8250df}
del{background:#ffebe9;color:#82071e;text-decoration:line-through}
ins{background:#dafbe1;color:#116329;text-decoration:none;font-weight:600}
.cut{margin:2px 0;color:var(--muted)}
.cut textarea{display:block;width:100%;font:12px ui-monospace,monospace}
.fact{font-size:12px;color:var(--muted);border:1px solid var(--line);border-radius:8px;padding:0 6px;white-space:nowrap}
ol.chat{list-style:none;margin:4px 0;padding:0;display:flex;flex-direction:column;gap:4px}
li.msg{border:1px solid var(--line);border-radius:8px;padding:4px 8px;background:var(--bg);max-width:92%}
li.msg .role{display:block;font-size:11px;font-weight:600;text-transform:uppercase;color:var(--muted)}
li.msg .said{white-space:pre-wrap}
li.r-system{background:var(--soft);max-width:100%}
li.r-user{align-self:flex-end;background:#ddf4ff;border-color:#b6e3ff}
li.r-assistant,li.r-model{background:#fbefff;border-color:#ecd8ff}
li.r-tool{background:#dafbe1;border-color:#aceebb}
.tool-call{font-size:13px}
section.waterfall{margin:6px 0 10px}
ol.waterfall{list-style:none;margin:0;padding:0;border:1px solid var(--line);border-radius:6px}
li.w-row{display:grid;grid-template-columns:minmax(0,16em) minmax(0,1fr) 12em;gap:8px;align-items:center;padding:2px 8px;border-top:1px solid var(--line)}
li.w-row:first-child{border-top:0}
li.w-row code{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
svg.w-bar{display:block;width:100%;height:10px;background:var(--soft)}
.w-llm{fill:#8250df}.w-tool{fill:#1a7f37}
.w-time{font-size:12px;color:var(--muted);white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
@media (max-width:700px){
header.top,main{padding-left:10px;padding-right:10px}
ol.timeline>li.head{display:none}
li.step{grid-template-columns:minmax(0,1fr)}
li.step>div.recorded{border-right:0;border-bottom:1px dashed var(--line)}
input[type=search]{min-width:0;width:100%}
.meta{grid-template-columns:minmax(0,1fr)}.meta dt{margin-top:4px}
li.w-row{grid-template-columns:minmax(0,1fr) auto;grid-template-areas:"label time" "bar bar";row-gap:2px}
li.w-row .w-label{grid-area:label}li.w-row .w-time{grid-area:time;text-align:right}li.w-row svg.w-bar{grid-area:bar}
li.msg{max-width:100%}
table.diff thead{display:none}
table.diff,table.diff tbody,table.diff tr,table.diff td{display:block;width:auto}
table.diff td.path{width:auto;white-space:normal;border-bottom:0;padding-bottom:0;font-weight:600}
table.diff td[data-side]::before{content:attr(data-side);display:block;font-size:11px;color:var(--muted);text-transform:uppercase}
}
"""

JS = r"""
(function () {
  "use strict";
  function rows() { return Array.prototype.slice.call(document.querySelectorAll("tr[data-verdict]")); }
  function applyFilter() {
    var verdict = document.getElementById("verdict-filter");
    var search = document.getElementById("case-search");
    var want = verdict ? verdict.value : "";
    var text = search ? search.value.trim().toLowerCase() : "";
    var shown = 0;
    rows().forEach(function (row) {
      var ok = (!want || row.getAttribute("data-verdict") === want) &&
        (!text || (row.getAttribute("data-search") || "").indexOf(text) !== -1);
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    var count = document.getElementById("shown-count");
    if (count) { count.textContent = String(shown); }
  }
  function items() {
    var list = document.querySelectorAll("section.case-page:target li.step, main.page li.step");
    if (!list.length) { list = document.querySelectorAll("tr[data-verdict]:not([hidden]), tr.row"); }
    return Array.prototype.slice.call(list).filter(function (el) { return el.offsetParent !== null; });
  }
  function move(step) {
    var list = items();
    if (!list.length) { return; }
    var at = list.indexOf(document.activeElement);
    var next = list[Math.max(0, Math.min(list.length - 1, at < 0 ? 0 : at + step))];
    if (!next.hasAttribute("tabindex")) { next.setAttribute("tabindex", "-1"); }
    next.focus();
  }
  document.addEventListener("DOMContentLoaded", function () {
    ["verdict-filter", "case-search"].forEach(function (id) {
      var el = document.getElementById(id);
      if (el) { el.addEventListener("input", applyFilter); el.addEventListener("change", applyFilter); }
    });
    applyFilter();
  });
  document.addEventListener("keydown", function (event) {
    var target = event.target;
    var typing = target && (target.tagName === "INPUT" || target.tagName === "SELECT" || target.tagName === "TEXTAREA");
    if (event.key === "/" && !typing) {
      var search = document.getElementById("case-search");
      if (search) { event.preventDefault(); search.focus(); }
    } else if ((event.key === "j" || event.key === "k") && !typing && !event.ctrlKey && !event.metaKey) {
      event.preventDefault();
      move(event.key === "j" ? 1 : -1);
    } else if (event.key === "Enter" && !typing && target && target.matches && target.matches("tr[data-href]")) {
      window.location.href = target.getAttribute("data-href");
    }
  });
})();
"""
