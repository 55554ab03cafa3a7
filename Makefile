# dmlbed: `make demo` (the main job) and `make test` (the whole suite); both run setup first.
PY := .venv/bin/python
DMLBED := .venv/bin/dmlbed

.PHONY: setup demo test test-fast benchmark clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(DMLBED) compare configs/demo.yaml --out results/demo --force

test: setup
	$(PY) -m pytest tests -v -rs

test-fast: setup
	$(PY) -m pytest tests -v -rs -m "not emulation"

benchmark: setup
	$(PY) scripts/benchmark.py --out results/benchmark
	$(PY) scripts/soak.py --runs 20 --out results/soak
	$(PY) scripts/scale.py --out results/scale

clean:
	-$(DMLBED) clean
	rm -rf .pytest_cache build *.egg-info
