"""The source sync function's code asset (its handler module: ``app``)."""
