"""msgspec's types and decoders for ``kineto_structs.py``, imported at its first use (msgspec
and what it imports cost ~10 ms, more than a small trace takes to decode)."""
from typing import Any, Optional

import msgspec

ABSENT = msgspec.UNSET
ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)


class Args(msgspec.Struct, gc=False):
    """The fields of ``args`` the importer reads: of every span, of copies and ``cuda_sync``
    records (``kineto_events.KEPT_ARGS``), of thread names."""
    correlation: Any = ABSENT
    stream: Any = ABSENT
    device: Any = ABSENT
    wait_on_stream: Any = ABSENT
    cuda_sync_kind: Any = ABSENT
    bytes: Any = ABSENT
    name: Any = ABSENT


class Event(msgspec.Struct, gc=False):
    """An event's fields the importer reads; absent ones None, as ``dict.get`` gives them (``id``:
    ``ABSENT``, a flow needs one)."""
    ph: Any = None
    cat: Any = None
    name: Any = None
    ts: Any = None
    dur: Any = None
    pid: Any = None
    tid: Any = None
    id: Any = ABSENT
    args: Optional[Args] = None      # absent or null; another value than an object: not decoded here


EVENTS = msgspec.json.Decoder(list[Event])
KEYS = msgspec.json.Decoder(dict[str, msgspec.Raw])
