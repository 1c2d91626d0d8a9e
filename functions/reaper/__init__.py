"""The reaper function's code asset (its handler module: ``app``)."""
