#!/usr/bin/env bash
# Vagrant provisioning: exactly the project's own setup (the path `make test` and CI take).
set -euo pipefail
cd /vagrant
bash scripts/setup.sh
echo "dmlbed is ready: vagrant ssh -c 'cd /vagrant && sudo make demo'"
