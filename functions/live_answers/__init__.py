"""The live_answers function's code asset (its handler module: ``app``)."""
