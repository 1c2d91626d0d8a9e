"""Office Open XML readers: ``ooxml`` (which document a zip is, and whether it is safe to open),
``word`` (DOCX) and ``powerpoint`` (PPTX)."""
