"""ResponseFormat: what a request asks its output to look like, validated when it is built."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

KINDS = ("text", "json_object", "json_schema", "regex", "grammar", "point", "detect")
SPATIAL_KINDS = ("point", "detect")

# Moondream caps a detect answer at 50 objects; the same default serves point.
DEFAULT_MAX_COUNT = 50

# Deeper schemas cost recursion in every reader (jsonschema, xgrammar's converter): a
# schema nested ~100 levels ran out of Python's stack. 64 JSON levels is ~30 object levels.
MAX_SCHEMA_DEPTH = 64

# Which kind needs which field; every other field must be left unset.
_FIELD_OF_KIND = {"json_schema": "schema", "regex": "regex", "grammar": "grammar"}


class ConstraintError(ValueError):
    """A response format that cannot be honoured; raised when the request is added."""


class ConstraintViolation(RuntimeError):
    """A committed token the constraint did not allow: a masking bug, never a user error."""


@dataclass(frozen=True, slots=True)
class ResponseFormat:
    """The shape a request's output must take. Hashable: it keys the compiled-grammar cache.

    ``point``: one to ``max_count`` (x, y) coordinate-bin pairs, then EOS.
    ``detect``: zero to ``max_count`` boxes (x_center, y_center coordinate bins, width, height
    size bins), then EOS; zero boxes (EOS at once) is the answer "nothing found".
    ``json_object``: any JSON object. ``json_schema``: JSON matching ``schema``.
    ``regex``: text that fully matches ``regex``. ``grammar``: text in the EBNF ``grammar``
    (xgrammar's dialect, start rule ``root``).
    """

    kind: str = "text"
    schema: str | None = None     # JSON Schema as JSON text (a dict is accepted); stored compact, key order kept
    regex: str | None = None      # pattern the whole output must match
    grammar: str | None = None    # EBNF source with a `root` rule
    max_count: int | None = None  # point/detect: most points or boxes; None means DEFAULT_MAX_COUNT

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConstraintError(f"unknown response format kind {self.kind!r}; expected one of {', '.join(KINDS)}")
        if isinstance(self.schema, (dict, bool)):
            if _depth(self.schema) > MAX_SCHEMA_DEPTH:
                raise ConstraintError(f"JSON Schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
            object.__setattr__(self, "schema", json.dumps(self.schema, separators=(",", ":")))
        needed = _FIELD_OF_KIND.get(self.kind)
        for name in ("schema", "regex", "grammar"):
            value = getattr(self, name)
            if name == needed:
                if not isinstance(value, str) or not value:
                    raise ConstraintError(f"kind {self.kind!r} needs a non-empty {name}")
            elif value is not None:
                raise ConstraintError(f"{name} is not used by kind {self.kind!r}")
        if self.kind == "json_schema":
            # Compact but in the given key order: xgrammar emits properties in schema order.
            object.__setattr__(self, "schema", json.dumps(_check_schema_text(self.schema), separators=(",", ":")))
        if self.kind in SPATIAL_KINDS:
            if self.max_count is None:
                object.__setattr__(self, "max_count", DEFAULT_MAX_COUNT)
            elif isinstance(self.max_count, bool) or not isinstance(self.max_count, int) or self.max_count < 1:
                raise ConstraintError(f"max_count must be an integer >= 1, got {self.max_count!r}")
        elif self.max_count is not None:
            raise ConstraintError(f"max_count is only used by point and detect, not {self.kind!r}")

    @property
    def is_constrained(self) -> bool:
        return self.kind != "text"

    @property
    def is_spatial(self) -> bool:
        return self.kind in SPATIAL_KINDS

    @property
    def schema_value(self) -> Any:
        """The parsed JSON Schema (json_schema only)."""
        return None if self.schema is None else json.loads(self.schema)


def _check_schema_text(text: str) -> Any:
    """The parsed schema, if it is one."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ConstraintError(f"JSON Schema nests deeper than {MAX_SCHEMA_DEPTH} levels") from None
    except json.JSONDecodeError as e:
        raise ConstraintError(f"JSON Schema is not valid JSON: {e}") from None
    if _depth(value) > MAX_SCHEMA_DEPTH:
        raise ConstraintError(f"JSON Schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
    if not isinstance(value, (dict, bool)):
        raise ConstraintError(f"JSON Schema must be an object or a boolean, got {type(value).__name__}")
    try:
        import jsonschema
    except ImportError:  # xgrammar's converter still rejects what it cannot read
        return value
    try:
        jsonschema.validators.validator_for(value).check_schema(value)
    except jsonschema.SchemaError as e:
        where = "/".join(str(p) for p in e.absolute_path) or "(root)"
        raise ConstraintError(f"invalid JSON Schema at {where}: {e.message}") from None
    return value


def _depth(value: Any) -> int:
    """Nesting depth of arrays and objects (iterative: no recursion on deep input)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        node, d = todo.pop()
        if isinstance(node, dict):
            node = list(node.values())
        if isinstance(node, list):
            deepest = max(deepest, d)
            todo.extend((v, d + 1) for v in node)
    return deepest
