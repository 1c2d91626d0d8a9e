"""The intake function's code asset (its handler module: ``app``)."""
