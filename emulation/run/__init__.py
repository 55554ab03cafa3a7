"""Plumbing every command shares: options, validation, hosts, ranks, results, fidelity, the run lifecycle; never imports a command."""
