"""Nsight Compute: the CSV export of `ncu --csv` (csv_export)."""
