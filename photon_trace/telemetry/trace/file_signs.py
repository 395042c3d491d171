"""What tells an Nsight Systems file by its name or first bytes, in one place: the reader
(``importers/nsys_read.py``), ``load_any``'s sniffing (``importers/sniff.py``) and the
dashboard's check of a typed path (``dashboard/sources/openable.py``) all go by these.
Nothing is imported here, so sniffing a profiler trace costs no Nsight reader or sqlite3."""

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database: an Nsight Systems export (``nsys export``)."""
REPORT_SUFFIXES = (".nsys-rep", ".qdrep")
"""Nsight Systems' own report files (binary, not SQLite): refused with the command that exports them."""
