"""Spreadsheet readers: XLSX (``xlsx``) and delimited text (``delimited``: CSV, TSV), laid out as
sections of tables by ``grid``."""
