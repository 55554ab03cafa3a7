"""Orchestration on top of everything: one run, compare matrices, the CLI, reports."""
