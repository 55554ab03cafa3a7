"""Results: what a job's ranks recorded, turned into per-iteration tables, typed summaries, fidelity verdicts, judged
claims, figures and reports; files.py is the one module that reads and writes result files."""
