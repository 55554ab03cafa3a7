"""Plumbing every command shares: options, validation, hosts, ranks, the live samplers, the run lifecycle; never imports a
command."""
