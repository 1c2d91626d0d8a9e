"""OCR of PDF pages without a text layer: ``engine`` (the engine port, what it returns, a page
rasterised to PNG) and ``local`` (Tesseract and RapidOCR, offline). Amazon Textract's engine is an
adapter (``rag_ingest.adapters.textract``)."""
