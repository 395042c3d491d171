"""PromQL, parsed for what a dashboard asks of a server: the series its queries select.

A grammar (lark, Earley) for the PromQL a dashboard writes: numbers and strings, arithmetic,
function calls (the functions PromQL has: an unknown one is a parse error, not a guess),
aggregations with ``by``/``without`` before or after their argument, vector selectors with
label matchers and range selectors. What does not parse raises ``lark`` errors: a test
built on it fails on a query it does not understand rather than skipping it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from lark import Lark, Token, Transformer

FUNCTIONS = (
    "abs absent absent_over_time avg_over_time ceil changes clamp clamp_max clamp_min count_over_time "
    "day_of_month day_of_week day_of_year days_in_month delta deriv exp floor histogram_avg histogram_count "
    "histogram_fraction histogram_quantile histogram_stddev histogram_stdvar histogram_sum holt_winters hour "
    "idelta increase irate label_join label_replace last_over_time ln log10 log2 max_over_time min_over_time "
    "minute month predict_linear present_over_time quantile_over_time rate resets round scalar sgn sort "
    "sort_desc sqrt stddev_over_time stdvar_over_time sum_over_time time timestamp vector year").split()
AGGREGATIONS = "sum avg min max count stddev stdvar group topk bottomk quantile count_values".split()

_GRAMMAR = r"""
?start: expr
?expr: expr ADD_OP term -> binary
     | term
?term: term MUL_OP unary -> binary
     | unary
?unary: "-" unary -> negate
      | atom
?atom: NUMBER -> number
     | STRING -> string
     | "(" expr ")"
     | aggregation
     | call
     | selector
aggregation: AGG grouping "(" args ")"
           | AGG "(" args ")" grouping?
grouping: GROUP_KW "(" [LABEL ("," LABEL)*] ")"
call: FUNC "(" [args] ")"
args: expr ("," expr)*
selector: METRIC matchers? range?
        | matchers range?
matchers: "{" [matcher ("," matcher)* ","?] "}"
matcher: LABEL MATCH_OP STRING
range: "[" DURATION "]"

AGG.3: /(%(aggs)s)(?![a-zA-Z0-9_:])/
FUNC.3: /(%(funcs)s)(?=\s*\()/
GROUP_KW.3: /(by|without)(?![a-zA-Z0-9_:])/
METRIC: /[a-zA-Z_:][a-zA-Z0-9_:]*/
LABEL: /[a-zA-Z_][a-zA-Z0-9_]*/
MATCH_OP: "=~" | "!~" | "!=" | "="
STRING: /"(\\.|[^"\\])*"/
DURATION: /([0-9]+(ms|s|m|h|d|w|y))+/
NUMBER: /[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?/
ADD_OP: "+" | "-"
MUL_OP: "*" | "/" | "%%"
%%ignore /\s+/
""" % {"aggs": "|".join(AGGREGATIONS), "funcs": "|".join(sorted(FUNCTIONS, key=len, reverse=True))}

_PARSER = Lark(_GRAMMAR, parser="earley", lexer="dynamic", ambiguity="resolve")


@dataclass(frozen=True)
class Selector:
    """One vector selector: a metric name and its label matchers (label -> (operator, value))."""
    metric: str
    matchers: dict[str, tuple[str, str]] = field(default_factory=dict)

    def matches(self, labels: dict[str, str]) -> bool:
        """Whether a series with ``labels`` is selected by every matcher."""
        for label, (op, value) in self.matchers.items():
            have = labels.get(label, "")
            ok = {"=": have == value, "!=": have != value,
                  "=~": re.fullmatch(value, have) is not None, "!~": re.fullmatch(value, have) is None}[op]
            if not ok:
                return False
        return True


@dataclass
class Query:
    """What one PromQL expression asks for: its selectors, the functions it calls, and each
    grouping (``by``/``without`` labels) with the selectors it aggregates over."""
    selectors: list[Selector]
    functions: list[str]
    groupings: list[tuple[str, tuple[str, ...], list[Selector]]]


class _Collect(Transformer):
    def __init__(self) -> None:
        super().__init__()
        self.functions: list[str] = []
        self.groupings: list[tuple[str, tuple[str, ...], list[Selector]]] = []

    # each node evaluates to the list of selectors beneath it
    def number(self, _):
        return []

    def string(self, _):
        return []

    def negate(self, items):
        return items[0]

    def binary(self, items):
        return items[0] + items[2]

    def args(self, items):
        return [s for item in items for s in item]

    def call(self, items):
        self.functions.append(str(items[0]))
        return items[1] or []

    def grouping(self, items):
        return ("grouping", str(items[0]), tuple(str(t) for t in items[1:] if t is not None))

    def aggregation(self, items):
        groups = [i for i in items if isinstance(i, tuple)]
        selectors = [s for i in items if isinstance(i, list) for s in i]
        for _, kind, labels in groups:
            self.groupings.append((kind, labels, selectors))
        return selectors

    def matcher(self, items):
        label, op, value = items
        return str(label), str(op), _unquote(str(value))

    def matchers(self, items):
        return {label: (op, value) for label, op, value in (i for i in items if i is not None)}

    def range(self, items):
        return None

    def selector(self, items):
        name = next((str(i) for i in items if isinstance(i, Token)), "")
        matchers = next((i for i in items if isinstance(i, dict)), {})
        if not name:   # {__name__="..."}
            name = matchers.pop("__name__", ("=", ""))[1]
        return [Selector(name, matchers)]


def _unquote(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s[1:-1])


def parse(expr: str) -> Query:
    """The selectors, functions and groupings of ``expr`` (lark raises on what is not PromQL)."""
    collect = _Collect()
    selectors = collect.transform(_PARSER.parse(expr))
    return Query(selectors if isinstance(selectors, list) else [], collect.functions, collect.groupings)
