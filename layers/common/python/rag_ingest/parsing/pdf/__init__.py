"""The PDF reader: ``extract`` (each page's text, OCR of the pages that need it, the document's
verdicts), ``budget`` (what one PDF may cost), ``cleanup`` (document-wide text rules),
``tables`` and ``rule_tables`` (tables as TABLE blocks), ``fonts`` (each font read once per
document) and ``layout`` (each page's words and their rectangles)."""
