"""dmlbed: network emulation testbed for distributed machine learning."""

from setuptools import find_packages, setup

setup(
    name="dmlbed",
    version="0.1.0",
    license="BSD-3-Clause",  # LICENSE; Mininet's licence is BSD-style and Ryu's Apache-2.0: both allow it
    description="Emulated data-center networks (BCube, Fat-Tree, trees) running real PyTorch "
                "gradient synchronization under a Ryu controller",
    packages=find_packages(include=["dmlbed", "dmlbed.*", "emulation", "emulation.*", "controllers", "controllers.*",
                                    "workloads", "workloads.*"]),
    package_data={"workloads": ["model_table.json", "datasets/digits.csv.gz"],
                  "emulation.run": ["measured_limits.json"]},
    python_requires=">=3.10",  # dataclass(slots=True)
    install_requires=["numpy", "pyyaml", "tqdm", "matplotlib", "scipy", "setproctitle", "lz4"],
    extras_require={"ryu": ["ryu==4.34", "eventlet==0.33.3", "dnspython>=2"],
                    "torch": ["torch==2.13.0"], "test": ["pytest"]},
    entry_points={"console_scripts": ["dmlbed=emulation.commands.cli:main",
                                      "dmlbed-ryu-manager=controllers.ryu_manager:main",
                                      "dmlbed-mn=emulation.net.topos:main"]},
)
