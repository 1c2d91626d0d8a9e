"""Generated scanned pages (real corpus text typeset onto images) for measuring OCR: see generate.py."""
