"""Nsight Systems: the SQLite export (sqlite, its table queries in tables) and raw
.nsys-rep/.ncu-rep files, recognised by their magic bytes (report_files)."""
