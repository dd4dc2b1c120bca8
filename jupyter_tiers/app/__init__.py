"""What %tiers, `jupyter tiers` and the REST API do, as plain calls (actions), and the views' plain-
data state."""
