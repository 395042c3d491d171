"""A request body from bytes to a checked model: JSON that cannot hurt what reads it next.

The body's size is bounded before it is read (``middleware.py``). Here: JSON without
``NaN``/``Infinity`` literals (not JSON, though Python's parser takes them) or
numbers past a double's range (``1e400`` would parse to infinity), no
deeper than ``MAX_DEPTH`` (deep nesting costs recursion in every later reader: the
parser, pydantic, the schema compiler), and no lone surrogate in any string (a
``\\ud800`` escape parses to a Python string that cannot be encoded, so the
tokenizer would fail on it). Then the strict pydantic model. Each failure is a 400
naming the field.
"""
from __future__ import annotations

import asyncio
import json
import math
import re
from typing import Any

from pydantic import BaseModel, ValidationError

from photon_trace.server.errors import bad_request

MAX_DEPTH = 64              # nesting of arrays and objects in a request body
OFF_LOOP_BYTES = 64 * 1024  # bodies larger than this are parsed on a worker thread
_UNION_TAG = frozenset({"str", "int", "float", "bool", "none"})


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def parse_json(raw: bytes) -> Any:
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        field = _deep_field(raw)
        raise bad_request(f"{field or 'the request body'} nests deeper than {MAX_DEPTH} levels", field,
                          "too_deep") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"the request body is not valid JSON: {e}", code="invalid_json") from None


_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}:]')


def _deep_field(raw: bytes) -> str | None:
    """The top-level key under which ``raw`` nests past ``MAX_DEPTH`` (None: the body itself)."""
    depth, key, last = 0, None, None
    for m in _TOKEN.finditer(raw):
        tok = m.group()
        if tok in (b"[", b"{"):
            depth += 1
            if depth > MAX_DEPTH:
                return key
        elif tok in (b"]", b"}"):
            depth -= 1
        elif tok == b":":
            if depth == 1 and last is not None:
                try:
                    key = json.loads(last)
                except ValueError:
                    key = None
                if key is not None and not _encodable(key):   # it goes into the error message
                    key = None
        last = tok if tok.startswith(b'"') else None
    return key


def check_tree(data: Any) -> None:
    """Refuse nesting past ``MAX_DEPTH`` and strings (keys included) with lone surrogates."""
    todo: list[tuple[Any, str, int]] = [(data, "", 0)]
    while todo:
        node, path, depth = todo.pop()
        if isinstance(node, str):
            if not node.isascii() and not _encodable(node):
                raise bad_request(f"{path or 'the body'}: the string holds a lone UTF-16 surrogate, which is not "
                                  f"a character", path or None, "invalid_string")
            continue
        if isinstance(node, float) and not math.isfinite(node):   # 1e400 parses to inf
            raise bad_request(f"{path or 'the body'}: the number is out of the range of a double", path or None)
        if not isinstance(node, (dict, list)):
            continue
        if depth >= MAX_DEPTH:
            raise bad_request(f"{path}: the request nests deeper than {MAX_DEPTH} levels", _top(path),
                              "too_deep")
        if isinstance(node, dict):
            for key, value in node.items():
                child = f"{path}.{key}" if path else key
                if not key.isascii() and not _encodable(key):
                    raise bad_request(f"{path or 'the body'}: a key holds a lone UTF-16 surrogate", path or None,
                                      "invalid_string")
                todo.append((value, child, depth + 1))
        else:
            todo.extend((value, f"{path}[{i}]", depth + 1) for i, value in enumerate(node))


def _encodable(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _top(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def check_unsupported(data: dict, names: tuple[str, ...]) -> dict:
    """A 400 naming the first OpenAI field we do not implement that is set; ``data`` without
    those left unset (null, false or empty: what they mean is what we do)."""
    for name in names:
        value = data.get(name)
        if value is not None and value is not False and value != [] and value != {}:
            raise bad_request(f"`{name}` is not supported by this server (send null or leave it out)", name,
                              "unsupported_parameter")
    return {k: v for k, v in data.items() if k not in names}


def to_model(data: Any, model: type[BaseModel]) -> Any:
    if not isinstance(data, dict):
        raise bad_request("the request body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        errors = e.errors()
        param = param_of(errors[0]["loc"])
        same = [x for x in errors if param_of(x["loc"]) == param]
        if len(same) > 1:   # a union: each allowed type failed
            msg = "; ".join(dict.fromkeys(x["msg"] for x in same))
            raise bad_request(f"{param}: no allowed type matches ({msg})", param) from None
        first = errors[0]
        if first["type"] == "extra_forbidden":
            raise bad_request(f"`{param}` is not a field of this request (unknown fields are refused, "
                              f"not ignored)", param, "unknown_parameter") from None
        raise bad_request(f"{param}: {first['msg']}" if param else first["msg"], param or None) from None


def param_of(loc: tuple) -> str:
    """pydantic's error location as a parameter name: ``messages[0].role`` (union tags dropped)."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in _UNION_TAG or "[" in part or "-" in part:
            continue
        else:
            out += f".{part}" if out else part
    return out


async def parse(raw: bytes, model: type[BaseModel], unsupported: tuple[str, ...] = ()) -> Any:
    """``raw`` as ``model``, or a 400; large bodies are parsed off the event loop."""
    if len(raw) > OFF_LOOP_BYTES:
        data = await asyncio.to_thread(_parse_checked, raw)
    else:
        data = _parse_checked(raw)
    if isinstance(data, dict):
        data = check_unsupported(data, unsupported)
    return to_model(data, model)


def _parse_checked(raw: bytes) -> Any:
    data = parse_json(raw)
    check_tree(data)
    return data
