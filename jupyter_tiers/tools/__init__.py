"""Setting up: `jupyter tiers init` and the cluster in a box (sandbox)."""
