"""OCR of PDF pages without a text layer: ``engine`` (the engine port, what it returns, a page
rasterised to PNG) and ``local`` (Tesseract and RapidOCR, offline); ``images`` reads the text
inside a structured document's figures with the same engine. Amazon Textract's engine is an
adapter (``rag_ingest.adapters.textract``)."""
