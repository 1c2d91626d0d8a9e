"""The redrive function's code asset (its handler module: ``app``)."""
