# dmlbed: `make demo` (the main job) and `make test` (the whole suite); both run setup first.
PY := .venv/bin/python
DMLBED := .venv/bin/dmlbed

.PHONY: setup demo test test-fast benchmark docs vm-test clean

setup:
	@bash scripts/setup.sh

demo: setup
	$(DMLBED) compare configs/demo.yaml --out results/demo --force

test: setup
	$(PY) tests/run.py

test-fast: setup
	$(PY) -m pytest tests -rs -m "not emulation" -n auto

benchmark: setup
	$(PY) -m pytest tests -m benchmark -rs
	-$(DMLBED) reproduce --bench --out results/bench --force
	$(PY) scripts/limits.py results/bench/limits
	$(PY) scripts/codec_rates.py results/codecs-rates
	$(PY) scripts/codec_rates.py results/codecs-rates-slow --config configs/codecs-rates-slow-device.yaml
	$(PY) labs/handouts.py
	$(PY) scripts/benchmark_page.py

# The reference pages generated from the code, then the site (build/site); the papers page is written by
# `dmlbed reproduce --all --docs`, the benchmark page by `make benchmark`.
docs: setup
	$(PY) scripts/docs.py
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet

# A Debian 12 VM (debootstrap, provisioned by setup.sh) boots under QEMU and runs dmlbed on the kernel datapath.
vm-test: setup
	$(PY) scripts/vm_test.py --out results/vm-test

clean:
	-$(DMLBED) clean
	rm -rf .pytest_cache build *.egg-info
