"""A block of profiler events decoded straight into the fields the importer reads (msgspec).

``orjson`` makes every event a dict and every event's ``args`` another (~1 KB of objects an
event); the importer reads eight fields of one and three of its ``args``. msgspec decodes the
array into ``Event`` structs of only those fields, its ``args`` an ``Args`` of the fields read
of them, skipping the other keys: 0.04 s against orjson's 0.10 s for the 9.8 MB ddp sample,
and a fraction of the objects to free after. A field absent is None, as ``dict.get`` gives it
(``id`` and the fields of ``args``: ``ABSENT``, where absent and null differ).

The values are ``json.loads``'s (msgspec's numbers are correctly rounded, and it keeps integers
past 64 bits as ints), while the rest of the importer reads orjson's, which makes those
integers floats: ``kineto_typed.py`` leaves any event with such an integer in a field it uses,
and anything else unusual, to the dict loop. Text msgspec refuses (``NaN``, an event that is not
an object, invalid UTF-8) is decoded by orjson, or the standard library, as before.
"""
from __future__ import annotations

from types import ModuleType

TYPED_FROM = 1 << 20
"""JSON text from this many bytes is decoded by msgspec (a smaller one decodes in less time than
importing msgspec takes)."""

_types: ModuleType | None = None
_tried = False


def _msgspec() -> ModuleType | None:
    """``kineto_msgspec``, imported at the first call; None without msgspec."""
    global _types, _tried
    if not _tried:
        _tried = True
        try:
            from photon_trace.telemetry.trace.importers import kineto_msgspec
            _types = kineto_msgspec
        except ImportError:   # pragma: no cover - depends on the environment
            _types = None
    return _types


class TypedBlock(list):
    """Events decoded as ``kineto_msgspec.Event`` structs, with the JSON text of their array
    (``text``: bytes, or the ``msgspec.Raw`` of it) for the dict loop to decode again when an
    event needs it."""
    text: bytes


def decode_events(text: bytes) -> TypedBlock | None:
    """The JSON array ``text`` of events as ``Event`` structs, or None (small, msgspec not
    installed, or text it refuses)."""
    m = _msgspec() if len(text) >= TYPED_FROM else None
    if m is None:
        return None
    try:
        block = TypedBlock(m.EVENTS.decode(text))
    except m.ERRORS:
        return None
    block.text = text
    return block


def top_level(text: bytes) -> dict | None:
    """The keys of the JSON object ``text``, each with its value's JSON text (a ``msgspec.Raw``);
    None when small, without msgspec, or refused."""
    m = _msgspec() if len(text) >= TYPED_FROM else None
    if m is None:
        return None
    try:
        keys = m.KEYS.decode(text)
    except m.ERRORS:
        return None
    return keys if type(keys) is dict else None
