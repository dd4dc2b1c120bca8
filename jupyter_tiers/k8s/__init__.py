"""The Kubernetes serving tier. Only modules in this package import the ``kubernetes`` client,
and they import it lazily so ``%load_ext jupyter_tiers`` stays fast."""
