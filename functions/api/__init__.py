"""The api function's code asset (its handler module: ``app``)."""
