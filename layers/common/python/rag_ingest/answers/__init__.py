"""Cited answers: retrieve the caller's passages, then ask a model to answer from them alone."""
