"""Prometheus naming rules, as ``promtool check metrics`` applies them (client_golang's promlint),
over families parsed with prometheus_client's own parser."""
from __future__ import annotations

import re

from prometheus_client.parser import text_string_to_metric_families

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_CAMEL = re.compile(r"[a-z][A-Z]")
# units that have a base unit (promlint's list): seconds, bytes, ... not milli-, kilo-, ...
_NON_BASE = ("milliseconds", "microseconds", "nanoseconds", "minutes", "hours", "days", "weeks",
             "kilobytes", "megabytes", "gigabytes", "kibibytes", "mebibytes", "gibibytes",
             "millis", "micros", "nanos", "percent", "celsius", "fahrenheit")
_ABBREVIATED = ("_ms", "_us", "_ns", "_sec", "_secs", "_kb", "_mb", "_gb", "_pct")
_TYPE_WORDS = ("counter", "gauge", "histogram", "summary")


# Names another program chose, exported as that program spells them so its dashboards work:
# vLLM's carry a colon (Prometheus keeps colons for recording rules), and only that is excused.
FOREIGN_PREFIXES = ("vllm:",)


def lint(text: str) -> list[str]:
    """Every problem with the metric names in an exposition ``text`` (empty: none)."""
    problems = []
    # The parser normalises names (a counter's samples get _total whatever the text said),
    # so the exposed names are read from the text itself.
    raw = {line.split()[0].split("{")[0] for line in text.splitlines() if line and not line.startswith("#")}
    for fam in text_string_to_metric_families(text):
        name = fam.name
        if name.endswith("_created"):   # the Python client's creation-time series, not ours
            continue
        samples = {r for r in raw if r == name or r.startswith(name + "_")}
        where = f"{name} ({fam.type})"
        if not _NAME.match(name) or (":" in name and not name.startswith(FOREIGN_PREFIXES)):
            problems.append(f"{where}: not a plain metric name (no colons, [a-zA-Z0-9_])")
        if _CAMEL.search(name) or any(_CAMEL.search(k) for s in fam.samples for k in s.labels):
            problems.append(f"{where}: names should be snake_case")
        if not fam.documentation:
            problems.append(f"{where}: no HELP text")
        if fam.type == "counter" and not all(s.endswith(("_total", "_created")) for s in samples):
            problems.append(f"{where}: counter samples should end in _total")
        if fam.type != "counter" and (name.endswith("_total") or any(s.endswith("_total") for s in samples)):
            problems.append(f"{where}: only counters end in _total")
        if fam.type not in ("histogram", "summary") and name.endswith(("_count", "_sum", "_bucket")):
            problems.append(f"{where}: _count/_sum/_bucket are reserved for histograms and summaries")
        parts = name.split("_")
        for unit in _NON_BASE:
            if unit in parts:
                problems.append(f"{where}: use a base unit, not {unit}")
        if any(name.endswith(a) or f"{a}_" in name for a in _ABBREVIATED):
            problems.append(f"{where}: no abbreviated units")
        if any(w in parts for w in _TYPE_WORDS):
            problems.append(f"{where}: the metric type does not belong in its name")
        if fam.type == "gauge" and any(w in parts for w in ("fraction", "ratio", "share")) and \
                not name.endswith("_ratio"):
            problems.append(f"{where}: a ratio ends in _ratio")
        if "per" in parts and fam.type == "gauge":
            problems.append(f"{where}: a precomputed rate; export a counter and let Prometheus rate() it")
    return problems
