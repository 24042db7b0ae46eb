"""The agent hosts a team runs: their heartbeats, the bundles they shipped (each once, by
its idempotency key) and the captures people ask them for."""
