"""Plain values, the shared exceptions and cluster text as text: what every layer names."""
